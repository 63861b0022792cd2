/* fastreduce-info: version, what was built in, every setting, every
 * algorithm and the resolved selection table of this job. */
#include <stdio.h>
#include <string.h>
#include <ucp/api/ucp.h>
#include <hwloc.h>
#include "config.h"   /* autoconf: FR_MPI_FLAVOR, FR_BUILT_* */
#include "settings.h"
#include "comm.h"
#include "tune.h"

static void usage(void)
{
    printf("usage: fastreduce-info [--no-table]\n"
           "  Prints the version, the optional parts built in, every FASTREDUCE_* setting,\n"
           "  every algorithm, and the selection table resolved for this job (run it under\n"
           "  mpirun to see the table of a given shape).\n");
}

int main(int argc, char **argv)
{
    int table = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-table")) table = 0;
        else { usage(); return strcmp(argv[i], "-h") && strcmp(argv[i], "--help") ? 1 : 0; }
    }
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fr_comm_t comm = NULL;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &comm);
    if (rank == 0) {
        unsigned maj, min, rel;
        ucp_get_version(&maj, &min, &rel);
        char mpiver[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(mpiver, &len);
        char *nl = strchr(mpiver, '\n');
        if (nl) *nl = '\0';
        printf("libfastreduce %s\n", fr_version());
        printf("built with: MPI %s, UCX %u.%u.%u, hwloc %s, CUDA %s, NCCL %s\n", FR_MPI_FLAVOR, maj, min, rel,
               HWLOC_VERSION, FR_BUILT_CUDA, FR_BUILT_NCCL);
        printf("running on: %s\n\n", mpiver);
        printf("settings:\n");
        fr_settings_print(stdout);
        printf("\nalgorithms:\n");
        for (int i = 0; i < fr_nalgs; i++)
            printf("  %-9s %-18s %s\n", fr_coll_name(fr_algs[i]->coll), fr_algs[i]->name, fr_algs[i]->desc);
        if (st != FR_SUCCESS) {
            printf("\nno communicator: %s: %s\n", fr_strerror(st), fr_last_error());
        } else if (table) {
            printf("\njob shape: %d rank(s), %d node(s), up to %d rank(s) per node\n", comm->size, comm->nnodes,
                   comm->ppn);
            printf("resolved selection table (first match wins; the source of each rule is in its comment):\n");
            fr_table_print(&comm->table, stdout);
        }
    }
    fr_comm_destroy(comm);
    MPI_Finalize();
    return st == FR_SUCCESS ? 0 : 1;
}

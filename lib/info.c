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
    printf("usage: fastreduce-info [--no-table] [--settings [--markdown]]\n"
           "  Prints the version, the optional parts built in, every FASTREDUCE_* setting,\n"
           "  every algorithm, and the selection table resolved for this job (run it under\n"
           "  mpirun to see the table of a given shape).\n"
           "  --settings: only the settings, each with the value rank 0's communicator took and\n"
           "  where it came from (default, environment, fr_config_t), and the variables of other\n"
           "  libraries that fastreduce reads or sets.\n"
           "  --markdown: the settings table of docs/environment.md (no MPI).\n");
}

/* The settings rank 0 uses: its communicator's snapshot (NULL: none), and
 * those read at other times (the logger's, the interposer's, the NCCL
 * set-up's) as they would be read now. */
static void print_settings(const struct fr_comm *comm)
{
    fr_settings_t s = {0};
    if (comm && fr_settings_copy(&s, &comm->set) != FR_SUCCESS) {
        fr_settings_free(&s);
        memset(&s, 0, sizeof s);
    }
    fr_settings_load(&s, NULL, 0, ~s.loaded & (FR_S_BIT(FR_S_COUNT) - 1));
    printf("settings (rank 0; read at fr_comm_create: its communicator's values):\n");
    fr_settings_print_values(&s, stdout);
    printf("\nvariables of other libraries (read or set by fastreduce):\n");
    fr_foreign_print(stdout);
    fr_settings_free(&s);
}

int main(int argc, char **argv)
{
    int table = 1, settings = 0, markdown = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-table")) table = 0;
        else if (!strcmp(argv[i], "--settings")) settings = 1;
        else if (!strcmp(argv[i], "--markdown")) markdown = 1;
        else { usage(); return strcmp(argv[i], "-h") && strcmp(argv[i], "--help") ? 1 : 0; }
    }
    if (markdown) {
        fr_settings_print_markdown(stdout);
        return 0;
    }
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fr_comm_t comm = NULL;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &comm);
    if (rank == 0 && settings) {
        print_settings(st == FR_SUCCESS ? comm : NULL);
    } else if (rank == 0) {
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

/* fastreduce-info: version, what was built in, every setting, every
 * algorithm and the resolved selection table of this job. */
#include <stdio.h>
#include <string.h>
#include <ucp/api/ucp.h>
#include <hwloc.h>
#include "config.h"   /* autoconf: FR_MPI_FLAVOR, FR_BUILT_* */
#include "internal.h"

static void usage(void)
{
    printf("usage: fastreduce-info [--no-table]\n"
           "       fastreduce-info --algorithms [--markdown]\n"
           "       fastreduce-info --settings [--markdown]\n"
           "  Prints the version, the optional parts built in, every FASTREDUCE_* setting,\n"
           "  every algorithm, and the selection table resolved for this job (run it under\n"
           "  mpirun to see the table of a given shape).\n"
           "  --algorithms: only the registry's algorithms, with the jobs they serve, their\n"
           "  rule parameters and the values the tuner tries, their tie order; no MPI.\n"
           "  --settings: only the settings, each with the value rank 0's communicator took and\n"
           "  where it came from (default, environment, fr_config_t), and the variables of other\n"
           "  libraries that fastreduce reads or sets.\n"
           "  --markdown: the table of README.md and docs/tuning.md (with --algorithms) or of\n"
           "  docs/environment.md (with --settings), without MPI.\n");
}

/* The settings rank 0 uses: its communicator's snapshot (NULL: none), and
 * those read at other times (the logger's, the interposer's, the NCCL
 * set-up's) as they would be read now. */
static void print_settings(const struct fr_comm *comm)
{
    fr_settings_t s = {0};
    if (comm && fr_settings_copy(&s, fr_comm_settings(comm)) != FR_SUCCESS) {
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

/* Which jobs @p a serves, from its traits. */
static const char *jobs_of(const fr_alg_t *a)
{
    if (a->traits & FR_ALG_ONE_NODE) return "one node";
    if (a->traits & FR_ALG_EQUAL_NODES) return "several nodes of equal size";
    if (a->traits & FR_ALG_NODES) return "several nodes";
    return a->traits & FR_ALG_LAST_RESORT ? "any (the last resort)" : "any";
}

/* One swept value of parameter @p key as a rule writes it ("64K", "rd"). */
static const char *value_of(int key, uint64_t v, char *buf, size_t len)
{
    char w[64];
    if (key == FR_PARAM_FANOUT && v == FR_FANOUT_FLAT) return snprintf(buf, len, "flat"), buf;
    fr_params_format(key == FR_PARAM_CHUNK ? v : 0, key == FR_PARAM_FANOUT ? (int)v : 0,
                     key == FR_PARAM_ACROSS ? (int)v : 0, key == FR_PARAM_PROTO ? (int)v : 0, w, sizeof w);
    const char *eq = strchr(w, '=');
    snprintf(buf, len, "%s", eq ? eq + 1 : w);
    return buf;
}

/* @p a's rule parameters: "`chunk` 256K (64K, 1M)": the key, the default
 * where the registry has it, and the values the tuner tries. */
static const char *params_of(const fr_alg_t *a, const char *q, char *buf, size_t len)
{
    static const char *const keys[FR_PARAM_COUNT] = { "", "chunk", "fanout", "across", "proto" };
    size_t n = 0;
    buf[0] = '\0';
    for (int key = 1; key < FR_PARAM_COUNT; key++) {
        const fr_alg_param_t *p = fr_alg_param(a, key);
        char v[64];
        if (!p || n >= len) continue;
        n += (size_t)snprintf(buf + n, len - n, "%s%s%s%s", n ? "; " : "", q, keys[key], q);
        if (key == FR_PARAM_CHUNK && n < len)
            n += (size_t)snprintf(buf + n, len - n, " %s%s", value_of(key, a->chunk_def, v, sizeof v),
                                  a->chunk_for ? ", varies with size" : "");
        for (int k = 0; k < FR_SWEEP_MAX && p->sweep[k] && n < len; k++)
            n += (size_t)snprintf(buf + n, len - n, "%s%s", k ? ", " : " (tuner: ", value_of(key, p->sweep[k], v, sizeof v));
        if (p->sweep[0] && n < len) n += (size_t)snprintf(buf + n, len - n, ")");
    }
    if (!buf[0]) snprintf(buf, len, "none");
    return buf;
}

/* The registry, one algorithm a line: as text, or as a Markdown table. */
static void print_algorithms(int markdown)
{
    const char *q = markdown ? "`" : "";
    if (markdown)
        printf("| collective | algorithm | memory | jobs | rule parameters | ties | what it does |\n"
               "| --- | --- | --- | --- | --- | --- | --- |\n");
    for (int i = 0; i < fr_nalgs; i++) {
        const fr_alg_t *a = fr_algs[i];
        char params[256], ties[64];
        snprintf(ties, sizeof ties, "%d%s", a->tie_rank, a->traits & FR_ALG_ONE_NODE ? ", first on one node" : "");
        const char *mem = a->mem_types == FR_MEM_CUDA ? "cuda" : a->mem_types == FR_MEM_HOST ? "host" : "host, cuda";
        params_of(a, q, params, sizeof params);
        if (markdown)
            printf("| %s | `%s` | %s | %s | %s | %s | %s |\n", fr_coll_name(a->coll), a->name, mem, jobs_of(a),
                   params, ties, a->desc);
        else
            printf("%-9s %-18s %-4s  %s\n%30sjobs: %s; parameters: %s; ties: %s\n", fr_coll_name(a->coll), a->name,
                   mem, a->desc, "", jobs_of(a), params, ties);
    }
}

/* Where calls go zero-copy on this job, and whether a 1 MiB allreduce of
 * shared buffers just did (@p probe: its answer on every rank, -1 when it
 * could not run). */
static void print_zero_copy(fr_comm_t comm, int probe)
{
    size_t ar = fr_comm_zero_copy_min(comm, FR_COLL_ALLREDUCE), bc = fr_comm_zero_copy_min(comm, FR_COLL_BCAST);
    if (!ar && !bc) {
        printf("zero-copy: not on this job (no node has two ranks that open each other's memfds: one rank per "
               "node, or ranks in separate PID namespaces)\n");
        return;
    }
    printf("zero-copy: on buffers of fr_mem_alloc (MPI_Alloc_mem under the interposer), allreduce from %zu bytes "
           "(every rank's buffers), bcast from %zu bytes (the root's); FASTREDUCE_ZERO_COPY=0 turns it off for a "
           "rank\n", ar, bc);
    if (probe >= 0)
        printf("zero-copy probe: a 1 MiB allreduce of shared buffers on every rank %s\n",
               probe ? "went zero-copy" : "took the copy path (the algorithm the table gives it is not shm or "
               "hier, or a rank has FASTREDUCE_ZERO_COPY=0)");
}

/* Where a bcast of a private root buffer goes by cma, on rank 0's node. */
static void print_cma(fr_comm_t comm)
{
    size_t lo, hi;
    if (fr_comm_cma_bcast_range(comm, &lo, &hi))
        printf("bcast by cma: private root buffers of %zu to %zu bytes, copied by the others straight from the "
               "root's memory (the shm algorithm; FASTREDUCE_CMA)\n", lo, hi);
    else
        printf("bcast by cma: not on rank 0's node (a rank alone there, ranks that may not read each other's "
               "memory, ranks outnumbering cores, or FASTREDUCE_CMA=0; FASTREDUCE_DEBUG=INFO says which)\n");
}

/* A 1 MiB allreduce of shared buffers (collective): 1 when it went
 * zero-copy on every rank, 0 when not, -1 when it could not run. */
static int zero_copy_probe(fr_comm_t comm)
{
    void *buf = NULL;
    int mine = fr_mem_alloc(1 << 20, &buf) == FR_SUCCESS ? 1 : -1, all;
    MPI_Allreduce(MPI_IN_PLACE, &mine, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (mine > 0) {
        mine = fr_allreduce(FR_IN_PLACE, buf, (1 << 20) / 4, FR_FLOAT32, FR_SUM, comm) == FR_SUCCESS
               ? fr_last_zero_copy() : -1;
    }
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    fr_mem_free(buf);
    return all;
}

int main(int argc, char **argv)
{
    int table = 1, algorithms = 0, settings = 0, markdown = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-table")) table = 0;
        else if (!strcmp(argv[i], "--algorithms")) algorithms = 1;
        else if (!strcmp(argv[i], "--settings")) settings = 1;
        else if (!strcmp(argv[i], "--markdown")) markdown = 1;
        else { usage(); return strcmp(argv[i], "-h") && strcmp(argv[i], "--help") ? 1 : 0; }
    }
    if (markdown && algorithms == settings) { usage(); return 1; }
    if (algorithms) {
        print_algorithms(markdown);
        return 0;
    }
    if (settings && markdown) {
        fr_settings_print_markdown(stdout);
        return 0;
    }
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fr_comm_t comm = NULL;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &comm);
    int all_ok, zc_probe = -1;
    MPI_Allreduce(&(int){st == FR_SUCCESS}, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all_ok && table && !settings) zc_probe = zero_copy_probe(comm);
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
            fr_comm_facts_t f = fr_comm_facts(comm);
            printf("\njob shape: %d rank(s), %d node(s), up to %d rank(s) per node\n", f.size, f.nnodes, f.ppn);
            print_zero_copy(comm, zc_probe);
            print_cma(comm);
            printf("resolved selection table (first match wins; the source of each rule is in its comment):\n");
            fr_table_print(fr_comm_table(comm), stdout);
        }
    }
    fr_comm_destroy(comm);
    MPI_Finalize();
    return st == FR_SUCCESS ? 0 : 1;
}

/* fr_comm_setup: what a communicator costs to set up and take down.
 * Repeats, on MPI_COMM_WORLD: fr_comm_create alone, fr_comm_destroy, and
 * fr_comm_create followed by the first call (a small allreduce, a small
 * bcast), as a program under the interposer pays at its first collective on
 * a new communicator. Each repetition's time is the slowest rank's; the
 * table gives the median, the fastest and the slowest repetition.
 * See docs/benchmarks.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "fastreduce.h"
#include "internal.h"

enum { M_CREATE, M_DESTROY, M_ALLREDUCE, M_BCAST, M_COUNT };
static const char *const m_name[M_COUNT] = {"create", "destroy", "create+allreduce", "create+bcast"};

typedef struct {
    int reps, warmup, header;
    size_t bytes;          /* of the first call */
    fr_config_t cfg;
} opts_t;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: fr_comm_setup [-r REPS] [-x WARMUP] [-b BYTES] [--algo NAME] [--node-size N] "
               "[--no-header]\n"
               "  times fr_comm_create, fr_comm_destroy and create + first call (allreduce, bcast)\n"
               "  -r REPS       timed repetitions of each measurement (default 20)\n"
               "  -x WARMUP     untimed repetitions first (default 2)\n"
               "  -b BYTES      size of the first call (default 8; a multiple of 4)\n"
               "  --algo NAME   force algorithms as FASTREDUCE_ALGO (fr_config_t.algo)\n"
               "  --node-size N fake nodes of N ranks (fr_config_t.node_size)\n"
               "  --no-header   leave out the header line (for a table of several runs)\n");
}

static int parse(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){.reps = 20, .warmup = 2, .header = 1, .bytes = 8, .cfg = FR_CONFIG_INIT};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 1; }
        else if (!strcmp(a, "--no-header")) o->header = 0;
        else if (!v) { fprintf(stderr, "fr_comm_setup: %s needs a value or is unknown\n", a); return -1; }
        else if (!strcmp(a, "-r")) { o->reps = atoi(v); i++; }
        else if (!strcmp(a, "-x")) { o->warmup = atoi(v); i++; }
        else if (!strcmp(a, "-b")) { o->bytes = (size_t)strtoull(v, NULL, 10); i++; }
        else if (!strcmp(a, "--algo")) { o->cfg.algo = v; i++; }
        else if (!strcmp(a, "--node-size")) { o->cfg.node_size = atoi(v); i++; }
        else { fprintf(stderr, "fr_comm_setup: unknown option %s\n", a); return -1; }
    }
    if (o->reps < 1 || o->warmup < 0 || o->bytes < 4 || o->bytes % 4) {
        fprintf(stderr, "fr_comm_setup: -r must be >= 1, -x >= 0, -b a positive multiple of 4\n");
        return -1;
    }
    return 0;
}

/* The first call of measurement @p m on @p c; returns the number of wrong
 * elements (each is checked against what every rank computes itself), or
 * -1 when the call failed. */
static long first_call(int m, fr_comm_t c, int32_t *buf, size_t n, int rank, int size)
{
    fr_status_t st;
    for (size_t i = 0; i < n; i++) buf[i] = m == M_BCAST ? (rank == 0 ? (int32_t)(i + 7) : -1) : rank + (int32_t)i;
    if (m == M_BCAST) st = fr_bcast(buf, n, FR_INT32, 0, c);
    else st = fr_allreduce(FR_IN_PLACE, buf, n, FR_INT32, FR_SUM, c);
    if (st != FR_SUCCESS) {
        fprintf(stderr, "fr_comm_setup: rank %d: first call: %s\n", rank, fr_last_error());
        return -1;
    }
    long wrong = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t want = m == M_BCAST ? (int32_t)(i + 7) : (int32_t)(size * (size - 1) / 2 + size * (long)i);
        wrong += buf[i] != want;
    }
    return wrong;
}

/* One repetition of measurement @p m: this rank's seconds, or -1 on failure. */
static double one(int m, const opts_t *o, int32_t *buf, int rank, int size, long *wrong)
{
    fr_comm_t c = NULL;
    double t0 = 0, t = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (m != M_DESTROY) t0 = MPI_Wtime();
    if (fr_comm_create(MPI_COMM_WORLD, &o->cfg, &c) != FR_SUCCESS) {
        fprintf(stderr, "fr_comm_setup: rank %d: fr_comm_create: %s\n", rank, fr_last_error());
        return -1;
    }
    if (m == M_ALLREDUCE || m == M_BCAST) {
        long w = first_call(m, c, buf, o->bytes / 4, rank, size);
        if (w < 0) { fr_comm_destroy(c); return -1; }
        *wrong += w;
    }
    if (m != M_DESTROY) t = MPI_Wtime() - t0;
    if (m == M_DESTROY) {
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
    }
    fr_status_t st = fr_comm_destroy(c);
    if (m == M_DESTROY) t = MPI_Wtime() - t0;
    return st == FR_SUCCESS ? t : -1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    opts_t o;
    int p = parse(argc, argv, &o);
    if (p) { MPI_Finalize(); return p < 0 ? 2 : 0; }
    int32_t *buf = malloc(o.bytes);
    double *t = malloc(sizeof(double) * (size_t)o.reps);
    int rc = !buf || !t;
    if (rank == 0 && o.header)
        printf("# %-3s %-10s %-18s %6s %11s %11s %11s %7s\n", "np", "nodes", "measure", "reps", "median_ms",
               "min_ms", "max_ms", "wrong");
    double first = 0;
    for (int m = 0; m < M_COUNT && !rc; m++) {
        long wrong = 0;
        for (int r = -o.warmup; r < o.reps && !rc; r++) {
            double mine = one(m, &o, buf, rank, size, &wrong), worst;
            /* (the slowest rank's time; a failed rank's -1 fails the run on all) */
            double in[2] = {mine, -mine}, out[2];
            MPI_Allreduce(in, out, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            worst = out[0];
            if (out[1] > 0) rc = 1;
            if (r >= 0) t[r] = worst;
            if (m == M_CREATE && r == -o.warmup) first = worst;
        }
        long all_wrong = 0;
        MPI_Reduce(&wrong, &all_wrong, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rc) break;
        if (all_wrong) rc = 1;
        qsort(t, (size_t)o.reps, sizeof *t, cmp_double);
        if (rank == 0) {
            fr_settings_t set = {0};
            fr_settings_load(&set, &o.cfg, -1, FR_S_BIT(FR_S_NODE_SIZE));
            const char *nodes = set.node_size > 0 ? "faked" : "one";
            fr_settings_free(&set);
            /* (the process's first communicator also discovers the topology) */
            if (m == M_CREATE)
                printf("  %-3d %-10s %-18s %6d %11.3f %11.3f %11.3f %7d\n", size, nodes, "first create", 1,
                       first * 1e3, first * 1e3, first * 1e3, 0);
            printf("  %-3d %-10s %-18s %6d %11.3f %11.3f %11.3f %7ld\n", size, nodes, m_name[m], o.reps,
                   (t[(o.reps - 1) / 2] + t[o.reps / 2]) / 2 * 1e3, t[0] * 1e3, t[o.reps - 1] * 1e3, all_wrong);
            fflush(stdout);
        }
    }
    free(buf);
    free(t);
    MPI_Finalize();
    return rc;
}

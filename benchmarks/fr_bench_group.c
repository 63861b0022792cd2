/* fr_bench_group: a model's gradients allreduced the ways a training loop
 * can: one fr_allreduce per buffer, fr_allreduce_group, fr_iallreduce_group
 * + fr_wait, one fr_iallreduce per buffer + fr_waitall, and with --vs-mpi
 * one MPI_Allreduce per buffer. Each variant's time is the median over
 * repetitions of the max over ranks; the speedup of each over the
 * per-buffer call is printed. Options and helpers are the osu-style
 * benchmarks' (osu_common.h). See docs/benchmarks.md. */
#include "config.h"
#include "osu_common.h"
#include "internal.h"

#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define KIB ((size_t)1024)
#define MIB (KIB * KIB)
#define ALIGN 512           /* each buffer's start, as a framework's caching allocator rounds */
#define MAX_BUFFERS 100000
#define ESIZE sizeof(float)

/* The variants, in the order of the output. */
enum { V_PER, V_GROUP, V_IGROUP, V_IPER, V_MPI, V_COUNT };
static const char *const variant_names[V_COUNT] = {
    "fr_allreduce per buffer", "fr_allreduce_group", "fr_iallreduce_group + fr_wait",
    "fr_iallreduce per buffer + fr_waitall", "MPI_Allreduce per buffer",
};

typedef struct group_opts {
    size_t      n, min, max;     /* buffers, and the range of their sizes in bytes */
    int         model;           /* --mix model: weights and their biases */
    int         iters, warmup, validate, vs_mpi;
    int         thread_level, thread_provided;   /* what MPI_Init_thread asked for, and what it gave */
    const char *algo;
} group_opts_t;

/* The buffers: n of counts[i] floats, at send[i] and recv[i]. */
typedef struct group {
    const group_opts_t *o;
    fr_comm_t    comm;
    int          rank, nranks;
    size_t       n, total;       /* buffers, and their elements in all */
    size_t      *counts;
    float      **send, **recv;
    void        *arena_s, *arena_r;
    fr_request_t *reqs;
} group_t;

static void usage(FILE *f)
{
    fprintf(f,
        "Usage: %s [options]\n"
        "A model's gradients (float32, sum): per-buffer allreduce against the grouped calls\n"
        "(see docs/benchmarks.md).\n"
        "  -n, --buffers N               how many buffers (default 100)\n"
        "  -r, --range MIN:MAX           their sizes in bytes, K, M, G allowed (default 4K:4M)\n"
        "      --mix geometric|model     geometric: N sizes in geometric progression from MIN to MAX;\n"
        "                                model: N/2 layers, each a weight (geometric from MIN to\n"
        "                                MAX) and its bias (the square root of the weight's\n"
        "                                elements: one per output of a square layer) (default geometric)\n"
        "  -i, --iterations ITER         timed repetitions of each variant (default 20)\n"
        "  -x, --warmup WARMUP           untimed repetitions of each variant (default 3)\n"
        "  -c, --validation              check every buffer's result of every variant; exit 1 on failure\n"
        "      --vs-mpi                  also time one MPI_Allreduce per buffer\n"
        "      --algo NAME               force a fastreduce algorithm (fr_config_t.algo)\n"
        "      --thread-level single|funneled|serialized|multiple\n"
        "                                MPI_Init_thread's level (default multiple)\n"
        "  -v, --version                 print the library version\n"
        "  -h, --help                    print this help\n", osu_prog);
}

enum { OPT_MIX = 256, OPT_VS_MPI, OPT_ALGO, OPT_THREAD_LEVEL };

/* One option into @p o, or a problem into @p bad. */
static void parse_one(int c, const char *arg, group_opts_t *o, char *bad, size_t len)
{
    long v;
    switch (c) {
    case 'n':
        if (osu_parse_uint(arg, MAX_BUFFERS, &v) || v < 1) snprintf(bad, len, "invalid buffers '%s' (1..%d)", arg,
                                                                     MAX_BUFFERS);
        else o->n = (size_t)v;
        break;
    case 'r':
        if (osu_parse_range(arg, &o->min, &o->max)) snprintf(bad, len, "invalid range '%s'", arg);
        break;
    case 'i':
        if (osu_parse_uint(arg, INT_MAX, &v) || v < 1) snprintf(bad, len, "invalid iterations '%s'", arg);
        else o->iters = (int)v;
        break;
    case 'x':
        if (osu_parse_uint(arg, INT_MAX, &v)) snprintf(bad, len, "invalid warmup '%s'", arg);
        else o->warmup = (int)v;
        break;
    case 'c': o->validate = 1; break;
    case OPT_MIX:
        if (!strcasecmp(arg, "model")) o->model = 1;
        else if (!strcasecmp(arg, "geometric")) o->model = 0;
        else snprintf(bad, len, "--mix '%s': expected geometric or model", arg);
        break;
    case OPT_VS_MPI: o->vs_mpi = 1; break;
    case OPT_ALGO: o->algo = arg; break;
    case OPT_THREAD_LEVEL:
        if ((o->thread_level = osu_thread_level(arg)) < 0) snprintf(bad, len, "--thread-level '%s': unknown", arg);
        break;
    default: break;
    }
}

/* 0: run; 1: done, exit 0 (help, version); 2: bad options, exit 1. */
static int parse_options(int argc, char **argv, group_opts_t *o)
{
    static const struct option longopts[] = {
        { "buffers", required_argument, NULL, 'n' },    { "range", required_argument, NULL, 'r' },
        { "iterations", required_argument, NULL, 'i' }, { "warmup", required_argument, NULL, 'x' },
        { "validation", no_argument, NULL, 'c' },       { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'v' },          { "mix", required_argument, NULL, OPT_MIX },
        { "vs-mpi", no_argument, NULL, OPT_VS_MPI },    { "algo", required_argument, NULL, OPT_ALGO },
        { "thread-level", required_argument, NULL, OPT_THREAD_LEVEL }, { NULL, 0, NULL, 0 }
    };
    char bad[160] = "";
    int c;
    *o = (group_opts_t){ .n = 100, .min = 4 * KIB, .max = 4 * MIB, .iters = 20, .warmup = 3,
                         .thread_level = MPI_THREAD_MULTIPLE };
    opterr = 0;
    while (!bad[0] && (c = getopt_long(argc, argv, ":n:r:i:x:chv", longopts, NULL)) != -1) {
        if (c == 'h' || c == 'v') {
            if (osu_rank == 0 && c == 'h') usage(stdout);
            if (osu_rank == 0 && c == 'v') printf("%s (libfastreduce %s)\n", osu_prog, fr_version());
            return 1;
        }
        if (c == ':') snprintf(bad, sizeof bad, "option '%s' needs an argument", argv[optind - 1]);
        else if (c == '?') snprintf(bad, sizeof bad, "unknown option '%s'", argv[optind - 1]);
        else parse_one(c, optarg, o, bad, sizeof bad);
    }
    if (!bad[0] && optind < argc) snprintf(bad, sizeof bad, "unexpected argument '%s'", argv[optind]);
    if (!bad[0] && (o->min < ESIZE || o->min > o->max))
        snprintf(bad, sizeof bad, "range %zu:%zu: need %zu <= MIN <= MAX", o->min, o->max, ESIZE);
    if (!bad[0] && o->model && o->n < 2) snprintf(bad, sizeof bad, "--mix model needs 2 buffers or more");
    if (!bad[0] && o->vs_mpi && o->max / ESIZE > INT_MAX)
        snprintf(bad, sizeof bad, "--vs-mpi: %zu elements exceed MPI's int count", o->max / ESIZE);
    if (bad[0]) {
        if (osu_rank == 0) {
            fprintf(stderr, "%s: %s\n", osu_prog, bad);
            usage(stderr);
        }
        return 2;
    }
    return 0;
}

/* ---------------------------------------------------------------- buffers */

/* The element count of the k-th of @p m sizes from min to max bytes in
 * geometric progression (at least one element). */
static size_t geometric(const group_opts_t *o, size_t k, size_t m)
{
    double f = m > 1 ? (double)k / (double)(m - 1) : 0.0;
    double bytes = (double)o->min * pow((double)o->max / (double)o->min, f);
    size_t count = (size_t)llround(bytes / ESIZE);
    return count ? count : 1;
}

/* The element counts: geometric, or --mix model's weight and bias pairs
 * (an odd last buffer is a weight alone). */
static void make_counts(group_t *g)
{
    const group_opts_t *o = g->o;
    size_t layers = (g->n + 1) / 2;
    for (size_t i = 0; i < g->n; i++) {
        if (!o->model) {
            g->counts[i] = geometric(o, i, g->n);
        } else {
            size_t w = geometric(o, i / 2, layers);
            g->counts[i] = i % 2 ? (size_t)ceil(sqrt((double)w)) : w;
        }
    }
}

static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* The buffers, filled; 0 (collective) when this node's ranks could not
 * hold them (osu_memory_fits), before any is allocated. */
static int alloc_buffers(group_t *g)
{
    size_t bytes = 0;
    char what[96];
    g->counts = calloc(g->n, sizeof *g->counts);
    g->send = calloc(g->n, sizeof *g->send);
    g->recv = calloc(g->n, sizeof *g->recv);
    g->reqs = calloc(g->n, sizeof *g->reqs);
    if (!g->counts || !g->send || !g->recv || !g->reqs) osu_die("calloc", "out of memory");
    make_counts(g);
    for (size_t i = 0; i < g->n; i++) bytes += round_up(g->counts[i] * ESIZE, ALIGN);
    snprintf(what, sizeof what, "the buffers' %.2f GiB twice, send and receive, a rank",
             (double)bytes / (double)(1 << 30));
    if (!osu_memory_fits(2.0 * (double)bytes, 0, what)) return 0;
    if (posix_memalign(&g->arena_s, 4096, bytes) || posix_memalign(&g->arena_r, 4096, bytes))
        osu_die("posix_memalign", "out of memory for the buffers");
    memset(g->arena_s, 0, bytes);   /* touched now: page faults stay out of the timings */
    memset(g->arena_r, 0, bytes);
    g->total = 0;
    for (size_t i = 0, off = 0; i < g->n; i++) {
        g->send[i] = (float *)((char *)g->arena_s + off);
        g->recv[i] = (float *)((char *)g->arena_r + off);
        off += round_up(g->counts[i] * ESIZE, ALIGN);
        g->total += g->counts[i];
        for (size_t e = 0; e < g->counts[i]; e++) g->send[i][e] = 1.0f;
    }
    return 1;
}

static void free_buffers(group_t *g)
{
    free(g->arena_s);
    free(g->arena_r);
    free(g->counts);
    free(g->send);
    free(g->recv);
    free(g->reqs);
}

/* --------------------------------------------------------------- variants */

static void run_variant(group_t *g, int v)
{
    const void *const *s = (const void *const *)g->send;
    void *const *r = (void *const *)g->recv;
    fr_request_t req = FR_REQUEST_NULL;
    switch (v) {
    case V_PER:
        for (size_t i = 0; i < g->n; i++)
            osu_check_fr(fr_allreduce(s[i], r[i], g->counts[i], FR_FLOAT32, FR_SUM, g->comm), "fr_allreduce");
        break;
    case V_GROUP:
        osu_check_fr(fr_allreduce_group(s, r, g->counts, g->n, FR_FLOAT32, FR_SUM, g->comm), "fr_allreduce_group");
        break;
    case V_IGROUP:
        osu_check_fr(fr_iallreduce_group(s, r, g->counts, g->n, FR_FLOAT32, FR_SUM, g->comm, &req),
                     "fr_iallreduce_group");
        osu_check_fr(fr_wait(&req), "fr_wait");
        break;
    case V_IPER:
        for (size_t i = 0; i < g->n; i++)
            osu_check_fr(fr_iallreduce(s[i], r[i], g->counts[i], FR_FLOAT32, FR_SUM, g->comm, &g->reqs[i]),
                         "fr_iallreduce");
        osu_check_fr(fr_waitall(g->n, g->reqs, NULL), "fr_waitall");
        break;
    default:
        for (size_t i = 0; i < g->n; i++)
            osu_check_mpi(MPI_Allreduce(s[i], r[i], (int)g->counts[i], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                          "MPI_Allreduce");
        break;
    }
}

/* Rank r's element e of buffer j in round @p seed: integers up to 1024,
 * so that every sum of ranks is exact in float32, and a different pattern
 * in each of the first 1024 buffers, so that a result landing in the
 * wrong buffer shows. */
static float input(int r, size_t j, size_t e, int seed)
{
    return (float)(1 + (e + 17 * j + 5 * (size_t)r + 3 * (size_t)seed) % 1024);
}

/* Fill, run @p v once, check; this rank's wrong elements, summed over ranks. */
static unsigned long long validate_variant(group_t *g, int v, int seed)
{
    unsigned long long wrong = 0, total = 0;
    for (size_t j = 0; j < g->n; j++) {
        for (size_t e = 0; e < g->counts[j]; e++) g->send[j][e] = input(g->rank, j, e, seed);
        osu_poison(g->recv[j], g->counts[j] * ESIZE);
    }
    run_variant(g, v);
    for (size_t j = 0; j < g->n; j++)
        for (size_t e = 0; e < g->counts[j]; e++) {
            float want = 0;
            for (int r = 0; r < g->nranks; r++) want += input(r, j, e, seed);
            wrong += g->recv[j][e] != want;
        }
    MPI_Allreduce(&wrong, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    return total;
}

/* ----------------------------------------------------------------- timing */

/* Every variant's repetitions, the variants in turn, a different one first
 * each repetition; t[v * iters + k]: the max over ranks, in us (rank 0). */
static void time_variants(group_t *g, int nvar, double *t)
{
    const group_opts_t *o = g->o;
    double *loc = calloc((size_t)nvar * (size_t)o->iters, sizeof *loc);
    if (!loc) osu_die("calloc", "out of memory");
    for (int k = 0; k < o->warmup; k++)
        for (int v = 0; v < nvar; v++) run_variant(g, v);
    for (int k = 0; k < o->iters; k++)
        for (int i = 0; i < nvar; i++) {
            int v = (k + i) % nvar;
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            run_variant(g, v);
            loc[v * o->iters + k] = (MPI_Wtime() - t0) * 1e6;
        }
    MPI_Reduce(loc, t, nvar * o->iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    free(loc);
}

/* ----------------------------------------------------------------- output */

/* The header's lines on the buffers and on what the grouped calls pack:
 * buffers of at most FASTREDUCE_FUSION_BUFFER_MAX bytes, consecutive ones
 * into fusion buffers of at most FASTREDUCE_FUSION_BYTES (none when 0). */
static void print_buffers(const group_t *g)
{
    const group_opts_t *o = g->o;
    const fr_settings_t *st = fr_comm_settings(g->comm);
    char fusion[32], bufmax[32];
    size_t packed = 0, lo = SIZE_MAX, hi = 0;
    for (size_t i = 0; i < g->n; i++) {
        packed += st->fusion_bytes && g->counts[i] * ESIZE <= st->fusion_buffer_max;
        lo = g->counts[i] < lo ? g->counts[i] : lo;
        hi = g->counts[i] > hi ? g->counts[i] : hi;
    }
    fr_setting_text(st, FR_S_FUSION_BYTES, fusion, sizeof fusion);
    fr_setting_text(st, FR_S_FUSION_BUFFER_MAX, bufmax, sizeof bufmax);
    printf("# %zu buffers, %s from %zu to %zu bytes: %.2f MiB in all\n", g->n,
           o->model ? "weights and biases (--mix model), weights" : "geometric", o->min, o->max,
           (double)(g->total * ESIZE) / (double)MIB);
    printf("#   (smallest %zu bytes, largest %zu)\n", lo * ESIZE, hi * ESIZE);
    printf("# FASTREDUCE_FUSION_BYTES=%s, FASTREDUCE_FUSION_BUFFER_MAX=%s: the grouped calls pack the %zu\n"
           "#   buffers of at most %s into fusion buffers of at most %s, each reduced as one message; the\n"
           "#   others are reduced where they lie\n", fusion, bufmax, packed, bufmax, fusion);
}

static void print_header(const group_t *g)
{
    const group_opts_t *o = g->o;
    printf("# fastreduce grouped allreduce: a model's gradients, float32, sum\n");
    printf("# libfastreduce %s, %d ranks, algorithm %s\n", fr_version(), g->nranks,
           o->algo ? o->algo : "from the tuning table");
    osu_print_threads(g->comm, o->thread_level, o->thread_provided);
    print_buffers(g);
    printf("# each time: the median over %d repetitions of the max over ranks of one repetition (all the\n"
           "#   buffers); the variants take turns, a different one first each repetition\n", o->iters);
    printf("# x per-buffer = fr_allreduce per buffer / this (>1: faster)%s\n",
           o->vs_mpi ? "; x MPI = MPI_Allreduce per buffer / this" : "");
    printf("%-40s%14s%14s%14s%10s%14s", "# Variant", "Median(us)", "Min(us)", "Max(us)", "GB/s", "x per-buffer");
    if (o->vs_mpi) printf("%8s", "x MPI");
    if (o->validate) printf("%12s", "Validation");
    printf("\n");
}

/* A variant's row from its repetitions @p t (sorted here); @p base and
 * @p mpi are the medians of the per-buffer variants (0: not timed). */
static void print_row(const group_t *g, int v, double *t, double base, double mpi, int valid)
{
    const group_opts_t *o = g->o;
    double med = osu_median(t, o->iters);
    double gbs = med > 0 ? (double)(g->total * ESIZE) / (med * 1e3) : 0;
    printf("%-40s%14.1f%14.1f%14.1f%10.2f%14.2f", variant_names[v], med, t[0], t[o->iters - 1], gbs,
           base > 0 ? base / med : 1.0);
    if (o->vs_mpi) printf("%8.2f", mpi > 0 ? mpi / med : 1.0);
    if (o->validate) printf("%12s", valid ? "Pass" : "Fail");
    printf("\n");
}

static void report(const group_t *g, int nvar, double *t, const int *valid)
{
    const group_opts_t *o = g->o;
    double mpi = 0, base = osu_median(t + V_PER * o->iters, o->iters);
    if (nvar > V_MPI) mpi = osu_median(t + V_MPI * o->iters, o->iters);
    for (int v = 0; v < nvar; v++) print_row(g, v, t + v * o->iters, v == V_PER ? 0 : base,
                                             v == V_MPI ? 0 : mpi, valid[v]);
    fflush(stdout);
}

/* --------------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    group_opts_t o;
    group_t g = { .o = &o };
    int requested = -1, status = 0, valid[V_COUNT];
    int provided = osu_init_mpi(&argc, &argv, MPI_THREAD_MULTIPLE, &requested);
    int rc = parse_options(argc, argv, &o);
    if (rc || !osu_create_comm(&g.comm, o.algo)) {
        MPI_Finalize();
        return rc == 1 ? 0 : 1;
    }
    o.thread_level = requested;
    o.thread_provided = provided;
    g.rank = osu_rank;
    MPI_Comm_size(MPI_COMM_WORLD, &g.nranks);
    g.n = o.n;
    if (!alloc_buffers(&g)) {
        free_buffers(&g);
        fr_comm_destroy(g.comm);
        MPI_Finalize();
        return 1;
    }
    int nvar = o.vs_mpi ? V_COUNT : V_MPI;
    double *t = calloc((size_t)nvar * (size_t)o.iters, sizeof *t);
    if (!t) osu_die("calloc", "out of memory");
    if (osu_rank == 0) print_header(&g);
    time_variants(&g, nvar, t);
    for (int v = 0; v < nvar; v++) {
        unsigned long long wrong = 0;
        if (o.validate) wrong = validate_variant(&g, v, 2 * v + 1) + validate_variant(&g, v, 2 * v + 2);
        valid[v] = wrong == 0;
        if (!valid[v]) status = 1;
        if (!valid[v] && osu_rank == 0)
            fprintf(stderr, "%s: validation of %s failed: %llu wrong elements\n", osu_prog, variant_names[v], wrong);
    }
    if (osu_rank == 0) report(&g, nvar, t, valid);
    free(t);
    free_buffers(&g);
    fr_comm_destroy(g.comm);
    MPI_Finalize();
    return status;
}

/* fastreduce-tune: the autotuner. Under mpirun on the cluster to be tuned
 * it measures every algorithm (and parameter variant) that can serve the
 * job's shape at message sizes from 4 B to --max, within --budget seconds,
 * and writes the tuning table of the fastest per size (docs/tuning.md)
 * and a CSV of every measurement. --check TABLE re-measures a sample of
 * sizes and reports the ranges whose choice is no longer the fastest.
 * The decisions are in tune_choose.c; this file measures. */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <mpi.h>
#include <ucp/api/ucp.h>
#include "config.h"
#ifdef FR_HAVE_NCCL
#include <nccl.h>
#endif
#include "fastreduce.h"
#include "internal.h"
#include "tune_choose.h"
#include "bench_device.h"

#define PROG "fastreduce-tune"
#define MAX_SIZES 160
#define MAX_CANDS TC_MAX_CANDS
#define REPS_DEFAULT 5
#define REP_MIN_S 2e-4      /* a repetition lasts at least this (when a call is shorter) */
#define REP_MAX_S 0.25
#define MAX_ITERS 200000

typedef struct opts {
    const char *out, *csv, *check;
    double      budget;     /* seconds */
    uint64_t    min, max;   /* bytes */
    int         reps;
    int         colls;      /* bit per fr_coll_t */
    const char *algos;      /* comma-separated names, or NULL for all */
    int         quiet;
    unsigned    mems;       /* FR_MEM_* to tune, 0: host, and cuda where every rank has a GPU */
} opts_t;

typedef struct tuner {
    opts_t      o;
    fr_comm_t   comm;
    fr_comm_facts_t F;        /* the communicator's shape */
    int         rank, size;
    fr_table_t  own;          /* the communicator's table, put back at the end */
    fr_rule_t   forced;       /* the one-rule table of the candidate being measured */
    tc_grid_t   g;            /* the memory type being measured */
    tc_grid_t   gs[2];        /* the grids measured, in order, and their memory types */
    fr_mem_t    gmem[2];
    int         ng;
    tc_policy_t pol;
    fr_mem_t    mem;          /* the buffers' memory now */
    float      *sbuf, *rbuf;  /* host buffers (checks fill and read these) */
    void       *dsbuf, *drbuf;/* device buffers, when cuda is tuned */
    double      t0, deadline;
    long        done, skipped;
    double      probe_min, probe_max;  /* the steadiness probe's extremes, seconds */
    double      expect[13];   /* allreduce check: the sum at element i depends on i % 13 only */
} tuner_t;

/* ---------------------------------------------------------------- options */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np N " PROG " [options]\n"
            "       mpirun -np N " PROG " --check TABLE [options]\n"
            "Measures every algorithm that can serve this job (and its chunk/fanout/across variants)\n"
            "at sizes from --min to --max (powers of two and the points half way), and writes the\n"
            "fastest per size as a tuning table (docs/tuning.md) plus a CSV of every measurement.\n"
            "  -o, --output FILE   table to write (default fastreduce-<fingerprint>-<nodes>x<ppn>.tune)\n"
            "      --csv FILE      measurements (default: the table's name ending in .csv)\n"
            "  -b, --budget SEC    bound on the whole run in seconds (default 300; --check: 120)\n"
            "  -m, --max SIZE      largest message (default 64M); --min SIZE smallest (default 4)\n"
            "  -r, --reps N        timed repetitions per point, median reported (default 5, 3..101)\n"
            "  -c, --coll LIST     allreduce, bcast or both (default allreduce,bcast)\n"
            "  -a, --algos LIST    only these algorithms (comma-separated names)\n"
            "  -d, --memory LIST   host, cuda or host,cuda (default host, and cuda when every rank\n"
            "                      has a GPU and the build has NCCL): device buffers measure nccl\n"
            "                      (NCCL's own choice), nccl_ring and nccl_tree with each protocol\n"
            "      --check TABLE   re-measure a sample of sizes; report ranges where TABLE's choice is\n"
            "                      no longer the fastest (exit status 3 when one is stale); the rules\n"
            "                      of the memory types of --memory (default host)\n"
            "  -q, --quiet         one progress line per size instead of per measurement\n"
            "  -h, --help          this text\n"
            "Data: float32 sum out of place (allreduce), root 0 (bcast). A point's figure\n"
            "is the median over the repetitions of the slowest rank's time per call.\n");
}

static int parse_opts(int argc, char **argv, opts_t *o, int rank)
{
    static const struct option lo[] = {
        { "output", 1, 0, 'o' }, { "csv", 1, 0, 'C' }, { "budget", 1, 0, 'b' }, { "max", 1, 0, 'm' },
        { "min", 1, 0, 'M' }, { "reps", 1, 0, 'r' }, { "coll", 1, 0, 'c' }, { "algos", 1, 0, 'a' },
        { "check", 1, 0, 'K' }, { "quiet", 0, 0, 'q' }, { "memory", 1, 0, 'd' }, { "help", 0, 0, 'h' }, { 0, 0, 0, 0 }
    };
    char bad[256] = "";
    int budget_set = 0;
    *o = (opts_t){ .budget = 300, .min = 4, .max = 64u << 20, .reps = REPS_DEFAULT,
                   .colls = (1 << FR_COLL_ALLREDUCE) | (1 << FR_COLL_BCAST) };
    opterr = 0;
    int ch;
    while (!bad[0] && (ch = getopt_long(argc, argv, ":o:b:m:r:c:a:qhd:", lo, NULL)) != -1) {
        char *end;
        switch (ch) {
        case 'o': o->out = optarg; break;
        case 'C': o->csv = optarg; break;
        case 'K': o->check = optarg; break;
        case 'a': o->algos = optarg; break;
        case 'q': o->quiet = 1; break;
        case 'b':
            o->budget = strtod(optarg, &end);
            if (*end || !(o->budget >= 1 && o->budget <= 1e6))
                snprintf(bad, sizeof bad, "--budget '%s': expected seconds from 1 to 1000000", optarg);
            budget_set = 1;
            break;
        case 'm': case 'M': {
            uint64_t v;
            if (fr_parse_size(optarg, &v) || v == 0 || v > ((uint64_t)1 << 34))
                snprintf(bad, sizeof bad, "--%s '%s': expected a size from 1 to 16G (4, 8K, 64M)",
                         ch == 'm' ? "max" : "min", optarg);
            else if (ch == 'm') o->max = v;
            else o->min = v;
            break;
        }
        case 'r': {
            long v = strtol(optarg, &end, 10);
            if (*end || v < 3 || v > 101) snprintf(bad, sizeof bad, "--reps '%s': expected 3..101", optarg);
            o->reps = (int)v;
            break;
        }
        case 'c': {
            o->colls = 0;
            char *dup = strdup(optarg), *save = NULL;
            for (char *w = dup ? strtok_r(dup, ",", &save) : NULL; w; w = strtok_r(NULL, ",", &save)) {
                if (!strcmp(w, "allreduce")) o->colls |= 1 << FR_COLL_ALLREDUCE;
                else if (!strcmp(w, "bcast")) o->colls |= 1 << FR_COLL_BCAST;
                else { snprintf(bad, sizeof bad, "--coll: unknown collective '%s' (allreduce, bcast)", w); break; }
            }
            free(dup);
            if (!bad[0] && !o->colls) snprintf(bad, sizeof bad, "--coll: no collective given");
            break;
        }
        case 'd': {
            o->mems = 0;
            char *dup = strdup(optarg), *save = NULL;
            for (char *w = dup ? strtok_r(dup, ",", &save) : NULL; w; w = strtok_r(NULL, ",", &save)) {
                if (!strcmp(w, "host")) o->mems |= FR_MEM_HOST;
                else if (!strcmp(w, "cuda")) o->mems |= FR_MEM_CUDA;
                else { snprintf(bad, sizeof bad, "--memory: unknown memory '%s' (host, cuda)", w); break; }
            }
            free(dup);
            if (!bad[0] && !o->mems) snprintf(bad, sizeof bad, "--memory: no memory type given");
            break;
        }
        case 'h':
            if (rank == 0) usage(stdout);
            return 1;
        case ':': snprintf(bad, sizeof bad, "option '%s' needs an argument", argv[optind - 1]); break;
        default: snprintf(bad, sizeof bad, "unknown option '%s'", argv[optind - 1]); break;
        }
    }
    if (!bad[0] && optind < argc) snprintf(bad, sizeof bad, "unexpected argument '%s'", argv[optind]);
    if (!bad[0] && o->min > o->max) snprintf(bad, sizeof bad, "--min is larger than --max");
    if (!bad[0] && o->check && o->out) snprintf(bad, sizeof bad, "--check does not write a table (no -o)");
    if (o->check && !budget_set) o->budget = 120;
    if (bad[0]) {
        if (rank == 0) fprintf(stderr, PROG ": %s\n(" PROG " --help lists the options)\n", bad);
        return 2;
    }
    return 0;
}

/* ------------------------------------------------------------ candidates */

static int wanted(const opts_t *o, const char *name)
{
    if (!o->algos) return 1;
    size_t n = strlen(name);
    for (const char *p = o->algos; (p = strstr(p, name)); p += n)
        if ((p == o->algos || p[-1] == ',') && (p[n] == ',' || !p[n])) return 1;
    return 0;
}

static void add_cand(tc_grid_t *g, int nodes, int coll, int alg, uint64_t chunk, int fanout, int across,
                     int proto)
{
    if (g->ncand >= MAX_CANDS) return;
    tc_cand_t *k = &g->cand[g->ncand++];
    fr_rule_t r = { .chunk = chunk, .fanout = fanout, .across = across, .proto = proto };
    *k = (tc_cand_t){ .coll = coll, .alg = alg, .chunk = chunk, .fanout = fanout, .across = across, .proto = proto };
    k->simplicity = tc_simplicity(coll, fr_algs[alg]->name, nodes) + (chunk != 0) + (fanout != 0) + (across != 0) +
                    (proto != 0);
    /* the parameters as the table writes them */
    char line[512], *p;
    r.alg = alg;
    fr_rule_format(&r, line, sizeof line);
    p = strstr(line, fr_algs[alg]->name);
    snprintf(k->label, sizeof k->label, "%s", p ? p : fr_algs[alg]->name);
}

/* The variant of algorithm @p a with parameter @p key at @p v, the value
 * the registry lists for the tuner, where it can differ from the others in
 * this job: a fanout below the flat tree's (FR_FANOUT_FLAT: as many
 * children as the job allows, at most 64) and above the binary tree's;
 * across= only between several nodes, rd only on a power-of-two node count
 * (elsewhere it runs the ring). */
static void add_variant(tuner_t *T, int coll, int a, int key, uint64_t v)
{
    const fr_comm_facts_t *c = &T->F;
    int flat = c->size - 1 < 64 ? c->size - 1 : 64, f = v == FR_FANOUT_FLAT ? flat : (int)v;
    switch (key) {
    case FR_PARAM_CHUNK: add_cand(&T->g, c->nnodes, coll, a, v, 0, 0, 0); break;
    case FR_PARAM_FANOUT:
        if (f > 2 && f <= c->size - 1 && (v == FR_FANOUT_FLAT || f < c->size - 1))
            add_cand(&T->g, c->nnodes, coll, a, 0, f, 0, 0);
        break;
    case FR_PARAM_ACROSS:
        if (c->nnodes > 1 && (v != FR_ACROSS_RD || !(c->nnodes & (c->nnodes - 1))))
            add_cand(&T->g, c->nnodes, coll, a, 0, 0, (int)v, 0);
        break;
    case FR_PARAM_PROTO: add_cand(&T->g, c->nnodes, coll, a, 0, 0, 0, (int)v); break;
    }
}

/* Every algorithm of the wanted collectives for the memory measured (but
 * those that run a host algorithm on copies, never faster than it), each
 * with the variants of the parameters it reads (the values its fr_alg_t
 * lists), in the order of the parameters' keys. */
static void make_cands(tuner_t *T)
{
    for (int coll = 0; coll < FR_COLL_COUNT; coll++) {
        if (!(T->o.colls & (1 << coll))) continue;
        for (int a = 0; a < fr_nalgs; a++) {
            const fr_alg_t *A = fr_algs[a];
            if ((int)A->coll != coll || !(A->mem_types & T->mem) || !wanted(&T->o, A->name) ||
                (A->traits & FR_ALG_VIA_HOST))
                continue;
            add_cand(&T->g, T->F.nnodes, coll, a, 0, 0, 0, 0);
            for (int key = 1; key < FR_PARAM_COUNT; key++) {
                const fr_alg_param_t *p = fr_alg_param(A, key);
                for (int k = 0; p && k < FR_SWEEP_MAX && p->sweep[k]; k++) add_variant(T, coll, a, key, p->sweep[k]);
            }
        }
    }
}


/* --------------------------------------------------------------- running */

static void force(tuner_t *T, const tc_cand_t *k)
{
    T->forced = (fr_rule_t){ .coll = k->coll, .mem = FR_MEM_ALL, .nodes = { 0, FR_INF }, .ppn = { 0, FR_INF },
                             .bytes = { 0, FR_INF }, .alg = k->alg, .chunk = k->chunk, .fanout = k->fanout,
                             .across = k->across, .proto = k->proto, .src = FR_SRC_TUNE, .line = 1 };
    fr_select_use(T->comm, (fr_table_t){ .rules = &T->forced, .n = 1, .cap = 1 });
}

static fr_call_t call_of(const tuner_t *T, int coll, uint64_t bytes)
{
    return (fr_call_t){ .coll = coll, .count = bytes / sizeof(float), .bytes = bytes, .dtype = FR_FLOAT32,
                        .op = FR_SUM, .root = 0, .mem = T->mem };
}

/* A variant with a chunk equals the default where the message fits in one
 * chunk of either size (the default's for a call of @p bytes). */
static int same_as_default(const tuner_t *T, const tc_cand_t *k, uint64_t bytes)
{
    if (!k->chunk) return 0;
    fr_call_t call = call_of(T, k->coll, bytes);
    uint64_t d = fr_alg_chunk_default(fr_algs[k->alg], &call), m = k->chunk < d ? k->chunk : d;
    return bytes <= m;
}

static fr_status_t one_call(tuner_t *T, int coll, size_t count)
{
    void *s = T->mem == FR_MEM_CUDA ? T->dsbuf : T->sbuf, *r = T->mem == FR_MEM_CUDA ? T->drbuf : T->rbuf;
    if (coll == FR_COLL_ALLREDUCE) return fr_allreduce(s, r, count, FR_FLOAT32, FR_SUM, T->comm);
    return fr_bcast(r, count, FR_FLOAT32, 0, T->comm);
}

/* Device buffers: the host buffers' contents to them, or back (count floats). */
static int to_device(tuner_t *T, size_t count)
{
    if (T->mem != FR_MEM_CUDA) return 0;
    return bd_copy(T->dsbuf, T->sbuf, count * sizeof(float)) | bd_copy(T->drbuf, T->rbuf, count * sizeof(float));
}

static int from_device(tuner_t *T, size_t count)
{
    return T->mem == FR_MEM_CUDA ? bd_copy(T->rbuf, T->drbuf, count * sizeof(float)) : 0;
}

static void fill(tuner_t *T, int coll, size_t count)
{
    uint32_t nan = 0x7fc0dead;
    for (size_t i = 0; i < count; i++) {
        if (coll == FR_COLL_ALLREDUCE) T->sbuf[i] = (float)((int)((i + 3 * (size_t)T->rank) % 13) - 6);
        if (coll == FR_COLL_BCAST && T->rank == 0) T->rbuf[i] = (float)(i * 7 % 251);
        else memcpy(&T->rbuf[i], &nan, sizeof nan);
    }
}

static size_t wrong(const tuner_t *T, int coll, size_t count)
{
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        float want = coll == FR_COLL_ALLREDUCE ? (float)T->expect[i % 13] : (float)(i * 7 % 251);
        bad += !(T->rbuf[i] == want);
    }
    return bad;
}

static double now(void) { return MPI_Wtime(); }

/* @p n calls of candidate @p k's collective on @p count elements, in one
 * run, or with @p block > 0 in blocks of that many calls, each after a
 * barrier: the slowest rank's time for all of them (barriers left out), or
 * < 0 when a call failed on some rank. */
static double timed_calls(tuner_t *T, const tc_cand_t *k, size_t count, long n, long block)
{
    int err = 0, anyerr = 0;
    double t = 0, tmax;
    for (long done = 0; done < n;) {
        long b = block > 0 && n - done > block ? block : n - done;
        if (block > 0) MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        for (long i = 0; i < b; i++) err |= one_call(T, k->coll, count) != FR_SUCCESS;
        t += now() - t0;
        done += b;
    }
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&err, &anyerr, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return anyerr ? -1 : tmax;
}

/* The first call is checked on every rank, then calls warm up while
 * finding how many fill a repetition of about @p rep_s seconds (agreed:
 * from the slowest rank's time). Returns TC_OK with *iters set, or
 * TC_FAILED (with why). The candidate serves the call: usable() said so. */
static int prepare(tuner_t *T, int c, int s, double rep_s, long *iters, char *why, size_t wlen)
{
    const tc_cand_t *k = &T->g.cand[c];
    size_t count = T->g.sizes[s] / sizeof(float);
    force(T, k);
    fill(T, k->coll, count);
    /* every rank's copy to the device agreed before the collective: a rank
     * that skipped it would leave the others waiting */
    int bad = to_device(T, count), anybad = 0;
    MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    fr_status_t st = anybad ? FR_ERROR(FR_ERR_CUDA, "copying the input to the device failed on a rank")
                            : one_call(T, k->coll, count);
    if (st == FR_SUCCESS && from_device(T, count)) st = FR_ERROR(FR_ERR_CUDA, "copying the result back failed");
    long mine[2] = { st != FR_SUCCESS ? 1 : 0, st == FR_SUCCESS ? (long)wrong(T, k->coll, count) : 0 }, all[2];
    MPI_Allreduce(mine, all, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (all[0] || all[1]) {
        if (st != FR_SUCCESS) snprintf(why, wlen, "%s: %s", fr_strerror(st), fr_last_error());
        else snprintf(why, wlen, "%ld wrong elements over %d ranks", all[1], T->size);
        return TC_FAILED;
    }
    long n = 1;
    double per = 0;
    for (;;) {
        double tmax = timed_calls(T, k, count, n, 0);
        if (tmax < 0) { snprintf(why, wlen, "a call failed: %s", fr_last_error()); return TC_FAILED; }
        per = tmax / (double)n;
        if (tmax >= rep_s * 0.2 || n >= MAX_ITERS / 4) break;
        long next = per > 0 ? (long)(rep_s * 0.25 / per) + 1 : n * 8;
        n = next > n * 8 ? n * 8 : next > n ? next : n * 2;
    }
    *iters = per > 0 ? (long)(rep_s / per) : 1;
    if (*iters < 1) *iters = 1;
    if (*iters > MAX_ITERS) *iters = MAX_ITERS;
    return TC_OK;
}

/* One timed repetition: the slowest rank's time per call; < 0 when a call failed. */
static double repetition(tuner_t *T, int c, int s, long iters)
{
    const tc_cand_t *k = &T->g.cand[c];
    force(T, k);
    double t = timed_calls(T, k, T->g.sizes[s] / sizeof(float), iters, tc_block_calls(T->g.sizes[s]));
    return t < 0 ? t : t / (double)iters;
}

/* The time one point at size s will take at least: a check call, a warm-up
 * call and one call per repetition. A call's time is extrapolated from the
 * candidate's two largest measured sizes below s along the line through
 * them (a latency and a bandwidth term; never falling), or from one such
 * size in proportion to bytes when it is within 16x; 0 when nothing is known. */
static double min_cost(const tuner_t *T, int c, int s)
{
    int i2 = -1, i1 = -1;
    for (int i = s - 1; i >= 0 && i1 < 0; i--)
        if (tc_at(&T->g, c, i)->state == TC_OK) {
            if (i2 < 0) i2 = i;
            else i1 = i;
        }
    if (i2 < 0) return 0;
    double x2 = (double)T->g.sizes[i2], y2 = tc_at(&T->g, c, i2)->med, x = (double)T->g.sizes[s], t;
    if (i1 >= 0) {
        double x1 = (double)T->g.sizes[i1], y1 = tc_at(&T->g, c, i1)->med;
        double slope = (y2 - y1) / (x2 - x1);
        t = y2 + (slope > 0 ? slope : 0) * (x - x2);
    } else {
        t = x / x2 <= 16 ? y2 * x / x2 : y2;
    }
    return (2.0 + T->o.reps) * t;
}

/* Measure candidates list[0..n) at size s side by side: each is checked and
 * warmed up, then the repetitions go round the candidates, so that a slow
 * spell of the machine falls on all of them alike. Rank 0 decides the
 * repetition length and what the budget still allows, from its estimate
 * @p left_points of the points still to come (these included), and every
 * rank follows. */
static void measure_size(tuner_t *T, int s, const int *list, int n, double left_points, double reserve)
{
    struct { double rep_s; int skip[MAX_CANDS]; } pl;
    memset(&pl, 0, sizeof pl);
    if (left_points < n) left_points = n;
    if (T->rank == 0) {
        /* the time left, less the least the points after this size will take, shared out */
        double left = T->deadline - now(), avail = left - reserve;
        double per_point = avail > 0 ? avail * 0.9 / left_points : 0;
        pl.rep_s = per_point / (T->o.reps + 1.5);
        if (pl.rep_s < REP_MIN_S) pl.rep_s = REP_MIN_S;
        if (pl.rep_s > REP_MAX_S) pl.rep_s = REP_MAX_S;
        double cost = 0;
        for (int i = 0; i < n; i++) {
            double mc = min_cost(T, list[i], s);
            cost += mc > per_point ? mc : per_point;
            pl.skip[i] = left <= 0 || cost > left;
        }
    }
    MPI_Bcast(&pl, (int)sizeof pl, MPI_BYTE, 0, MPI_COMM_WORLD);
    long iters[MAX_CANDS];
    double v[MAX_CANDS][TC_MAX_REPS];
    char why[MAX_CANDS][256];
    for (int i = 0; i < n; i++) {
        tc_meas_t *m = tc_at(&T->g, list[i], s);
        why[i][0] = '\0';
        if (pl.skip[i]) {
            /* a measurement made before stays; a new point is marked */
            if (m->state != TC_OK) {
                m->state = TC_SKIPPED;
                T->skipped++;
            }
            iters[i] = -1;
            continue;
        }
        /* a new measurement; the side-by-side comparisons made before stay */
        tc_meas_t before = *m;
        memset(m, 0, sizeof *m);
        memcpy(m->rel, before.rel, sizeof m->rel);
        memcpy(m->relid, before.relid, sizeof m->relid);
        m->nrel = before.nrel;
        iters[i] = 0;
        m->state = prepare(T, list[i], s, pl.rep_s, &iters[i], why[i], sizeof why[i]);
    }
    for (int r = 0; r < T->o.reps; r++)
        for (int i = 0; i < n; i++) {
            tc_meas_t *m = tc_at(&T->g, list[i], s);
            if (m->state != TC_OK || iters[i] < 0) continue;
            v[i][r] = repetition(T, list[i], s, iters[i]);
            if (v[i][r] < 0) {
                m->state = TC_FAILED;
                snprintf(why[i], sizeof why[i], "a call failed: %s", fr_last_error());
            }
        }
    char sz[32];
    int now_ok[MAX_CANDS], nok = 0;
    double okv[MAX_CANDS * TC_MAX_REPS];   /* now_ok's rows of v */
    tc_fmt_bytes(sz, sizeof sz, T->g.sizes[s]);
    for (int i = 0; i < n; i++) {
        int c = list[i];
        tc_meas_t *m = tc_at(&T->g, c, s);
        if (iters[i] < 0) continue;
        if (m->state == TC_OK) {
            /* (the rounds' order first: tc_stats sorts) */
            memcpy(okv + (size_t)nok * T->o.reps, v[i], sizeof v[i][0] * (size_t)T->o.reps);
            tc_stats(v[i], T->o.reps, m);
            m->iters = (int)iters[i];
            now_ok[nok++] = c;
        }
        T->done += m->state == TC_OK || m->state == TC_FAILED;
        if (T->rank != 0) continue;
        double el = now() - T->t0, left = T->deadline - now();
        if (m->state == TC_FAILED)
            printf("[%6.1fs, %5.0fs left] %-9s %-28s %6s: FAILED its check: %s; never chosen\n", el, left,
                   fr_coll_name(T->g.cand[c].coll), T->g.cand[c].label, sz, why[i]);
        else if (m->state == TC_OK && !T->o.quiet)
            printf("[%6.1fs, %5.0fs left] %-9s %-28s %6s: %10.2f us  (q1 %.2f q3 %.2f, %d x %d calls)\n", el,
                   left, fr_coll_name(T->g.cand[c].coll), T->g.cand[c].label, sz, m->med * 1e6, m->q1 * 1e6,
                   m->q3 * 1e6, m->reps, m->iters);
    }
    /* only what was measured just now is compared, round by round (every
     * rank has the same figures: the slowest rank's, so the same grid) */
    tc_compared(&T->g, s, now_ok, nok, okv, T->o.reps);
    if (T->rank == 0) fflush(stdout);
}

/* Sizes of the first pass: powers of four (and the largest size), so every
 * candidate is seen across the whole range before any is dropped. */
static int coarse(const tc_grid_t *g, int s)
{
    uint64_t v = g->sizes[s];
    if (s == g->nsizes - 1) return 1;
    if (v & (v - 1)) return 0;
    int lg = 0;
    while (v >>= 1) lg++;
    return lg % 2 == 0;
}

/* Worth a point: the algorithm serves the call (else it is marked declined)
 * and the variant differs from the default there. */
static int usable(tuner_t *T, int c, int s)
{
    const tc_cand_t *k = &T->g.cand[c];
    fr_call_t call = call_of(T, k->coll, T->g.sizes[s]);
    force(T, k);
    if (fr_algs[k->alg]->check(&call, T->comm) != FR_SUCCESS) {
        tc_at(&T->g, c, s)->state = TC_DECLINED;
        return 0;
    }
    return !same_as_default(T, k, T->g.sizes[s]);
}

/* The steadiness probe: the slowest rank's time of an 8-byte MPI_Allreduce
 * (the MPI library's own, untouched by what is tuned), median of 5 x 200.
 * Its extremes over the run say whether the machine kept one speed. */
static double probe(tuner_t *T)
{
    double v[5], x = 1, y;
    for (int i = 0; i < 200; i++) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);  /* warm */
    for (int r = 0; r < 5; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = now();
        for (int i = 0; i < 200; i++) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        t = (now() - t) / 200;
        MPI_Allreduce(&t, &v[r], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    tc_meas_t m;
    tc_stats(v, 5, &m);
    if (T->probe_min == 0 || m.med < T->probe_min) T->probe_min = m.med;
    if (m.med > T->probe_max) T->probe_max = m.med;
    return m.med;
}

/* One line on the probe; also written into the table as a comment. */
static void steadiness(const tuner_t *T, FILE *f, const char *prefix)
{
    double r = T->probe_min > 0 ? T->probe_max / T->probe_min : 1;
    fprintf(f, "%ssteadiness: an 8-byte MPI_Allreduce took %.2f to %.2f us over the run (x%.2f)%s\n", prefix,
            T->probe_min * 1e6, T->probe_max * 1e6, r,
            r > 1.3 ? "; the machine did not keep one speed during the run, so figures measured at different "
                      "times are not comparable: check the table with --check" : "");
}

/* How far candidate c was from the best at the nearest size below s where it
 * was measured (1 = the best); 1.5 when it was not measured below. */
static double rank_below(const tuner_t *T, int c, int s)
{
    const tc_grid_t *g = &T->g;
    for (int i = s - 1; i >= 0; i--) {
        const tc_meas_t *m = tc_at(g, c, i);
        if (m->state != TC_OK) continue;
        return tc_rel(g, c, i);
    }
    return 1.5;
}

/* Does size s belong to pass @p pass (0: coarse, 1: the rest; with a
 * sample: pass 0 is the sample, pass 1 nothing)? */
static int in_pass(const tuner_t *T, const int *sample, int s, int pass)
{
    return sample ? sample[s] && !pass : coarse(&T->g, s) == !pass;
}

/* The sweep: the coarse pass over every candidate, then the other sizes
 * for the candidates tc_keep() still allows. */
static void sweep(tuner_t *T, const int *sample)
{
    tc_grid_t *g = &T->g;
    for (int s = 0; s < g->nsizes; s++)   /* mark what declines, before any time is shared out */
        for (int c = 0; c < g->ncand; c++) usable(T, c, s);
    for (int pass = 0; pass < 2; pass++) {
        for (int s = 0; s < g->nsizes; s++) {
            if (!in_pass(T, sample, s, pass)) continue;
            double pr = probe(T);
            g->probe[s] = pr;
            if (T->rank == 0 && !T->o.quiet) {
                char sz[32];
                tc_fmt_bytes(sz, sizeof sz, g->sizes[s]);
                printf("[%6.1fs, %5.0fs left] pass %d, %s: steadiness probe %.2f us\n", now() - T->t0,
                       T->deadline - now(), pass + 1, sz, pr * 1e6);
            }
            int list[MAX_CANDS], n = 0;
            for (int c = 0; c < g->ncand; c++) {
                if (!usable(T, c, s)) continue;
                if (pass == 1 && !tc_keep(g, c, s, &T->pol)) tc_at(g, c, s)->state = TC_PRUNED;
                else list[n++] = c;
            }
            /* the budget fits the best first: order by the ranking at the nearest size below */
            double key[MAX_CANDS];
            for (int i = 0; i < n; i++) key[i] = rank_below(T, list[i], s);
            for (int i = 1; i < n; i++)
                for (int j = i; j > 0 && key[j] < key[j - 1]; j--) {
                    double tk = key[j]; key[j] = key[j - 1]; key[j - 1] = tk;
                    int tl = list[j]; list[j] = list[j - 1]; list[j - 1] = tl;
                }
            /* rank 0's estimate of the points left (the rest of this pass, and in the first
             * pass half of every candidate at every size of the second, which lie below as
             * well as above this one) and of the least time those after this one will take */
            double left = 0, reserve = 0;
            if (T->rank == 0)
                for (int s2 = 0; s2 < g->nsizes; s2++)
                    for (int c2 = 0; c2 < g->ncand; c2++) {
                        if (tc_at(g, c2, s2)->state == TC_DECLINED || same_as_default(T, &g->cand[c2], g->sizes[s2]) ||
                            (s2 != s && tc_at(g, c2, s2)->state != TC_NONE))
                            continue;
                        double w = 0;
                        if (s2 == s) w = tc_at(g, c2, s2)->state == TC_NONE;
                        else if (in_pass(T, sample, s2, pass)) w = s2 > s && (pass == 0 || tc_keep(g, c2, s2, &T->pol));
                        else if (pass == 0 && !sample) w = 0.5;
                        left += w;
                        if (s2 != s) reserve += w * min_cost(T, c2, s2);
                    }
            if (n) measure_size(T, s, list, n, left, reserve);
            /* a size where no candidate of a collective came out correct (the one the
             * pruning kept failed its check) has the pruned ones measured after all,
             * so that it does not go to the failed one's range (tc_unprune) */
            int more[MAX_CANDS], k = 0;
            for (int coll = 0; pass == 1 && coll < FR_COLL_COUNT; coll++)
                k += tc_unprune(g, coll, s, more + k, MAX_CANDS - k);
            if (k) measure_size(T, s, more, k, left - n + k, reserve);
            if (T->rank == 0 && T->o.quiet) {
                char sz[32];
                tc_fmt_bytes(sz, sizeof sz, g->sizes[s]);
                printf("[%6.1fs, %5.0fs left] pass %d: %s done (steadiness probe %.2f us)\n", now() - T->t0,
                       T->deadline - now(), pass + 1, sz, pr * 1e6);
                fflush(stdout);
            }
        }
    }
}

/* Candidates of @p coll correct at size s and within @p within x the
 * fastest there (tc_rel). */
static int rivals(const tuner_t *T, int coll, int s, double within, int *list)
{
    const tc_grid_t *g = &T->g;
    int n = 0;
    for (int c = 0; c < g->ncand; c++)
        if (g->cand[c].coll == coll && tc_at(g, c, s)->state == TC_OK && tc_rel(g, c, s) <= within)
            list[n++] = c;
    return n;
}

/* Candidates within 25% of the fastest: those a confirmation measures. */
static int contenders(const tuner_t *T, int coll, int s, int *list)
{
    return rivals(T, coll, s, 1.25, list);
}

/* list[0..n) and candidate @p c (-1: none) when it is not among them;
 * returns the new count. */
static int add_listed(int *list, int n, int c)
{
    int in = 0;
    for (int i = 0; i < n; i++) in |= list[i] == c;
    if (c >= 0 && !in) list[n++] = c;
    return n;
}

/* The contenders, and candidate @p also (-1: none) when it is not among
 * them. */
static int contenders_and(const tuner_t *T, int coll, int s, int also, int *list)
{
    return add_listed(list, contenders(T, coll, s, list), also);
}

/* A second look, later than the sweep, at every size where some candidate
 * is within 1.5x of the fastest: those candidates side by side again, so
 * that no choice rests on one comparison made in one spell of the machine
 * (a size measured first while the machine was slow can rank the
 * candidates otherwise than it usually does). Both collectives of a size
 * are measured together. */
static void second_look(tuner_t *T)
{
    tc_grid_t *g = &T->g;
    int total = 0, sizes = 0;
    for (int s = 0; s < g->nsizes; s++) {
        int list[MAX_CANDS], k = 0;
        for (int coll = 0; coll < FR_COLL_COUNT; coll++) {
            int n = rivals(T, coll, s, 1.5, list);
            k += n >= 2 ? n : 0;
        }
        total += k;
        sizes += k > 0;
    }
    if (!total) return;
    if (T->rank == 0) {
        printf("[%6.1fs, %5.0fs left] a second look at %d size(s): their candidates within 1.5x of the fastest\n",
               now() - T->t0, T->deadline - now(), sizes);
        fflush(stdout);
    }
    for (int s = 0; s < g->nsizes; s++) {
        int list[MAX_CANDS], n = 0;
        for (int coll = 0; coll < FR_COLL_COUNT; coll++) {
            int k = rivals(T, coll, s, 1.5, list + n);
            n += k >= 2 ? k : 0;
        }
        if (!n) continue;
        g->probe[s] = probe(T);
        measure_size(T, s, list, n, total, 0);
        total -= n;
    }
}

/* The candidates a lone win at size s is measured again with: its
 * contenders, and the winners of the nearest sizes on each side
 * (tc_disputed) when they are not among them, so the win is put to those
 * it took the size from. */
static int lone_win_list(const tuner_t *T, int coll, int s, int *list)
{
    int below = -1, above = -1;
    for (int t = s - 1; t >= 0 && below < 0; t--) below = tc_winner(&T->g, coll, t, &T->pol);
    for (int t = s + 1; t < T->g.nsizes && above < 0; t++) above = tc_winner(&T->g, coll, t, &T->pol);
    int n = contenders(T, coll, s, list);
    for (int k = 0; k < 2; k++) {   /* each side's winner, where it was measured correct at s */
        int c = k ? above : below;
        n = add_listed(list, n, c >= 0 && tc_at(&T->g, c, s)->state == TC_OK ? c : -1);
    }
    return n;
}

/* Measure the disputed sizes (tc_disputed) again, their contenders side by
 * side with the time that is left, at most twice. */
static void confirm(tuner_t *T)
{
    for (int round = 0; round < 2; round++) {
        int ds[FR_COLL_COUNT][MAX_SIZES], nd[FR_COLL_COUNT], total = 0;
        for (int coll = 0; coll < FR_COLL_COUNT; coll++) {
            nd[coll] = tc_disputed(&T->g, coll, &T->pol, ds[coll], MAX_SIZES);
            for (int i = 0; i < nd[coll]; i++) {
                int list[MAX_CANDS];
                total += lone_win_list(T, coll, ds[coll][i], list);
            }
        }
        if (!total) return;
        if (T->rank == 0) {
            printf("[%6.1fs, %5.0fs left] confirming %d lone win(s) with their contenders\n", now() - T->t0,
                   T->deadline - now(), nd[0] + nd[1]);
            fflush(stdout);
        }
        for (int coll = 0; coll < FR_COLL_COUNT; coll++)
            for (int i = 0; i < nd[coll]; i++) {
                int list[MAX_CANDS], n = lone_win_list(T, coll, ds[coll][i], list);
                T->g.probe[ds[coll][i]] = probe(T);
                measure_size(T, ds[coll][i], list, n, total, 0);
                total -= n;
            }
    }
}

/* ------------------------------------------------------------- the table */

static void meta_of(const tuner_t *T, int argc, char **argv, fr_table_meta_t *m)
{
    const fr_comm_facts_t *c = &T->F;
    memset(m, 0, sizeof *m);
    m->version = 1;
    snprintf(m->fingerprint, sizeof m->fingerprint, "%s", c->fingerprint);
    m->nodes = c->nnodes;
    m->ppn = c->ppn;
    m->ranks = c->size;
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(ver, &len);
    ver[strcspn(ver, "\n")] = '\0';
    for (char *p = ver; *p; p++)
        if (*p == '\t' || *p == '#') *p = ' ';
    snprintf(m->mpi, sizeof m->mpi, "%.*s", (int)sizeof m->mpi - 1, ver);
    snprintf(m->ucx, sizeof m->ucx, "%s", ucp_get_version_string());
#ifdef FR_HAVE_NCCL
    /* the library loaded, which may not be the one built against */
    int v = 0;
    if (ncclGetVersion(&v) == ncclSuccess && v != NCCL_VERSION_CODE)
        snprintf(m->nccl, sizeof m->nccl, "%d.%d.%d (built with %d.%d.%d)", v / 10000, v / 100 % 100, v % 100,
                 NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
    else
        snprintf(m->nccl, sizeof m->nccl, "%d.%d.%d", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
#else
    snprintf(m->nccl, sizeof m->nccl, "not built in");
#endif
    snprintf(m->fastreduce, sizeof m->fastreduce, "%s", fr_version());
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(m->date, sizeof m->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(m->measured, sizeof m->measured, "float32 sum out of place (allreduce), root 0 (bcast), %s memory, "
             "page-aligned buffers; "
             "median of %d repetitions of the slowest rank's time per call",
             T->ng == 2 ? "host and cuda" : T->gmem[0] == FR_MEM_CUDA ? "cuda" : "host", T->o.reps);
    size_t o = (size_t)snprintf(m->command, sizeof m->command, "mpirun -np %d", c->size);
    for (int i = 0; i < argc && o < sizeof m->command; i++) {
        const char *a = argv[i];
        if (i == 0 && strrchr(a, '/')) a = strrchr(a, '/') + 1;
        int quote = strpbrk(a, " \t'\"#;") != NULL || !*a;
        o += (size_t)snprintf(m->command + o, sizeof m->command - o, quote ? " '%s'" : " %s", a);
    }
    if (o >= sizeof m->command) m->command[sizeof m->command - 1] = '\0';
}

static int write_outputs(tuner_t *T, const fr_table_meta_t *meta, const char *out, const char *csv)
{
    int rc = 0;
    if (out) {
        FILE *f = fopen(out, "w");
        if (!f) { fprintf(stderr, PROG ": cannot write %s: %m\n", out); return 1; }
        int n = 0;
        for (int i = 0; i < T->ng && n >= 0; i++) {
            int k = tc_write_table(f, i ? NULL : meta, &T->gs[i], &T->pol, (uint64_t)T->F.nnodes,
                                   (uint64_t)T->F.ppn, T->gmem[i]);
            n = k < 0 ? k : n + k;
        }
        steadiness(T, f, "# ");
        if (fclose(f) || n < 0) { fprintf(stderr, PROG ": writing %s failed\n", out); rc = 1; }
        else printf(PROG ": wrote %s (%d rules)\n", out, n);
    }
    if (csv) {
        FILE *f = fopen(csv, "w");
        if (!f) { fprintf(stderr, PROG ": cannot write %s: %m\n", csv); return 1; }
        for (int i = 0; i < T->ng; i++)
            tc_write_csv(f, &T->gs[i], &T->pol, T->size, T->F.nnodes, T->F.ppn,
                         T->gmem[i] == FR_MEM_CUDA ? "cuda" : "host");
        if (fclose(f)) { fprintf(stderr, PROG ": writing %s failed\n", csv); rc = 1; }
        else printf(PROG ": wrote %s\n", csv);
    }
    return rc;
}

/* ------------------------------------------------------------- --check */

/* The candidate that is the table's choice for (coll, size), added if the
 * table names parameters no candidate has; -1 when none can be added. */
static int choice(tuner_t *T, fr_table_t *tab, int coll, uint64_t bytes, int *rule)
{
    fr_call_t call = call_of(T, coll, bytes);
    fr_select_use(T->comm, *tab);
    const fr_alg_t *a = fr_select_choose(T->comm, &call, rule);
    int alg = fr_alg_lookup(coll, a->name);
    for (int c = 0; c < T->g.ncand; c++) {
        const tc_cand_t *k = &T->g.cand[c];
        if (k->coll == coll && k->alg == alg && k->chunk == call.chunk && k->fanout == call.fanout &&
            k->across == call.across && k->proto == call.proto)
            return c;
    }
    if (T->g.ncand >= MAX_CANDS) return -1;
    add_cand(&T->g, T->F.nnodes, coll, alg, call.chunk, call.fanout, call.across, call.proto);
    return T->g.ncand - 1;
}

/* Is the table's choice @p c at size s slower than the fastest there by
 * more than the noise? *thr: the noise, a fraction of the fastest's
 * median: the two latest spreads added, at least tie_max. The comparison
 * is tc_rel(): side by side only. */
static int stale_by(const tuner_t *T, int coll, int s, int c, double *thr)
{
    const tc_grid_t *g = &T->g;
    int best = tc_fastest(g, coll, s, -1);
    *thr = T->pol.tie_max;
    if (best < 0 || best == c) return 0;
    const tc_meas_t *mb = tc_at(g, best, s), *mc = tc_at(g, c, s);
    double spread = ((mb->q3 - mb->q1) + (mc->q3 - mc->q1)) / mb->med;
    if (spread > *thr) *thr = spread;
    return tc_rel(g, c, s) - 1 > *thr;
}

static int check_table(tuner_t *T, double share)
{
    fr_table_t tab = {0};
    fr_table_meta_t meta;
    int nbad = 0, stale = 0;
    tc_grid_t *g = &T->g;
    /* every rank reads the table (as every rank would after the broadcast) */
    fr_status_t st = fr_table_read_file(&tab, &meta, T->o.check, NULL, NULL, &nbad);
    int ok = st == FR_SUCCESS, all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        if (T->rank == 0) fprintf(stderr, PROG ": --check %s: %s\n", T->o.check, fr_last_error());
        fr_table_free(&tab);
        return 1;
    }
    int nfile = tab.n;
    fr_table_parse(&tab, fr_default_table, "default", FR_SRC_DEFAULT, NULL, NULL, NULL);
    if (T->rank == 0) {
        char why[512];
        int unknown;
        printf(PROG ": checking %s (%d rules%s)\n", T->o.check, nfile, nbad ? ", some malformed: see the warnings" : "");
        if (fr_table_meta_compare(&meta, T->F.fingerprint, T->F.nnodes, T->F.ppn, why, sizeof why,
                                  &unknown))
            printf(PROG ": warning: the table does not match this job: %s\n", why);
    }
    /* the sample: every coarse size, and both ends of each range of the table inside [min, max] */
    int sample[MAX_SIZES] = {0};
    for (int s = 0; s < g->nsizes; s++) sample[s] = coarse(g, s);
    for (int i = 0; i < tab.n; i++) {
        const fr_rule_t *r = &tab.rules[i];
        uint64_t ends[2] = { r->bytes.lo, r->bytes.hi };
        for (int e = 0; e < 2; e++) {
            int best = -1;
            for (int s = 0; s < g->nsizes; s++)
                if (best < 0 || fabs((double)g->sizes[s] - (double)ends[e]) <
                                    fabs((double)g->sizes[best] - (double)ends[e]))
                    best = s;
            if (best >= 0 && ends[e] >= g->sizes[0] / 2 && ends[e] <= g->sizes[g->nsizes - 1] * 2) sample[best] = 1;
        }
    }
    /* the table's choices; choice() may add candidates, so look them all up before measuring */
    int chosen[FR_COLL_COUNT][MAX_SIZES], rule[FR_COLL_COUNT][MAX_SIZES];
    for (int coll = 0; coll < FR_COLL_COUNT; coll++)
        for (int s = 0; s < g->nsizes; s++)
            chosen[coll][s] = (T->o.colls & (1 << coll)) ? choice(T, &tab, coll, g->sizes[s], &rule[coll][s]) : -1;
    double start = now();
    T->deadline = start + 0.75 * share;
    sweep(T, sample);
    T->deadline = start + 0.98 * share;
    /* a choice that was pruned or never measured at a sampled size is measured now, beside its contenders */
    for (int coll = 0; coll < FR_COLL_COUNT; coll++)
        for (int s = 0; s < g->nsizes; s++) {
            int c = chosen[coll][s];
            if (!sample[s] || c < 0 || tc_at(g, c, s)->state == TC_OK || tc_at(g, c, s)->state == TC_FAILED ||
                tc_at(g, c, s)->state == TC_DECLINED)
                continue;
            int list[MAX_CANDS], n = contenders_and(T, coll, s, c, list);
            measure_size(T, s, list, n, 1, 0);
        }
    /* a choice that is not the winner is measured again beside its contenders, and once more if it
     * still looks stale: the verdict is the median of up to three side-by-side comparisons, made at
     * different times, so one slow spell of the machine does not decide it */
    for (int round = 0; round < 2; round++)
        for (int coll = 0; coll < FR_COLL_COUNT; coll++)
            for (int s = 0; s < g->nsizes; s++) {
                int c = chosen[coll][s];
                double thr;
                if (!sample[s] || c < 0 || tc_at(g, c, s)->state != TC_OK) continue;
                if (round == 0 ? tc_winner(g, coll, s, &T->pol) == c : !stale_by(T, coll, s, c, &thr)) continue;
                int list[MAX_CANDS], n = contenders_and(T, coll, s, c, list);
                if (n < 2) continue;
                measure_size(T, s, list, n, 1, 0);
            }
    const char *mem = T->mem == FR_MEM_CUDA ? " cuda" : "";
    if (T->rank == 0) {
        for (int coll = 0; coll < FR_COLL_COUNT; coll++) {
            if (!(T->o.colls & (1 << coll))) continue;
            tc_stale_t ranges = {0};
            for (int s = 0; s < g->nsizes; s++) {
                int c = chosen[coll][s];
                if (!sample[s] || c < 0) continue;
                const tc_meas_t *mc = tc_at(g, c, s);
                char sz[32], where[128];
                tc_fmt_bytes(sz, sizeof sz, g->sizes[s]);
                if (rule[coll][s] >= 0)
                    snprintf(where, sizeof where, "%s:%d", tab.rules[rule[coll][s]].src == FR_SRC_FILE ? T->o.check :
                             "default", tab.rules[rule[coll][s]].line);
                else
                    snprintf(where, sizeof where, "no rule (the MPI library's own)");
                int best = tc_fastest(g, coll, s, -1);
                if (mc->state == TC_FAILED) {
                    printf("STALE %-9s %6s%s: the table's %s (%s) fails its check\n", fr_coll_name(coll), sz, mem,
                           g->cand[c].label, where);
                    tc_stale_add(&ranges, rule[coll][s], 1);
                    continue;
                }
                if (mc->state != TC_OK || best < 0) {
                    printf("      %-9s %6s%s: %s (%s) not measured (%s)\n", fr_coll_name(coll), sz, mem,
                           g->cand[c].label, where, tc_state_name(mc->state));
                    tc_stale_add(&ranges, rule[coll][s], 0);
                    continue;
                }
                const tc_meas_t *mb = tc_at(g, best, s);
                double thr, slower = tc_rel(g, c, s) - 1;
                char cmp[48] = "";
                if (mc->nrel > 1) snprintf(cmp, sizeof cmp, ", median of %d comparisons", mc->nrel);
                int is_stale = stale_by(T, coll, s, c, &thr);
                tc_stale_add(&ranges, rule[coll][s], is_stale);
                if (is_stale) {
                    /* the percentage is the side-by-side standing; the medians are the latest
                     * measurement's, which may have been taken in another spell than the others */
                    printf("STALE %-9s %6s%s: the table's %s (%s) takes %.2f us; %s takes %.2f us: %.0f%% slower "
                           "side by side (noise %.0f%%%s)\n", fr_coll_name(coll), sz, mem, g->cand[c].label, where,
                           mc->med * 1e6, g->cand[best].label, mb->med * 1e6, slower * 100, thr * 100, cmp);
                } else {
                    printf("ok    %-9s %6s%s: %s (%s) %.2f us; fastest %s %.2f us (%+.1f%% side by side, noise "
                           "%.0f%%%s)\n",
                           fr_coll_name(coll), sz, mem, g->cand[c].label, where, mc->med * 1e6, g->cand[best].label,
                           mb->med * 1e6, slower * 100, thr * 100, cmp);
                }
            }
            stale += ranges.ranges;
        }
        steadiness(T, stdout, PROG ": ");
        printf(PROG ": %d stale range%s in %s%s (%ld points measured in %.0f s%s)\n", stale, stale == 1 ? "" : "s",
               T->o.check, T->mem == FR_MEM_CUDA ? ", cuda rules" : "", T->done, now() - T->t0,
               T->skipped ? "; the budget cut some" : "");
    }
    fr_select_use(T->comm, (fr_table_t){0});
    fr_table_free(&tab);
    MPI_Bcast(&stale, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return stale ? 3 : 0;
}

/* Rank 0 lists the candidates of the memory type about to be measured. */
static void print_cands(tuner_t *T)
{
    if (T->rank != 0) return;
    printf("# %s memory: %d candidates:\n", T->mem == FR_MEM_CUDA ? "cuda (device)" : "host", T->g.ncand);
    for (int c = 0; c < T->g.ncand; c++) {
        fr_call_t call = call_of(T, T->g.cand[c].coll, T->g.sizes[0]);
        int serves = fr_algs[T->g.cand[c].alg]->check(&call, T->comm) == FR_SUCCESS;
        printf("#   %-9s %-28s%s\n", fr_coll_name(T->g.cand[c].coll), T->g.cand[c].label,
               serves ? "" : "  (cannot serve this job: skipped)");
    }
    fflush(stdout);
}

/* ------------------------------------------------------------------ main */

static float *aligned_buffer(size_t bytes)
{
    void *p = NULL;
    return posix_memalign(&p, 4096, bytes ? bytes : 1) ? NULL : p;
}

int main(int argc, char **argv)
{
    tuner_t T;
    memset(&T, 0, sizeof T);
    MPI_Init(&argc, &argv);
    T.t0 = now();
    MPI_Comm_rank(MPI_COMM_WORLD, &T.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &T.size);
    int rc = parse_opts(argc, argv, &T.o, T.rank);
    if (rc) {
        MPI_Finalize();
        return rc == 1 ? 0 : rc;
    }
    MPI_Bcast(&T.t0, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    T.deadline = T.t0 + T.o.budget;
    T.pol = (tc_policy_t)TC_POLICY_DEFAULT;
    for (int i = 0; i < 13; i++) {
        double e = 0;
        for (int r = 0; r < T.size; r++) e += (double)((int)((i + 3 * r) % 13) - 6);
        T.expect[i] = e;
    }

    /* device buffers: before the communicator, which binds; the GPU is set here */
    char why[256] = "";
    int dev = -1;
    /* (--check measures host rules unless --memory names cuda) */
    int gpus = (!T.o.check && !T.o.mems) || (T.o.mems & FR_MEM_CUDA) ? bd_gpus(&dev, why, sizeof why) : 0;
    if ((T.o.mems & FR_MEM_CUDA) && !gpus) {
        if (T.rank == 0) fprintf(stderr, PROG ": --memory cuda: %s\n", why);
        MPI_Finalize();
        return 2;
    }
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &T.comm);
    if (st != FR_SUCCESS) {
        if (T.rank == 0) fprintf(stderr, PROG ": fr_comm_create: %s: %s\n", fr_strerror(st), fr_last_error());
        MPI_Finalize();
        return 1;
    }
    /* NCCL now, so that a job NCCL cannot serve (two ranks on one GPU) is
     * not measured as NCCL: its device calls would all be staged */
    if (gpus && (fr_device_setup(T.comm, dev) != FR_SUCCESS || !fr_comm_facts(T.comm).nccl_ready)) {
        gpus = 0;
        snprintf(why, sizeof why, "NCCL could not be set up on every rank (see the warning above)");
        if (T.o.mems & FR_MEM_CUDA) {
            if (T.rank == 0) fprintf(stderr, PROG ": --memory cuda: %s\n", why);
            fr_comm_destroy(T.comm);
            MPI_Finalize();
            return 2;
        }
    }
    unsigned mems = T.o.mems ? T.o.mems : FR_MEM_HOST | (gpus ? FR_MEM_CUDA : 0);
    T.F = fr_comm_facts(T.comm);
    T.own = *fr_comm_table(T.comm);
    uint64_t sizes[MAX_SIZES];
    int nsizes = tc_sizes(T.o.min, T.o.max, sizeof(float), sizes, MAX_SIZES);
    size_t bytes = nsizes ? (size_t)sizes[nsizes - 1] : 0;
    /* page-aligned, as fr_osu_* and the frameworks' allocators give them (a
     * large malloc is 16 bytes past a page): the tuner measures what the
     * benchmark that checks its table measures */
    T.sbuf = aligned_buffer(bytes);
    T.rbuf = aligned_buffer(bytes);
    if (mems & FR_MEM_CUDA) {
        T.dsbuf = bd_alloc(bytes);
        T.drbuf = bd_alloc(bytes);
    }
    int ok = nsizes && T.sbuf && T.rbuf && (!(mems & FR_MEM_CUDA) || (T.dsbuf && T.drbuf)), all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        if (T.rank == 0)
            fprintf(stderr, PROG ": %s\n", nsizes ? "cannot allocate the message buffers (see --max)" :
                    "no size in --min..--max");
        rc = 1;
        goto done;
    }
    if (T.rank == 0) {
        printf("# " PROG " (libfastreduce %s): %d ranks on %d node(s) of up to %d, fingerprint %s\n", fr_version(),
               T.size, T.F.nnodes, T.F.ppn, T.F.fingerprint);
        printf("# %d sizes from %llu to %llu bytes, budget %.0f s, %d repetitions per point\n", nsizes,
               (unsigned long long)sizes[0], (unsigned long long)sizes[nsizes - 1], T.o.budget, T.o.reps);
        if (!(mems & FR_MEM_CUDA) && !T.o.check) printf("# device buffers: not measured (%s)\n", why);
        fflush(stdout);
    }
    /* one pass per memory type; each gets an equal share of the time left,
     * its sweep 60% of it, the second look 25%, the confirmation of lone
     * wins the rest (the last
     * pass ends at 98% of the budget: 2% for writing, closing, the launcher) */
    const fr_mem_t order[2] = { FR_MEM_HOST, FR_MEM_CUDA };
    int npass = ((mems & FR_MEM_HOST) != 0) + ((mems & FR_MEM_CUDA) != 0), stale = 0;
    for (int m = 0, pass = 0; m < 2 && rc == 0; m++) {
        if (!(mems & order[m])) continue;
        T.mem = order[m];
        if (tc_grid_init(&T.g, MAX_CANDS, nsizes)) {
            if (T.rank == 0) fprintf(stderr, PROG ": out of memory\n");
            rc = 1;
            break;
        }
        memcpy(T.g.sizes, sizes, (size_t)nsizes * sizeof *sizes);
        T.g.ncand = 0;
        make_cands(&T);
        print_cands(&T);
        if (!T.g.ncand) {
            if (T.rank == 0) fprintf(stderr, PROG ": no algorithm left to measure (see --algos and --coll)\n");
            rc = 1;
        } else if (T.o.check) {
            rc = check_table(&T, (T.t0 + T.o.budget - now()) / (npass - pass));
            if (rc == 3) stale = 1, rc = 0;   /* the next memory type is still checked */
        } else {
            double start = now(), share = (T.t0 + T.o.budget - start) / (npass - pass);
            T.deadline = start + 0.6 * share;
            sweep(&T, NULL);
            T.deadline = start + 0.85 * share;
            second_look(&T);
            T.deadline = pass == npass - 1 ? T.t0 + 0.98 * T.o.budget : start + share;
            confirm(&T);
        }
        T.gs[T.ng] = T.g;
        T.gmem[T.ng++] = T.mem;
        memset(&T.g, 0, sizeof T.g);
        pass++;
    }
    if (T.o.check) {
        if (T.rank == 0 && T.o.csv) rc |= write_outputs(&T, NULL, NULL, T.o.csv);
        if (!rc && stale) rc = 3;
        goto done;
    }
    if (rc) goto done;
    if (T.rank == 0) {
        char out[512], csv[512];
        if (T.o.out) snprintf(out, sizeof out, "%s", T.o.out);
        else snprintf(out, sizeof out, "fastreduce-%s-%dx%d.tune",
                      T.F.fingerprint, T.F.nnodes, T.F.ppn);
        if (T.o.csv) snprintf(csv, sizeof csv, "%s", T.o.csv);
        else {
            size_t l = strlen(out);
            snprintf(csv, sizeof csv, "%.*s.csv", (int)(l > 5 && !strcmp(out + l - 5, ".tune") ? l - 5 : l), out);
        }
        fr_table_meta_t meta;
        meta_of(&T, argc, argv, &meta);
        printf(PROG ": %ld points measured in %.1f s (budget %.0f s)\n", T.done, now() - T.t0, T.o.budget);
        if (T.skipped)
            printf(PROG ": warning: the budget ran out before %ld points; their sizes take the choice of the "
                   "nearest measured size (give a larger --budget or a smaller --max)\n", T.skipped);
        steadiness(&T, stdout, PROG ": ");
        rc = write_outputs(&T, &meta, out, csv);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
done:
    fr_select_use(T.comm, T.own);
    free(T.sbuf);
    free(T.rbuf);
    bd_free(T.dsbuf);
    bd_free(T.drbuf);
    tc_grid_free(&T.g);
    for (int i = 0; i < T.ng; i++) tc_grid_free(&T.gs[i]);
    fr_comm_destroy(T.comm);
    MPI_Finalize();
    return rc;
}

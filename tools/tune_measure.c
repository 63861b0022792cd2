/* The autotuner's measuring: the message buffers (host and device), one
 * point timed (checked, warmed up, repeated side by side with the other
 * candidates of its size) and the steadiness probe. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "tuner.h"
#include "bench_device.h"

/* A page-aligned host buffer: fr_mem_alloc's with @p shared. */
static float *aligned_buffer(size_t bytes, int shared)
{
    void *p = NULL;
    if (shared) return fr_mem_alloc(bytes ? bytes : 1, &p) == FR_SUCCESS ? p : NULL;
    return posix_memalign(&p, 4096, bytes ? bytes : 1) ? NULL : p;
}

/* The message buffers, host and (where @p mems has cuda) device, of
 * @p bytes each, and the sums the allreduce check expects (fill(),
 * wrong()). The host buffers are page-aligned, as fr_osu_* and the
 * frameworks' allocators give them (a large malloc is 16 bytes past a
 * page): the tuner measures what the benchmark that checks its table
 * measures. Returns 1 when every buffer was allocated. */
int tn_alloc_buffers(tuner_t *T, size_t bytes, unsigned mems)
{
    for (int i = 0; i < 13; i++) {
        double e = 0;
        for (int r = 0; r < T->size; r++) e += (double)((int)((i + 3 * r) % 13) - 6);
        T->expect[i] = e;
    }
    T->sbuf = aligned_buffer(bytes, T->o.shared);
    T->rbuf = aligned_buffer(bytes, T->o.shared);
    if (mems & FR_MEM_CUDA) {
        T->dsbuf = bd_alloc(bytes);
        T->drbuf = bd_alloc(bytes);
    }
    return T->sbuf && T->rbuf && (!(mems & FR_MEM_CUDA) || (T->dsbuf && T->drbuf));
}

/* The buffers freed (those never allocated are NULL). */
void tn_free_buffers(tuner_t *T)
{
    if (T->o.shared) {
        fr_mem_free(T->sbuf);
        fr_mem_free(T->rbuf);
    } else {
        free(T->sbuf);
        free(T->rbuf);
    }
    bd_free(T->dsbuf);
    bd_free(T->drbuf);
}

/* One call of @p coll on @p count floats in the buffers of T->mem, under
 * the rule forced. */
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

/* The input of a checked call: allreduce's element i on rank r is
 * (i + 3r) % 13 - 6, bcast's root sends i * 7 % 251; what is to be
 * received starts as a NaN, so an element left unwritten is wrong. */
static void fill(tuner_t *T, int coll, size_t count)
{
    uint32_t nan = 0x7fc0dead;
    for (size_t i = 0; i < count; i++) {
        if (coll == FR_COLL_ALLREDUCE) T->sbuf[i] = (float)((int)((i + 3 * (size_t)T->rank) % 13) - 6);
        if (coll == FR_COLL_BCAST && T->rank == 0) T->rbuf[i] = (float)(i * 7 % 251);
        else memcpy(&T->rbuf[i], &nan, sizeof nan);
    }
}

/* The elements of the result that differ from what fill() makes them. */
static size_t wrong(const tuner_t *T, int coll, size_t count)
{
    size_t bad = 0;
    for (size_t i = 0; i < count; i++) {
        float want = coll == FR_COLL_ALLREDUCE ? (float)T->expect[i % 13] : (float)(i * 7 % 251);
        bad += !(T->rbuf[i] == want);
    }
    return bad;
}

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
 * TC_FAILED (with why). The candidate serves the call: tn_usable() said so. */
static int prepare(tuner_t *T, int c, int s, double rep_s, long *iters, char *why, size_t wlen)
{
    const tc_cand_t *k = &T->g.cand[c];
    size_t count = T->g.sizes[s] / sizeof(float);
    tn_force(T, k);
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
    tn_force(T, k);
    double t = timed_calls(T, k, T->g.sizes[s] / sizeof(float), iters, tc_block_calls(T->g.sizes[s]));
    return t < 0 ? t : t / (double)iters;
}

/* The time one point at size s will take at least: a check call, a warm-up
 * call and one call per repetition. A call's time is extrapolated from the
 * candidate's two largest measured sizes below s along the line through
 * them (a latency and a bandwidth term; never falling), or from one such
 * size in proportion to bytes when it is within 16x; 0 when nothing is known. */
double tn_min_cost(const tuner_t *T, int c, int s)
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

/* What rank 0 decides for a size, and every rank follows: how long a
 * repetition lasts, and which candidates the budget still allows. */
typedef struct plan {
    double rep_s;
    int    skip[MAX_CANDS];
} plan_t;

/* Rank 0's plan for candidates list[0..n) at size s, from its estimate
 * @p left_points of the points still to come (these included) and the
 * least time @p reserve those after this size will take; broadcast. */
static void plan_size(tuner_t *T, int s, const int *list, int n, double left_points, double reserve, plan_t *pl)
{
    memset(pl, 0, sizeof *pl);
    if (left_points < n) left_points = n;
    if (T->rank == 0) {
        /* the time left, less the least the points after this size will take, shared out */
        double left = T->deadline - now(), avail = left - reserve;
        double per_point = avail > 0 ? avail * 0.9 / left_points : 0;
        pl->rep_s = per_point / (T->o.reps + 1.5);
        if (pl->rep_s < REP_MIN_S) pl->rep_s = REP_MIN_S;
        if (pl->rep_s > REP_MAX_S) pl->rep_s = REP_MAX_S;
        double cost = 0;
        for (int i = 0; i < n; i++) {
            double mc = tn_min_cost(T, list[i], s);
            cost += mc > per_point ? mc : per_point;
            pl->skip[i] = left <= 0 || cost > left;
        }
    }
    MPI_Bcast(pl, (int)sizeof *pl, MPI_BYTE, 0, MPI_COMM_WORLD);
}

/* Each candidate of list[0..n) the plan allows checked and warmed up
 * (prepare): iters[i] its calls per repetition, -1 where the plan skips it;
 * why[i] says why one failed. */
static void start_points(tuner_t *T, int s, const int *list, int n, const plan_t *pl, long *iters,
                         char (*why)[256])
{
    for (int i = 0; i < n; i++) {
        tc_meas_t *m = tc_at(&T->g, list[i], s);
        why[i][0] = '\0';
        if (pl->skip[i]) {
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
        m->state = prepare(T, list[i], s, pl->rep_s, &iters[i], why[i], sizeof why[i]);
    }
}

/* The repetitions v[i][0..reps) of the points started at size s made into
 * their figures (tc_stats sorts each row) and counted, rank 0 printing a
 * line for each, and those measured correct compared side by side. */
static void record_points(tuner_t *T, int s, const int *list, int n, const long *iters,
                          double (*v)[TC_MAX_REPS], char (*why)[256])
{
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

/* Measure candidates list[0..n) at size s side by side: each is checked and
 * warmed up, then the repetitions go round the candidates, so that a slow
 * spell of the machine falls on all of them alike. Rank 0 decides the
 * repetition length and what the budget still allows, from its estimate
 * @p left_points of the points still to come (these included), and every
 * rank follows. */
void tn_measure_size(tuner_t *T, int s, const int *list, int n, double left_points, double reserve)
{
    plan_t pl;
    long iters[MAX_CANDS];
    double v[MAX_CANDS][TC_MAX_REPS];
    char why[MAX_CANDS][256];
    plan_size(T, s, list, n, left_points, reserve, &pl);
    start_points(T, s, list, n, &pl, iters, why);
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
    record_points(T, s, list, n, iters, v, why);
}

/* The steadiness probe: the slowest rank's time of an 8-byte MPI_Allreduce
 * (the MPI library's own, untouched by what is tuned), median of 5 x 200.
 * Its extremes over the run say whether the machine kept one speed. */
double tn_probe(tuner_t *T)
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
void tn_steadiness(const tuner_t *T, FILE *f, const char *prefix)
{
    double r = T->probe_min > 0 ? T->probe_max / T->probe_min : 1;
    fprintf(f, "%ssteadiness: an 8-byte MPI_Allreduce took %.2f to %.2f us over the run (x%.2f)%s\n", prefix,
            T->probe_min * 1e6, T->probe_max * 1e6, r,
            r > 1.3 ? "; the machine did not keep one speed during the run, so figures measured at different "
                      "times are not comparable: check the table with --check" : "");
}

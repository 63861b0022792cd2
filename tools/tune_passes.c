/* The autotuner's passes: which points are measured and in what order
 * within the budget (the sweep, a second look at close sizes, the
 * confirmation of lone wins). */
#include <stdio.h>
#include "config.h"
#include "tuner.h"

/* Sizes of the first pass: powers of four (and the largest size), so every
 * candidate is seen across the whole range before any is dropped. */
int tn_coarse(const tc_grid_t *g, int s)
{
    uint64_t v = g->sizes[s];
    if (s == g->nsizes - 1) return 1;
    if (v & (v - 1)) return 0;
    int lg = 0;
    while (v >>= 1) lg++;
    return lg % 2 == 0;
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
    return sample ? sample[s] && !pass : tn_coarse(&T->g, s) == !pass;
}

/* The candidates measured at size s in pass @p pass: those that serve the
 * call and differ from the default, less those tc_keep() prunes in the
 * second pass (marked pruned). The budget fits the best first: they are
 * ordered by their ranking at the nearest size below. Returns the count. */
static int pass_list(tuner_t *T, int s, int pass, int *list)
{
    tc_grid_t *g = &T->g;
    int n = 0;
    for (int c = 0; c < g->ncand; c++) {
        if (!tn_usable(T, c, s)) continue;
        if (pass == 1 && !tc_keep(g, c, s, &T->pol)) tc_at(g, c, s)->state = TC_PRUNED;
        else list[n++] = c;
    }
    double key[MAX_CANDS];
    for (int i = 0; i < n; i++) key[i] = rank_below(T, list[i], s);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && key[j] < key[j - 1]; j--) {
            double tk = key[j]; key[j] = key[j - 1]; key[j - 1] = tk;
            int tl = list[j]; list[j] = list[j - 1]; list[j - 1] = tl;
        }
    return n;
}

/* Rank 0's estimate of the points left at size s of pass @p pass (the rest
 * of this pass, and in the first pass half of every candidate at every
 * size of the second, which lie below as well as above this one); adds to
 * *reserve the least time those after this size will take. */
static double points_left(const tuner_t *T, const int *sample, int s, int pass, double *reserve)
{
    const tc_grid_t *g = &T->g;
    double left = 0;
    for (int s2 = 0; s2 < g->nsizes; s2++)
        for (int c2 = 0; c2 < g->ncand; c2++) {
            if (tc_at(g, c2, s2)->state == TC_DECLINED || tn_same_as_default(T, &g->cand[c2], g->sizes[s2]) ||
                (s2 != s && tc_at(g, c2, s2)->state != TC_NONE))
                continue;
            double w = 0;
            if (s2 == s) w = tc_at(g, c2, s2)->state == TC_NONE;
            else if (in_pass(T, sample, s2, pass)) w = s2 > s && (pass == 0 || tc_keep(g, c2, s2, &T->pol));
            else if (pass == 0 && !sample) w = 0.5;
            left += w;
            if (s2 != s) *reserve += w * tn_min_cost(T, c2, s2);
        }
    return left;
}

/* Size s in pass @p pass of the sweep: the steadiness probe, then its
 * candidates side by side. */
static void sweep_size(tuner_t *T, const int *sample, int s, int pass)
{
    tc_grid_t *g = &T->g;
    double pr = tn_probe(T);
    g->probe[s] = pr;
    if (T->rank == 0 && !T->o.quiet) {
        char sz[32];
        tc_fmt_bytes(sz, sizeof sz, g->sizes[s]);
        printf("[%6.1fs, %5.0fs left] pass %d, %s: steadiness probe %.2f us\n", now() - T->t0,
               T->deadline - now(), pass + 1, sz, pr * 1e6);
    }
    int list[MAX_CANDS], n = pass_list(T, s, pass, list);
    double reserve = 0, left = T->rank == 0 ? points_left(T, sample, s, pass, &reserve) : 0;
    if (n) tn_measure_size(T, s, list, n, left, reserve);
    /* a size where no candidate of a collective came out correct (the one the
     * pruning kept failed its check) has the pruned ones measured after all,
     * so that it does not go to the failed one's range (tc_unprune) */
    int more[MAX_CANDS], k = 0;
    for (int coll = 0; pass == 1 && coll < FR_COLL_COUNT; coll++)
        k += tc_unprune(g, coll, s, more + k, MAX_CANDS - k);
    if (k) tn_measure_size(T, s, more, k, left - n + k, reserve);
    if (T->rank == 0 && T->o.quiet) {
        char sz[32];
        tc_fmt_bytes(sz, sizeof sz, g->sizes[s]);
        printf("[%6.1fs, %5.0fs left] pass %d: %s done (steadiness probe %.2f us)\n", now() - T->t0,
               T->deadline - now(), pass + 1, sz, pr * 1e6);
        fflush(stdout);
    }
}

/* The sweep: the coarse pass over every candidate, then the other sizes
 * for the candidates tc_keep() still allows (with a sample: its sizes in
 * one pass). */
void tn_sweep(tuner_t *T, const int *sample)
{
    tc_grid_t *g = &T->g;
    for (int s = 0; s < g->nsizes; s++)   /* mark what declines, before any time is shared out */
        for (int c = 0; c < g->ncand; c++) tn_usable(T, c, s);
    for (int pass = 0; pass < 2; pass++)
        for (int s = 0; s < g->nsizes; s++)
            if (in_pass(T, sample, s, pass)) sweep_size(T, sample, s, pass);
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
int tn_contenders_and(const tuner_t *T, int coll, int s, int also, int *list)
{
    return add_listed(list, contenders(T, coll, s, list), also);
}

/* A second look, later than the sweep, at every size where some candidate
 * is within 1.5x of the fastest: those candidates side by side again, so
 * that no choice rests on one comparison made in one spell of the machine
 * (a size measured first while the machine was slow can rank the
 * candidates otherwise than it usually does). Both collectives of a size
 * are measured together. */
void tn_second_look(tuner_t *T)
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
        g->probe[s] = tn_probe(T);
        tn_measure_size(T, s, list, n, total, 0);
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
void tn_confirm(tuner_t *T)
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
                T->g.probe[ds[coll][i]] = tn_probe(T);
                tn_measure_size(T, ds[coll][i], list, n, total, 0);
                total -= n;
            }
    }
}

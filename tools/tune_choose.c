/* The autotuner's decisions on measurements; see tune_choose.h. */
#include "tune_choose.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

int tc_grid_init(tc_grid_t *g, int ncand, int nsizes)
{
    memset(g, 0, sizeof *g);
    if (ncand < 0 || nsizes < 0) return -1;
    g->cand = calloc((size_t)ncand + 1, sizeof *g->cand);
    g->sizes = calloc((size_t)nsizes + 1, sizeof *g->sizes);
    g->probe = calloc((size_t)nsizes + 1, sizeof *g->probe);
    g->m = calloc((size_t)ncand * (size_t)nsizes + 1, sizeof *g->m);
    if (!g->cand || !g->sizes || !g->probe || !g->m) {
        tc_grid_free(g);
        return -1;
    }
    g->ncand = ncand;
    g->nsizes = nsizes;
    return 0;
}

void tc_grid_free(tc_grid_t *g)
{
    free(g->cand);
    free(g->sizes);
    free(g->probe);
    free(g->m);
    memset(g, 0, sizeof *g);
}

static int add_size(uint64_t v, uint64_t unit, uint64_t min, uint64_t max, uint64_t *out, int n, int cap)
{
    if (unit > 1) v = v / unit * unit;
    if (v < min || v > max || v == 0 || n >= cap) return n;
    if (n > 0 && out[n - 1] >= v) return n;
    out[n] = v;
    return n + 1;
}

int tc_sizes(uint64_t min, uint64_t max, uint64_t unit, uint64_t *out, int cap)
{
    int n = 0;
    if (!unit) unit = 1;
    if (min < unit) min = unit;
    for (uint64_t p = 1; p && p <= max; p <<= 1) {
        n = add_size(p, unit, min, max, out, n, cap);
        if (p >= 2 && p + p / 2 > p) n = add_size(p + p / 2, unit, min, max, out, n, cap);
        if (p > UINT64_MAX / 2) break;
    }
    return n;
}

/* Ties go by the registry's tie_rank of the algorithm, ten apart so that
 * each parameter a candidate sets can add one. On one node an algorithm
 * made for one node (FR_ALG_ONE_NODE: shm) comes first: one segment and two
 * waits a chunk, where the point-to-point algorithms pass UCX messages
 * through the same memory in more steps. An unknown name comes last. */
int tc_simplicity(int coll, const char *name, int nodes)
{
    int i = coll >= 0 && coll < FR_COLL_COUNT ? fr_alg_lookup(coll, name) : -1;
    if (i < 0) return 80;
    if (nodes == 1 && (fr_algs[i]->traits & FR_ALG_ONE_NODE)) return -10;
    return fr_algs[i]->tie_rank * 10;
}

double tc_noise(const tc_meas_t *best, const tc_meas_t *other, const tc_policy_t *p)
{
    double floor = p->tie * best->med, cap = p->tie_max * best->med;
    double spread = best->q3 - best->q1;
    if (other->q3 - other->q1 > spread) spread = other->q3 - other->q1;
    double n = spread > floor ? spread : floor;
    return n < cap ? n : cap;
}

static int cmp_double(const void *a, const void *b);
static double quantile(const double *v, int n, double q);

/* The median of m's side-by-side ratios (0 when it has none). */
static double rel_median(const tc_meas_t *m)
{
    double v[TC_HIST];
    int n = m->nrel < TC_HIST ? m->nrel : TC_HIST;
    if (n <= 0) return 0;
    memcpy(v, m->rel, sizeof v[0] * (size_t)n);
    qsort(v, (size_t)n, sizeof v[0], cmp_double);
    return quantile(v, n, 0.5);
}

/* Candidate list[i]'s standing in one side-by-side measurement: the median
 * over the rounds of its time over the fastest time of its collective's
 * candidates (those with ok[j]) in that round; its median over @p best
 * without rounds. */
static double round_standing(const tc_grid_t *g, int s, const int *list, int n, const int *ok, const double *v,
                             int reps, int i, double best)
{
    double q[TC_MAX_REPS];
    int nq = 0;
    for (int r = 0; v && r < reps && r < TC_MAX_REPS; r++) {
        double lo = 0;
        for (int j = 0; j < n; j++)
            if (ok[j] && v[(size_t)j * reps + r] > 0 && (lo <= 0 || v[(size_t)j * reps + r] < lo))
                lo = v[(size_t)j * reps + r];
        if (lo > 0 && v[(size_t)i * reps + r] > 0) q[nq++] = v[(size_t)i * reps + r] / lo;
    }
    if (!nq) return tc_at(g, list[i], s)->med / best;
    qsort(q, (size_t)nq, sizeof q[0], cmp_double);
    return quantile(q, nq, 0.5);
}

void tc_compared(tc_grid_t *g, int s, const int *list, int n, const double *v, int reps)
{
    int ok[TC_MAX_CANDS], id = ++g->ncomp;
    if (n > TC_MAX_CANDS) n = TC_MAX_CANDS;
    for (int coll = 0; coll < FR_COLL_COUNT; coll++) {
        double best = 0;
        int nok = 0;
        for (int i = 0; i < n; i++) {
            const tc_meas_t *m = tc_at(g, list[i], s);
            ok[i] = g->cand[list[i]].coll == coll && m->state == TC_OK && m->med > 0;
            if (ok[i] && (!nok++ || m->med < best)) best = m->med;
        }
        if (nok < 2) continue;
        for (int i = 0; i < n; i++) {
            if (!ok[i]) continue;
            tc_meas_t *m = tc_at(g, list[i], s);
            double r = round_standing(g, s, list, n, ok, v, reps, i, best);
            if (m->nrel == TC_HIST) {   /* the oldest goes */
                memmove(m->rel, m->rel + 1, sizeof m->rel[0] * (TC_HIST - 1));
                memmove(m->relid, m->relid + 1, sizeof m->relid[0] * (TC_HIST - 1));
                m->nrel--;
            }
            m->relid[m->nrel] = id;
            m->rel[m->nrel++] = r;
        }
    }
}

/* What the candidates of a collective at one size stand against: the
 * fastest by median (fm), and the one with the lowest median ratio (fc,
 * -1 when none was compared side by side) with that ratio (low). */
typedef struct { int fm, fc; double low; } basis_t;

static basis_t basis(const tc_grid_t *g, int coll, int s)
{
    basis_t b = { -1, -1, 0 };
    for (int k = 0; k < g->ncand; k++) {
        const tc_meas_t *o = tc_at(g, k, s);
        if (g->cand[k].coll != coll || o->state != TC_OK) continue;
        if (b.fm < 0 || o->med < tc_at(g, b.fm, s)->med) b.fm = k;
        double r = rel_median(o);
        if (r > 0 && (b.fc < 0 || r < b.low || (r == b.low && o->med < tc_at(g, b.fc, s)->med))) {
            b.fc = k;
            b.low = r;
        }
    }
    return b;
}

/* A TC_OK candidate's standing before it is made relative (tc_rel()). */
static double standing(const tc_grid_t *g, const basis_t *b, int c, int s)
{
    const tc_meas_t *m = tc_at(g, c, s);
    if (b->fc < 0) return m->med / tc_at(g, b->fm, s)->med;
    if (m->nrel > 0) return rel_median(m) / b->low;
    return m->med / tc_at(g, b->fc, s)->med;
}

double tc_rel(const tc_grid_t *g, int c, int s)
{
    if (tc_at(g, c, s)->state != TC_OK || tc_at(g, c, s)->med <= 0) return 0;
    basis_t b = basis(g, g->cand[c].coll, s);
    double mine = standing(g, &b, c, s), low = mine;
    for (int k = 0; k < g->ncand; k++) {
        const tc_meas_t *o = tc_at(g, k, s);
        if (g->cand[k].coll != g->cand[c].coll || o->state != TC_OK || o->med <= 0) continue;
        double r = standing(g, &b, k, s);
        if (r < low) low = r;
    }
    return mine / low;
}

int tc_fastest(const tc_grid_t *g, int coll, int s, int except)
{
    basis_t b = basis(g, coll, s);
    int best = -1;
    double br = 0;
    for (int c = 0; c < g->ncand; c++) {
        const tc_meas_t *m = tc_at(g, c, s);
        if (c == except || g->cand[c].coll != coll || m->state != TC_OK || m->med <= 0) continue;
        double r = standing(g, &b, c, s);
        if (best < 0 || r < br || (r == br && m->med < tc_at(g, best, s)->med)) {
            best = c;
            br = r;
        }
    }
    return best;
}

/* Did some comparison that measured both put @p a more than @p clear
 * (a fraction) behind @p b, and none put it that far ahead of b? */
static int behind_at_times(const tc_meas_t *a, const tc_meas_t *b, double clear)
{
    int behind = 0;
    for (int i = 0; i < a->nrel; i++)
        for (int j = 0; j < b->nrel; j++) {
            if (!a->relid[i] || a->relid[i] != b->relid[j]) continue;
            if (b->rel[j] > a->rel[i] * (1 + clear)) return 0;
            behind |= a->rel[i] > b->rel[j] * (1 + clear);
        }
    return behind;
}

/* The winner at size s before its neighbours are looked at: the simplest
 * of the tie (tc_winner), or @p prefer when it is one of those that may
 * take the tie. */
static int winner_of(const tc_grid_t *g, int coll, int s, const tc_policy_t *p, int prefer)
{
    int best = tc_fastest(g, coll, s, -1);
    if (best < 0) return -1;
    basis_t bs = basis(g, coll, s);
    const tc_meas_t *b = tc_at(g, best, s);
    double rb = standing(g, &bs, best, s), clear = 2 * p->tie_max;
    /* the tie: best and those within noise of it */
    char own[TC_MAX_CANDS + 1] = {0};
    char *tie = g->ncand <= TC_MAX_CANDS ? own : calloc((size_t)g->ncand + 1, 1);
    if (!tie) return best;
    for (int c = 0; c < g->ncand; c++) {
        const tc_meas_t *m = tc_at(g, c, s);
        if (g->cand[c].coll != coll || m->state != TC_OK || m->med <= 0) continue;
        tie[c] = c == best || standing(g, &bs, c, s) / rb - 1 <= tc_noise(b, m, p) / b->med;
    }
    /* first without those behind another tied one at times; all of them if none is left */
    int win = -1;
    for (int strict = 1; strict >= 0 && win < 0; strict--) {
        double rw = 0;
        for (int i = -1; i < g->ncand; i++) {   /* best first: it keeps an exact tie */
            int c = i < 0 ? best : i;
            if (!tie[c] || (i >= 0 && c == best)) continue;
            int behind = 0;
            for (int k = 0; strict && k < g->ncand && !behind; k++)
                behind = k != c && tie[k] && behind_at_times(tc_at(g, c, s), tc_at(g, k, s), clear);
            if (behind) continue;
            if (c == prefer) {
                win = c;
                break;
            }
            double rc = standing(g, &bs, c, s);
            if (win < 0 || g->cand[c].simplicity < g->cand[win].simplicity ||
                (g->cand[c].simplicity == g->cand[win].simplicity && rc < rw)) {
                win = c;
                rw = rc;
            }
        }
    }
    if (tie != own) free(tie);
    return win;
}

int tc_winner(const tc_grid_t *g, int coll, int s, const tc_policy_t *p)
{
    int w = winner_of(g, coll, s, p, -1), below = -1, above = -1;
    if (w < 0) return w;
    for (int t = s - 1; t >= 0 && below < 0; t--) below = winner_of(g, coll, t, p, -1);
    for (int t = s + 1; t < g->nsizes && above < 0; t++) above = winner_of(g, coll, t, p, -1);
    /* a tie between the two sides' winner and another goes to the sides' winner */
    return below >= 0 && below == above && below != w ? winner_of(g, coll, s, p, below) : w;
}

int tc_keep(const tc_grid_t *g, int c, int s, const tc_policy_t *p)
{
    int below = -1, above = -1;
    for (int i = 0; i < g->nsizes; i++) {
        int st = tc_at(g, c, i)->state;
        if (st == TC_FAILED) return 0;
        if (st != TC_OK) continue;
        if (i < s) below = i;
        else if (i > s && above < 0) above = i;
    }
    int judged = 0, slow = 0;
    int nb[2] = { below, above };
    for (int k = 0; k < 2; k++) {
        if (nb[k] < 0) continue;
        judged++;
        slow += tc_rel(g, c, nb[k]) > p->prune;
    }
    return !judged || slow < judged;
}

int tc_unprune(const tc_grid_t *g, int coll, int s, int *out, int cap)
{
    int n = 0;
    for (int c = 0; c < g->ncand; c++)
        if (g->cand[c].coll == coll && tc_at(g, c, s)->state == TC_OK) return 0;
    for (int c = 0; c < g->ncand && n < cap; c++) {
        if (g->cand[c].coll != coll || tc_at(g, c, s)->state != TC_PRUNED) continue;
        int failed = 0;   /* (one that failed anywhere stays out: tc_keep) */
        for (int i = 0; i < g->nsizes && !failed; i++) failed = tc_at(g, c, i)->state == TC_FAILED;
        if (!failed) out[n++] = c;
    }
    return n;
}

int tc_disputed(const tc_grid_t *g, int coll, const tc_policy_t *p, int *out, int cap)
{
    int n = 0, prev = -1, prev_w = -1;
    for (int s = 0; s < g->nsizes; s++) {
        int w = tc_winner(g, coll, s, p);
        if (w < 0) continue;
        if (prev >= 0 && prev_w != w) {
            int next_w = -1;
            for (int t = s + 1; t < g->nsizes && next_w < 0; t++) next_w = tc_winner(g, coll, t, p);
            if (next_w >= 0 && next_w != w && n < cap) out[n++] = s;
        }
        prev = s;
        prev_w = w;
    }
    return n;
}

int tc_ranges(const tc_grid_t *g, int coll, const tc_policy_t *p, tc_range_t *out, int cap)
{
    int n = 0, open = 0;   /* open: the last range may still take the sizes that follow */
    for (int s = 0; s < g->nsizes; s++) {
        int w = tc_winner(g, coll, s, p);
        if (w < 0) {
            /* A size without a winner joins the range before it, unless that
             * range's candidate failed its check there (a candidate far faster
             * at the sizes around has the others pruned, and may then fail
             * alone): the range ends, and the sizes up to the next winner's
             * first are left to the rules that follow the table. */
            if (n > 0 && open && tc_at(g, out[n - 1].cand, s)->state == TC_FAILED) open = 0;
            else if (n > 0 && open) out[n - 1].hi = g->sizes[s];
            continue;
        }
        if (n > 0 && open && out[n - 1].cand == w) {
            out[n - 1].s_last = s;
            out[n - 1].hi = g->sizes[s];
            continue;
        }
        if (n == cap) break;
        /* the first range also takes the sizes before it, back to one where its candidate failed */
        uint64_t lo = s > 0 ? g->sizes[s - 1] + 1 : 0;
        for (int t = s - 1; n == 0 && t >= 0 && tc_at(g, w, t)->state != TC_FAILED; t--)
            lo = t > 0 ? g->sizes[t - 1] + 1 : 0;
        out[n++] = (tc_range_t){ .cand = w, .lo = lo, .hi = g->sizes[s], .s_first = s, .s_last = s };
        open = 1;
    }
    if (n > 0 && open) out[n - 1].hi = FR_INF;
    return n;
}

void tc_stale_add(tc_stale_t *t, int rule, int stale)
{
    if (!t->started || rule != t->rule) t->reported = 0;
    t->started = 1;
    t->rule = rule;
    if (stale && !t->reported) t->ranges++;
    t->reported |= stale;
}

void tc_range_rule(const tc_grid_t *g, const tc_range_t *r, uint64_t nodes, uint64_t ppn, unsigned mem,
                   fr_rule_t *out)
{
    const tc_cand_t *c = &g->cand[r->cand];
    memset(out, 0, sizeof *out);
    out->coll = c->coll;
    out->mem = mem;
    out->nodes.lo = out->nodes.hi = nodes;
    out->ppn.lo = out->ppn.hi = ppn;
    out->bytes.lo = r->lo;
    out->bytes.hi = r->hi;
    out->alg = c->alg;
    out->chunk = c->chunk;
    out->fanout = c->fanout;
    out->across = c->across;
    out->proto = c->proto;
    out->src = FR_SRC_FILE;
}

const char *tc_fmt_bytes(char *buf, size_t len, uint64_t b)
{
    if (b >= 1024 * 1024 && b % (1024 * 1024) == 0) snprintf(buf, len, "%lluM", (unsigned long long)(b >> 20));
    else if (b >= 1024 && b % 1024 == 0) snprintf(buf, len, "%lluK", (unsigned long long)(b >> 10));
    else snprintf(buf, len, "%llu", (unsigned long long)b);
    return buf;
}

int tc_write_table(FILE *f, const fr_table_meta_t *meta, const tc_grid_t *g, const tc_policy_t *p,
                   uint64_t nodes, uint64_t ppn, unsigned mem)
{
    int nrules = 0;
    tc_range_t *r = calloc((size_t)g->nsizes + 1, sizeof *r);
    if (!r) return -1;
    if (meta) {  /* (NULL: more rules for a table already begun) */
        fr_table_meta_print(meta, f);
        fprintf(f, "# Rules measured by fastreduce-tune: each comment gives the winner's median time per call\n"
                   "# (slowest rank) at the first and last size measured in its range, and the runner-up there.\n");
        fprintf(f, "# %-10s %-6s %-6s %-6s %-12s %s\n", "collective", "memory", "nodes", "ppn", "bytes",
                "algorithm [key=value ...]");
    }
    for (int coll = 0; coll < FR_COLL_COUNT; coll++) {
        int n = tc_ranges(g, coll, p, r, g->nsizes);
        for (int i = 0; i < n; i++) {
            fr_rule_t rule;
            char line[512], b1[32], b2[32], note[256] = "";
            tc_range_rule(g, &r[i], nodes, ppn, mem, &rule);
            const tc_meas_t *a = tc_at(g, r[i].cand, r[i].s_first), *z = tc_at(g, r[i].cand, r[i].s_last);
            int ru = tc_fastest(g, coll, r[i].s_last, r[i].cand);   /* the runner-up */
            if (ru >= 0)
                snprintf(note, sizeof note, "; next %s %+.0f%%", g->cand[ru].label,
                         (tc_rel(g, ru, r[i].s_last) / tc_rel(g, r[i].cand, r[i].s_last) - 1) * 100);
            if (r[i].s_first == r[i].s_last)
                fprintf(f, "%s  # %s %.2f us%s\n", fr_rule_format(&rule, line, sizeof line),
                        tc_fmt_bytes(b1, sizeof b1, g->sizes[r[i].s_first]), a->med * 1e6, note);
            else
                fprintf(f, "%s  # %s %.2f us .. %s %.2f us%s\n", fr_rule_format(&rule, line, sizeof line),
                        tc_fmt_bytes(b1, sizeof b1, g->sizes[r[i].s_first]), a->med * 1e6,
                        tc_fmt_bytes(b2, sizeof b2, g->sizes[r[i].s_last]), z->med * 1e6, note);
            nrules++;
        }
    }
    free(r);
    return nrules;
}

const char *tc_state_name(int state)
{
    static const char *const names[TC_STATE_COUNT] = { "none", "ok", "failed", "declined", "pruned", "skipped" };
    return state >= 0 && state < TC_STATE_COUNT ? names[state] : "?";
}

double tc_busbw(int coll, uint64_t bytes, double sec, int ranks)
{
    if (sec <= 0) return 0;
    double algbw = (double)bytes / sec / 1e9;
    return coll == FR_COLL_ALLREDUCE && ranks > 1 ? algbw * 2.0 * (ranks - 1) / ranks : algbw;
}

void tc_write_csv(FILE *f, const tc_grid_t *g, const tc_policy_t *p, int ranks, int nodes, int ppn,
                  const char *mem)
{
    if (ftell(f) <= 0)  /* a second grid (the other memory type) goes on below the first's rows */
        fprintf(f, "collective,memory,ranks,nodes,ppn,algorithm,params,bytes,state,median_us,q1_us,q3_us,min_us,"
                   "max_us,reps,iters,busbw_gbs,chosen,probe_us,rel\n");
    for (int coll = 0; coll < FR_COLL_COUNT; coll++)
        for (int s = 0; s < g->nsizes; s++) {
            int w = tc_winner(g, coll, s, p);
            for (int c = 0; c < g->ncand; c++) {
                const tc_cand_t *k = &g->cand[c];
                const tc_meas_t *m = tc_at(g, c, s);
                if (k->coll != coll || m->state == TC_NONE) continue;
                const char *params = strchr(k->label, ' ');
                fprintf(f, "%s,%s,%d,%d,%d,%s,%s,%llu,%s,", fr_coll_name((fr_coll_t)coll), mem, ranks, nodes, ppn,
                        fr_algs[k->alg]->name, params ? params + 1 : "", (unsigned long long)g->sizes[s],
                        tc_state_name(m->state));
                if (m->state == TC_OK)
                    fprintf(f, "%.3f,%.3f,%.3f,%.3f,%.3f,%d,%d,%.3f,%d,", m->med * 1e6, m->q1 * 1e6, m->q3 * 1e6,
                            m->min * 1e6, m->max * 1e6, m->reps, m->iters,
                            tc_busbw(coll, g->sizes[s], m->med, ranks), c == w);
                else
                    fprintf(f, ",,,,,,,,0,");
                if (g->probe[s] > 0) fprintf(f, "%.3f", g->probe[s] * 1e6);
                if (m->state == TC_OK) fprintf(f, ",%.3f\n", tc_rel(g, c, s));
                else fputs(",\n", f);
            }
        }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile of sorted v[0..n) by linear interpolation. */
static double quantile(const double *v, int n, double q)
{
    double pos = q * (n - 1);
    int i = (int)floor(pos);
    if (i >= n - 1) return v[n - 1];
    return v[i] + (pos - i) * (v[i + 1] - v[i]);
}

void tc_stats(double *v, int n, tc_meas_t *m)
{
    if (n <= 0) {
        m->med = m->q1 = m->q3 = m->min = m->max = 0;
        return;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    m->min = v[0];
    m->max = v[n - 1];
    m->med = quantile(v, n, 0.5);
    m->q1 = quantile(v, n, 0.25);
    m->q3 = quantile(v, n, 0.75);
    m->reps = n;
}

/* See tune_choose.h. */
long tc_block_calls(uint64_t bytes)
{
    const double per_size = bytes < 64 * 1024 ? 1000 : bytes < (8u << 20) ? 100
                          : 100.0 * (double)(8u << 20) / (double)bytes;
    return (long)ceil(per_size / 31);
}

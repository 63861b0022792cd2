/* The autotuner's outputs: the table and CSV (-o, --csv) with the table's
 * header (meta_of), and --check, which re-measures a table's choices. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <mpi.h>
#include <ucp/api/ucp.h>
#include "config.h"
#ifdef FR_HAVE_NCCL
#include <nccl.h>
#endif
#include "tuner.h"

/* The table's header: the job, the libraries, the date, what was measured
 * and the command line that tuned it. */
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
             "page-aligned %s; median of %d repetitions of the slowest rank's time per call",
             T->ng == 2 ? "host and cuda" : T->gmem[0] == FR_MEM_CUDA ? "cuda" : "host",
             T->o.shared ? "host buffers of fr_mem_alloc (shared: zero-copy where an algorithm has it)" : "buffers",
             T->o.reps);
    size_t o = (size_t)snprintf(m->command, sizeof m->command, "mpirun -np %d", c->size);
    for (int i = 0; i < argc && o < sizeof m->command; i++) {
        const char *a = argv[i];
        if (i == 0 && strrchr(a, '/')) a = strrchr(a, '/') + 1;
        int quote = strpbrk(a, " \t'\"#;") != NULL || !*a;
        o += (size_t)snprintf(m->command + o, sizeof m->command - o, quote ? " '%s'" : " %s", a);
    }
    if (o >= sizeof m->command) m->command[sizeof m->command - 1] = '\0';
}

/* Rank 0 writes the table @p out (with @p meta as its header) and the CSV
 * @p csv of every grid measured, each when not NULL. Returns 1 on a
 * failure (said on stderr), else 0. */
int tn_write_outputs(tuner_t *T, const fr_table_meta_t *meta, const char *out, const char *csv)
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
        tn_steadiness(T, f, "# ");
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

/* The candidate that is the table's choice for (coll, size), added if the
 * table names parameters no candidate has; -1 when none can be added. */
static int choice(tuner_t *T, fr_table_t *tab, int coll, uint64_t bytes, int *rule)
{
    fr_call_t call = tn_call_of(T, coll, bytes);
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
    tn_add_cand(&T->g, T->F.nnodes, coll, alg, call.chunk, call.fanout, call.across, call.proto);
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

/* Every rank reads the --check table (as every rank would after the
 * broadcast), the default rules after its own; rank 0 says what it
 * checks. Returns 1 (the table freed) when some rank could not read it,
 * which the lowest such rank says why (another rank may read a file of
 * that name in another folder). */
static int read_table(tuner_t *T, fr_table_t *tab)
{
    fr_table_meta_t meta;
    int nbad = 0, size;
    fr_status_t st = fr_table_read_file(tab, &meta, T->o.check, NULL, NULL, &nbad);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int failed = st == FR_SUCCESS ? size : T->rank, first;
    MPI_Allreduce(&failed, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first < size) {
        if (T->rank == first)
            fprintf(stderr, PROG ": --check %s: rank %d: %s\n", T->o.check, first, fr_last_error());
        fr_table_free(tab);
        return 1;
    }
    int nfile = tab->n;
    fr_table_parse(tab, fr_default_table, "default", FR_SRC_DEFAULT, NULL, NULL, NULL);
    if (T->rank == 0) {
        char why[512];
        int unknown;
        printf(PROG ": checking %s (%d rules%s)\n", T->o.check, nfile,
               nbad ? ", some malformed: see the warnings" : "");
        if (fr_table_meta_compare(&meta, T->F.fingerprint, T->F.nnodes, T->F.ppn, why, sizeof why,
                                  &unknown))
            printf(PROG ": warning: the table does not match this job: %s\n", why);
    }
    return 0;
}

/* The sizes --check measures: every coarse size, and both ends of each
 * range of the table inside [min, max] (sample[s] set). */
static void pick_sample(const tuner_t *T, const fr_table_t *tab, int *sample)
{
    const tc_grid_t *g = &T->g;
    for (int s = 0; s < g->nsizes; s++) sample[s] = tn_coarse(g, s);
    for (int i = 0; i < tab->n; i++) {
        const fr_rule_t *r = &tab->rules[i];
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
}

/* After the sweep of the sample, the table's choices chosen[coll][s]
 * measured again beside their contenders. */
static void remeasure(tuner_t *T, const int *sample, int chosen[][MAX_SIZES])
{
    tc_grid_t *g = &T->g;
    /* a choice that was pruned or never measured at a sampled size is measured now, beside its contenders */
    for (int coll = 0; coll < FR_COLL_COUNT; coll++)
        for (int s = 0; s < g->nsizes; s++) {
            int c = chosen[coll][s];
            if (!sample[s] || c < 0 || tc_at(g, c, s)->state == TC_OK || tc_at(g, c, s)->state == TC_FAILED ||
                tc_at(g, c, s)->state == TC_DECLINED)
                continue;
            int list[MAX_CANDS], n = tn_contenders_and(T, coll, s, c, list);
            tn_measure_size(T, s, list, n, 1, 0);
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
                int list[MAX_CANDS], n = tn_contenders_and(T, coll, s, c, list);
                if (n < 2) continue;
                tn_measure_size(T, s, list, n, 1, 0);
            }
}

/* Rank 0's line on the table's choice @p c for (coll, size s), the table's
 * rule @p rule (-1: none); counts it into @p ranges. */
static void report_point(const tuner_t *T, const fr_table_t *tab, int coll, int s, int c, int rule,
                         tc_stale_t *ranges)
{
    const tc_grid_t *g = &T->g;
    const char *mem = T->mem == FR_MEM_CUDA ? " cuda" : "";
    const tc_meas_t *mc = tc_at(g, c, s);
    char sz[32], where[128];
    tc_fmt_bytes(sz, sizeof sz, g->sizes[s]);
    if (rule >= 0)
        snprintf(where, sizeof where, "%s:%d", tab->rules[rule].src == FR_SRC_FILE ? T->o.check :
                 "default", tab->rules[rule].line);
    else
        snprintf(where, sizeof where, "no rule (the MPI library's own)");
    int best = tc_fastest(g, coll, s, -1);
    if (mc->state == TC_FAILED) {
        printf("STALE %-9s %6s%s: the table's %s (%s) fails its check\n", fr_coll_name(coll), sz, mem,
               g->cand[c].label, where);
        tc_stale_add(ranges, rule, 1);
        return;
    }
    if (mc->state != TC_OK || best < 0) {
        printf("      %-9s %6s%s: %s (%s) not measured (%s)\n", fr_coll_name(coll), sz, mem,
               g->cand[c].label, where, tc_state_name(mc->state));
        tc_stale_add(ranges, rule, 0);
        return;
    }
    const tc_meas_t *mb = tc_at(g, best, s);
    double thr, slower = tc_rel(g, c, s) - 1;
    char cmp[48] = "";
    if (mc->nrel > 1) snprintf(cmp, sizeof cmp, ", median of %d comparisons", mc->nrel);
    int is_stale = stale_by(T, coll, s, c, &thr);
    tc_stale_add(ranges, rule, is_stale);
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

/* Rank 0's report: a line per sampled size and collective, then the
 * summary. Returns the number of stale ranges. */
static int report(const tuner_t *T, const fr_table_t *tab, const int *sample, int chosen[][MAX_SIZES],
                  int rule[][MAX_SIZES])
{
    int stale = 0;
    for (int coll = 0; coll < FR_COLL_COUNT; coll++) {
        if (!(T->o.colls & (1 << coll))) continue;
        tc_stale_t ranges = {0};
        for (int s = 0; s < T->g.nsizes; s++)
            if (sample[s] && chosen[coll][s] >= 0)
                report_point(T, tab, coll, s, chosen[coll][s], rule[coll][s], &ranges);
        stale += ranges.ranges;
    }
    tn_steadiness(T, stdout, PROG ": ");
    printf(PROG ": %d stale range%s in %s%s (%ld points measured in %.0f s%s)\n", stale, stale == 1 ? "" : "s",
           T->o.check, T->mem == FR_MEM_CUDA ? ", cuda rules" : "", T->done, now() - T->t0,
           T->skipped ? "; the budget cut some" : "");
    return stale;
}

/* --check of the memory type T->mem within @p share seconds: the sample
 * swept, the table's choices measured beside their contenders, and rank
 * 0's report. Returns 3 when a range is stale, 1 on an unreadable table. */
int tn_check_table(tuner_t *T, double share)
{
    fr_table_t tab = {0};
    int stale = 0;
    tc_grid_t *g = &T->g;
    if (read_table(T, &tab)) return 1;
    int sample[MAX_SIZES] = {0};
    pick_sample(T, &tab, sample);
    /* the table's choices; choice() may add candidates, so look them all up before measuring */
    int chosen[FR_COLL_COUNT][MAX_SIZES], rule[FR_COLL_COUNT][MAX_SIZES];
    for (int coll = 0; coll < FR_COLL_COUNT; coll++)
        for (int s = 0; s < g->nsizes; s++)
            chosen[coll][s] = (T->o.colls & (1 << coll)) ? choice(T, &tab, coll, g->sizes[s], &rule[coll][s]) : -1;
    double start = now();
    T->deadline = start + 0.75 * share;
    tn_sweep(T, sample);
    T->deadline = start + 0.98 * share;
    remeasure(T, sample, chosen);
    if (T->rank == 0) stale = report(T, &tab, sample, chosen, rule);
    fr_select_use(T->comm, (fr_table_t){0});
    fr_table_free(&tab);
    MPI_Bcast(&stale, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return stale ? 3 : 0;
}

/* Rank 0, after tuning: the run's summary lines, then the table (-o, or
 * fastreduce-<fingerprint>-<nodes>x<ppn>.tune) and the CSV (--csv, or the
 * table's name ending in .csv). Returns the exit status. */
int tn_write_results(tuner_t *T, int argc, char **argv)
{
    char out[512], csv[512];
    if (T->o.out) snprintf(out, sizeof out, "%s", T->o.out);
    else snprintf(out, sizeof out, "fastreduce-%s-%dx%d.tune",
                  T->F.fingerprint, T->F.nnodes, T->F.ppn);
    if (T->o.csv) snprintf(csv, sizeof csv, "%s", T->o.csv);
    else {
        size_t l = strlen(out);
        snprintf(csv, sizeof csv, "%.*s.csv", (int)(l > 5 && !strcmp(out + l - 5, ".tune") ? l - 5 : l), out);
    }
    fr_table_meta_t meta;
    meta_of(T, argc, argv, &meta);
    printf(PROG ": %ld points measured in %.1f s (budget %.0f s)\n", T->done, now() - T->t0, T->o.budget);
    if (T->skipped)
        printf(PROG ": warning: the budget ran out before %ld points; their sizes take the choice of the "
               "nearest measured size (give a larger --budget or a smaller --max)\n", T->skipped);
    tn_steadiness(T, stdout, PROG ": ");
    return tn_write_outputs(T, &meta, out, csv);
}

/* The autotuner's decisions, free of MPI and of timing so that they can be
 * tested on synthetic measurements (tests/unit/test_tune_choose.c):
 * which candidates are still worth measuring at a size (the budget's
 * pruning), which candidate wins a size (a tie within noise goes to the
 * simpler one), the ranges of sizes with one winner, and the table and
 * CSV files written from them. The other parts of fastreduce-tune
 * (tuner.h) do the measuring. */
#ifndef FR_TUNE_CHOOSE_H
#define FR_TUNE_CHOOSE_H

#include <stdint.h>
#include <stdio.h>
#include "internal.h"

/* One thing to measure: an algorithm with its parameters, for one collective. */
typedef struct tc_cand {
    int      coll;        /* fr_coll_t */
    int      alg;         /* index into fr_algs[] */
    uint64_t chunk;       /* rule parameters, 0 for the algorithm's default */
    int      fanout, across, proto;
    int      simplicity;  /* lower is simpler: noise ties go to the lowest */
    char     label[64];   /* "ring", "ring chunk=64K", "nccl_tree proto=ll" */
} tc_cand_t;

/* How simple algorithm @p name of collective @p coll is, for a job of
 * @p nodes nodes (lower is simpler; a candidate adds one per parameter it
 * sets): the registry's tie_rank (fr_alg_t), and on one node an algorithm
 * made for one node first of all. */
int tc_simplicity(int coll, const char *name, int nodes);

/* What happened at one (candidate, size). */
typedef enum {
    TC_NONE = 0,   /* not measured (yet) */
    TC_OK,         /* measured, result correct */
    TC_FAILED,     /* the first call gave a wrong result or an error: never chosen */
    TC_DECLINED,   /* the algorithm cannot serve this call on this job */
    TC_PRUNED,     /* slower than prune x the best at both neighbouring sizes */
    TC_SKIPPED,    /* the budget ran out */
    TC_STATE_COUNT
} tc_state_t;

/* How many side-by-side comparisons a measurement remembers. */
#define TC_HIST 8

typedef struct tc_meas {
    int    state;                   /* tc_state_t */
    double med, q1, q3, min, max;   /* seconds per call (slowest rank), over the repetitions; the latest */
    int    reps, iters;             /* repetitions, calls per repetition */
    /* Each time this candidate was measured side by side with others of its
     * collective at this size (tc_compared): its median over the fastest
     * one's there, the latest TC_HIST of them. Measurements made at
     * different times are compared only through these ratios, never by
     * their medians, since the machine may have changed speed between.
     * relid[i] names the comparison rel[i] came from (tc_grid_t.ncomp at
     * the time; 0: none), so two candidates' ratios from the same one can
     * be set against each other. */
    double rel[TC_HIST];
    int    relid[TC_HIST];
    int    nrel;
} tc_meas_t;

/* Every candidate at every size. */
typedef struct tc_grid {
    int        ncand, nsizes;
    tc_cand_t *cand;
    uint64_t  *sizes;    /* bytes, ascending */
    double    *probe;    /* [s]: the steadiness probe (seconds) just before size s was measured, 0 if none */
    tc_meas_t *m;        /* [c * nsizes + s] */
    int        ncomp;    /* side-by-side comparisons recorded so far (tc_compared) */
} tc_grid_t;

typedef struct tc_policy {
    double tie;      /* within this fraction of the best is always a tie (noise floor) */
    double tie_max;  /* the spreads may widen a tie up to this fraction, no further */
    double prune;    /* drop a candidate slower than prune x the best at both neighbours */
} tc_policy_t;

#define TC_POLICY_DEFAULT { 0.03, 0.05, 2.0 }

static inline tc_meas_t *tc_at(const tc_grid_t *g, int c, int s) { return &g->m[(size_t)c * (size_t)g->nsizes + (size_t)s]; }

/* Allocate a grid (measurements zeroed); 0 on success. */
int  tc_grid_init(tc_grid_t *g, int ncand, int nsizes);
void tc_grid_free(tc_grid_t *g);

/* The sizes swept: powers of two from @p min to @p max and the points half
 * way between (1.5 x a power of two), each a multiple of @p unit (the element
 * size), ascending and without repeats. Returns how many were written
 * (at most @p cap). */
int tc_sizes(uint64_t min, uint64_t max, uint64_t unit, uint64_t *out, int cap);

/* How much slower than @p best another measurement may be and still tie:
 * the larger of tie x best and the spreads (q3 - q1) of the two, capped at
 * tie_max x best. */
double tc_noise(const tc_meas_t *best, const tc_meas_t *other, const tc_policy_t *p);

/* Record one side-by-side measurement at size @p s of candidates
 * list[0..n) (medians just set): for each collective with at least two of
 * them TC_OK, each one's standing is appended to its rel[]. With @p v
 * (v[i * reps + r]: candidate list[i]'s time in round r, the rounds going
 * over the candidates in turn) the standing is the median over the rounds
 * of its time over the round's fastest: a round's figures are taken within
 * moments of each other, so a change of the machine's speed between rounds
 * does not count against the candidate whose median fell in a slow spell.
 * Without (NULL), its median over the fastest median. A candidate measured
 * alone gains nothing to compare by. At most TC_MAX_CANDS candidates and
 * TC_MAX_REPS rounds. */
#define TC_MAX_CANDS 96
#define TC_MAX_REPS  101
void tc_compared(tc_grid_t *g, int s, const int *list, int n, const double *v, int reps);

/* How candidate @p c stands at size @p s, as a multiple of the fastest
 * TC_OK candidate of its collective there (1: it is the fastest; 0: not
 * TC_OK). When some candidate of the collective has been compared side by
 * side at s (rel[]), a compared one's standing is the median of its
 * ratios, taken relative to the lowest such median, and one never compared
 * stands by its latest median against the fastest compared one's; when
 * none has, by medians alone. */
double tc_rel(const tc_grid_t *g, int c, int s);

/* The fastest TC_OK candidate of collective @p coll at size @p s other
 * than @p except (-1: none excepted), by tc_rel() (then by median), or -1. */
int tc_fastest(const tc_grid_t *g, int coll, int s, int except);

/* The winner at size @p s among the candidates of collective @p coll: the
 * fastest TC_OK one, or among those within tc_noise() of it (as a fraction
 * of its median, against tc_rel() - 1) the simplest (then the fastest).
 * A tie is a tie only where it held each time: a tied candidate that some
 * comparison put more than 2 x tie_max behind another tied one, while no
 * comparison put it that far ahead of that one, does not take the size
 * (unless every tied candidate is so behind another). On a machine whose
 * speed comes in spells, two candidates level in one spell may be far
 * apart in another; the one that was ahead there is never worse.
 * And where the nearest sizes with a winner on both sides have the same
 * one (each by the rules above), a tie that candidate may take is its:
 * one rule over the three sizes, not a lone range of the simpler one.
 * -1 when none was measured correct. */
int tc_winner(const tc_grid_t *g, int coll, int s, const tc_policy_t *p);

/* Is candidate @p c worth measuring at size @p s? Looks at the nearest
 * sizes below and above s where it was measured: no if it failed its check
 * anywhere, or if its tc_rel() was above prune at both of them (at one of
 * them when only one exists). Yes when there is nothing to judge by. */
int tc_keep(const tc_grid_t *g, int c, int s, const tc_policy_t *p);

/* The candidates of collective @p coll that tc_keep() pruned at size @p s
 * and are to be measured there after all: where none of the collective is
 * TC_OK at s, those TC_PRUNED there that never failed their check (one
 * that failed anywhere stays out, as tc_keep() says). A candidate far
 * faster than the others at the sizes around s has them pruned at s; if it
 * then fails its check at s, or was left out there for failing elsewhere,
 * s has no correct candidate unless the pruned ones are measured. Returns
 * how many were written to @p out (at most @p cap). */
int tc_unprune(const tc_grid_t *g, int coll, int s, int *out, int cap);

/* Sizes of collective @p coll whose winner differs from the winners of the
 * nearest sizes with a winner on both sides (which may differ from each
 * other): a win no neighbour shares rests on one size's measurements, and
 * one slow spell there can make it, so the tuner measures these again
 * (docs/performance.md, "Design decisions"). A run of two sizes with one
 * winner is not disputed. Returns how many were written to @p out. */
int tc_disputed(const tc_grid_t *g, int coll, const tc_policy_t *p, int *out, int cap);

/* A run of sizes with one winner. */
typedef struct tc_range {
    int      cand;            /* the winner */
    uint64_t lo, hi;          /* bytes the rule covers (inclusive) */
    int      s_first, s_last; /* the sizes measured inside */
} tc_range_t;

/* The ranges of collective @p coll: neighbouring sizes with the same winner
 * merged; the first starts at 0 and the last ends at FR_INF; a boundary
 * lies at the last size of the earlier winner. Sizes without a winner join
 * the range before them (the first ones: the range after). But a range
 * never takes a size where its candidate is TC_FAILED: it ends before that
 * size (the first one starts after it), and the sizes from there up to the
 * next winner's first, or all above after the last range, are in no range
 * (a table of these ranges leaves their bytes to the built-in table that
 * follows it). Returns the number of ranges written (at most @p cap; 0 when
 * no size has a winner). */
int tc_ranges(const tc_grid_t *g, int coll, const tc_policy_t *p, tc_range_t *out, int cap);

/* --check's count of stale ranges, fed its sampled sizes of one collective
 * in ascending order: the neighbouring sizes that one rule of the table
 * serves make one range, which counts once however many of its sizes are
 * stale. Zeroed to start. */
typedef struct tc_stale {
    int started, rule;   /* the rule of the latest size (-1: none, the MPI library's own) */
    int reported;        /* a size of the current range was stale */
    int ranges;          /* stale ranges so far */
} tc_stale_t;

/* A sampled size served by rule @p rule: @p stale when the table's choice
 * there is slower than the fastest beyond the noise or fails its check. */
void tc_stale_add(tc_stale_t *t, int rule, int stale);

/* The rule of a range for a job of @p nodes nodes of up to @p ppn ranks
 * (the shape measured), memory @p mem (FR_MEM_*). */
void tc_range_rule(const tc_grid_t *g, const tc_range_t *r, uint64_t nodes, uint64_t ppn, unsigned mem,
                   fr_rule_t *out);

/* Write the table: the header of @p meta (none when NULL: the rules of a
 * second memory type below the first's), then for each collective its
 * ranges' rules, each with a comment of the winner's medians at the first
 * and last size and the runner-up. Returns the number of rules written. */
int tc_write_table(FILE *f, const fr_table_meta_t *meta, const tc_grid_t *g, const tc_policy_t *p,
                   uint64_t nodes, uint64_t ppn, unsigned mem);

/* The CSV of every (candidate, size) that was tried; see docs/tuning.md.
 * The header row is written only at the start of the file. */
void tc_write_csv(FILE *f, const tc_grid_t *g, const tc_policy_t *p, int ranks, int nodes, int ppn,
                  const char *mem);

/* @p b bytes as "4", "1536", "64K", "3M" (M or K when exact); returns buf. */
const char *tc_fmt_bytes(char *buf, size_t len, uint64_t b);
/* "ok", "failed", ... */
const char *tc_state_name(int state);
/* busbw of @p bytes in @p sec seconds on @p ranks ranks, GB/s. */
double tc_busbw(int coll, uint64_t bytes, double sec, int ranks);
/* Median, quartiles, min and max of @p n values (sorted in place). */
void tc_stats(double *v, int n, tc_meas_t *m);
/* How many calls a timed block of a repetition of @p bytes holds: as many as a block
 * of the speed check's benchmarks (fr_osu_allreduce / fr_osu_bcast
 * --blocks 31 with their default calls per size: 1000 below 64 KiB, 100 to
 * 8 MiB, fewer above), so that the tuner measures what they measure: short
 * runs of calls, as a trainer makes between its computations. One long run
 * reaches a steady state such runs never do, and can rank the candidates
 * otherwise (docs/performance.md, "Design decisions"). */
long tc_block_calls(uint64_t bytes);

#endif

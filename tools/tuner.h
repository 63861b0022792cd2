/* The autotuner's private header: its options, the state its parts share
 * (tuner_t) and what each part of fastreduce-tune calls of the others. */
#ifndef FR_TUNER_H
#define FR_TUNER_H

#include <stdint.h>
#include <stdio.h>
#include <mpi.h>
#include "fastreduce.h"
#include "internal.h"
#include "tune_choose.h"

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
    int         shared;     /* --buffers shared: host buffers of fr_mem_alloc (zero-copy where it applies) */
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

/* The clock of every timing and deadline (agreed across ranks from t0). */
static inline double now(void) { return MPI_Wtime(); }

/* tune_opts.c: the command line. 0: run; 1: --help was printed (exit 0);
 * 2: a bad option (rank 0 said which). */
int tn_parse_opts(int argc, char **argv, opts_t *o, int rank);

/* tune_cands.c: the candidates of the memory type T->mem, and forcing one. */
void tn_add_cand(tc_grid_t *g, int nodes, int coll, int alg, uint64_t chunk, int fanout, int across, int proto);
void tn_make_cands(tuner_t *T);
void tn_print_cands(tuner_t *T);
void tn_force(tuner_t *T, const tc_cand_t *k);
fr_call_t tn_call_of(const tuner_t *T, int coll, uint64_t bytes);
int tn_same_as_default(const tuner_t *T, const tc_cand_t *k, uint64_t bytes);
int tn_usable(tuner_t *T, int c, int s);

/* tune_measure.c: the buffers, timing points, and the steadiness probe. */
int tn_alloc_buffers(tuner_t *T, size_t bytes, unsigned mems);
void tn_free_buffers(tuner_t *T);
double tn_min_cost(const tuner_t *T, int c, int s);
void tn_measure_size(tuner_t *T, int s, const int *list, int n, double left_points, double reserve);
double tn_probe(tuner_t *T);
void tn_steadiness(const tuner_t *T, FILE *f, const char *prefix);

/* tune_passes.c: which points are measured, in what order, within the budget. */
int tn_coarse(const tc_grid_t *g, int s);
void tn_sweep(tuner_t *T, const int *sample);
void tn_second_look(tuner_t *T);
void tn_confirm(tuner_t *T);
int tn_contenders_and(const tuner_t *T, int coll, int s, int also, int *list);

/* tune_table.c: the outputs, and --check. */
int tn_write_outputs(tuner_t *T, const fr_table_meta_t *meta, const char *out, const char *csv);
int tn_write_results(tuner_t *T, int argc, char **argv);
int tn_check_table(tuner_t *T, double share);

#endif

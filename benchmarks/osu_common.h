/* Shared driver of the osu-style benchmarks (fr_osu_allreduce, fr_osu_bcast):
 * option parsing, the block-timed loop, the MPI comparison, memcpy bandwidth,
 * OSU-style output and the element helpers used by validation. A benchmark
 * main file only supplies the collective-specific parts in an osu_coll_t.
 * See docs/benchmarks.md. */
#ifndef FR_OSU_COMMON_H
#define FR_OSU_COMMON_H

#include <stddef.h>
#include <mpi.h>
#include "fastreduce.h"

typedef enum { OSU_ALLREDUCE, OSU_BCAST } osu_kind_t;

/* What the command line asked for (identical on every rank). */
typedef struct osu_opts {
    size_t       min_size, max_size;  /* bytes */
    int          iters, warmup;       /* -1: size-dependent default */
    int          blocks;              /* timing blocks per size (median reported) */
    int          full, validate, vs_mpi;
    fr_dtype_t   dtype;
    MPI_Datatype mpi_dtype;           /* MPI_DATATYPE_NULL: MPI cannot serve this type */
    const char  *type_label;          /* "MPI_FLOAT", "float16", ... */
    fr_op_t      op;
    MPI_Op       mpi_op;              /* MPI_SUM for --op avg */
    int          root;
    const char  *algo;                /* --algo, or NULL */
    const char  *compare;             /* --compare LIST, or NULL */
    int          device;              /* -d cuda: the buffers are CUDA device memory */
} osu_opts_t;

/* The state a benchmark's callbacks work on, for one message size. */
typedef struct osu_ctx {
    const osu_opts_t *o;
    fr_comm_t comm;
    MPI_Comm  mpi_comm;   /* MPI_COMM_WORLD */
    int       rank, nranks;
    void     *sbuf, *rbuf; /* each holds at least max_size bytes; bcast uses sbuf only */
    void     *hs, *hr;     /* their host copies for validation (sbuf, rbuf themselves with host buffers) */
    size_t    count;       /* elements of the current size */
    size_t    esize;       /* bytes per element */
} osu_ctx_t;

/* The collective-specific part of a benchmark. */
typedef struct osu_coll {
    osu_kind_t  kind;
    const char *title;                                 /* "Allreduce", "Bcast" */
    fr_status_t (*run_fr)(osu_ctx_t *c);               /* one fastreduce call */
    int         (*run_mpi)(osu_ctx_t *c);              /* the same call through MPI */
    /* what fastreduce picks for c->count: its name, or with @p label its name and the
     * rule's parameters written there (fr_allreduce_choice: "shm chunk=1M") */
    const char *(*algorithm)(osu_ctx_t *c, char *label, size_t len);
    double      (*busbw_factor)(int nranks);           /* busbw = algbw * factor */
    /* Fill inputs for round @p seed, run run_fr once, check the result;
     * returns the number of wrong elements on this rank, or (size_t)-1 when
     * the call itself failed. */
    size_t      (*validate)(osu_ctx_t *c, int seed);
} osu_coll_t;

/* The whole program: MPI_Init, options, fr_comm_create, the size loop,
 * output, cleanup, MPI_Finalize. Returns the process exit status. */
int osu_main(int argc, char **argv, const osu_coll_t *coll);

/* Element helpers for validation. Values are small integers, exact in every type. */
void   osu_set(void *buf, size_t i, fr_dtype_t t, double v);
double osu_get(const void *buf, size_t i, fr_dtype_t t);
/* Largest L such that every integer in [0, L] is exact in the type. */
double osu_exact_limit(fr_dtype_t t);
/* Fill @p bytes of @p buf with a byte pattern no validation value equals. */
void   osu_poison(void *buf, size_t bytes);
/* -d cuda: copy the count elements of hs, hr to sbuf, rbuf (upload) or
 * back (download); nothing with host buffers. */
void   osu_upload(osu_ctx_t *c);
void   osu_download(osu_ctx_t *c);

#endif

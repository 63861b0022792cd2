/* Shared driver of the osu-style benchmarks: the blocking ones
 * (fr_osu_allreduce, fr_osu_bcast: osu_common.c) and the non-blocking ones
 * (fr_osu_iallreduce, fr_osu_ibcast: osu_nb.c). They share the options
 * (osu_options.c), the buffers, the element helpers (osu_elem.c),
 * validation and the output conventions; a collective's own part (its
 * calls, its validation) is an osu_coll_t (osu_allreduce.c, osu_bcast.c),
 * and a program's main file only hands one to osu_main or osu_nb_main.
 * See docs/benchmarks.md. */
#ifndef FR_OSU_COMMON_H
#define FR_OSU_COMMON_H

#include <stddef.h>
#include <stdio.h>
#include <mpi.h>
#include "fastreduce.h"

/* OSU's output: "%-10d" for the size column, FIELD_WIDTH and FLOAT_PRECISION for the others. */
#define OSU_SIZE_W  10
#define OSU_FIELD_W 18
#define OSU_PREC     2
/* The most timing blocks per size (--blocks). */
#define OSU_MAX_BLOCKS 1000

typedef enum { OSU_ALLREDUCE, OSU_BCAST } osu_kind_t;

/* What the non-blocking programs do between the start and the wait. */
typedef enum {
    OSU_COMPUTE_IDLE = 0,   /* the rank sleeps: its CPU is free, as while it waits for a GPU kernel */
    OSU_COMPUTE_BUSY        /* OSU's dummy_compute: the rank spins its CPU */
} osu_compute_t;

/* Where the host buffers come from (--mem). */
typedef enum {
    OSU_MEM_MALLOC = 0,     /* posix_memalign: private memory, the copy path */
    OSU_MEM_FR,             /* fr_mem_alloc: memory the node's ranks share (zero-copy); MPI gets MPI_Alloc_mem */
    OSU_MEM_MPI             /* MPI_Alloc_mem for both (fr_mem_alloc's under libfastreduce-mpi.so) */
} osu_mem_t;

/* What the command line asked for (identical on every rank). */
typedef struct osu_opts {
    size_t       min_size, max_size;  /* bytes */
    int          iters, warmup;       /* -1: size-dependent default */
    int          blocks;              /* timing blocks per size (median reported) */
    int          full, validate, vs_mpi;
    int          barrier;             /* --barrier: each call timed alone, an MPI_Barrier after it (OSU's way) */
    int          rewrite;             /* --rewrite: with barrier, the call's input written anew before each call */
    fr_dtype_t   dtype;
    MPI_Datatype mpi_dtype;           /* MPI_DATATYPE_NULL: MPI cannot serve this type */
    const char  *type_label;          /* "MPI_FLOAT", "float16", ... */
    fr_op_t      op;
    MPI_Op       mpi_op;              /* MPI_SUM for --op avg */
    int          root;
    const char  *algo;                /* --algo, or NULL */
    const char  *compare;             /* --compare LIST, or NULL */
    int          device;              /* -d cuda: the buffers are CUDA device memory */
    osu_mem_t    mem;                 /* --mem: where host buffers come from */
    /* the non-blocking programs only */
    int           nonblocking;        /* set by osu_nb_main: the options below apply */
    osu_compute_t compute;            /* --compute */
    double        test_every_us;      /* --test-every: 0 for no test calls during the compute */
    int           thread_level;       /* --thread-level: what MPI_Init_thread asked for */
    int           thread_provided;    /* what MPI gave */
} osu_opts_t;

/* The state a benchmark's callbacks work on, for one message size. */
typedef struct osu_ctx {
    const osu_opts_t *o;
    fr_comm_t comm;
    MPI_Comm  mpi_comm;   /* MPI_COMM_WORLD */
    int       rank, nranks;
    void     *sbuf, *rbuf; /* each holds at least max_size bytes; bcast uses sbuf only */
    void     *hs, *hr;     /* their host copies for validation (sbuf, rbuf themselves with host buffers) */
    void     *ms, *mr;     /* the buffers --vs-mpi gives MPI: sbuf, rbuf, or MPI_Alloc_mem's with --mem fr */
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
    /* the same calls, non-blocking: fr_iallreduce / MPI_Iallreduce and the like */
    fr_status_t (*start_fr)(osu_ctx_t *c, fr_request_t *req);
    int         (*start_mpi)(osu_ctx_t *c, MPI_Request *req);
    /* Validation, in two halves around one call of the collective: fill
     * the host buffers (c->hs, c->hr) for round @p seed, inputs and
     * poisoned outputs; then count the wrong elements of the result in the
     * host buffers on this rank. */
    void        (*fill)(osu_ctx_t *c, int seed);
    size_t      (*check)(osu_ctx_t *c, int seed);
} osu_coll_t;

extern const osu_coll_t osu_allreduce;   /* osu_allreduce.c */
extern const osu_coll_t osu_bcast;       /* osu_bcast.c */

/* The whole program: MPI_Init, options, fr_comm_create, the size loop,
 * output, cleanup, MPI_Finalize. Returns the process exit status.
 * osu_main times the blocking calls, osu_nb_main (osu_nb.c) the
 * non-blocking ones. */
int osu_main(int argc, char **argv, const osu_coll_t *coll);
int osu_nb_main(int argc, char **argv, const osu_coll_t *coll);

/* Element helpers for validation. Values are small integers, exact in every type. */
void   osu_set(void *buf, size_t i, fr_dtype_t t, double v);
double osu_get(const void *buf, size_t i, fr_dtype_t t);
/* Largest L such that every integer in [0, L] is exact in the type. */
double osu_exact_limit(fr_dtype_t t);
/* Fill @p bytes of @p buf with a byte pattern no validation value equals. */
void   osu_poison(void *buf, size_t bytes);
/* -d cuda: copy the count elements of hs, hr to sbuf, rbuf (upload) or
 * back (download); nothing with host buffers. osu_upload_bytes copies
 * @p bytes instead. */
void   osu_upload(osu_ctx_t *c);
void   osu_download(osu_ctx_t *c);
void   osu_upload_bytes(osu_ctx_t *c, size_t bytes);

/* ---- the driver's parts, for osu_common.c, osu_nb.c and the other programs */

/* The program's name (for messages) and this rank in MPI_COMM_WORLD. */
extern const char *osu_prog;
extern int osu_rank;

/* Parse @p argv into @p o (after MPI_Init: only rank 0 prints).
 * 0: run; 1: done, exit 0 (help, version); 2: bad options, exit 1. */
int    osu_parse_options(int argc, char **argv, const osu_coll_t *coll, int nonblocking, osu_opts_t *o);
/* A decimal number in [0, max]; a byte count with an optional K, M, G
 * (x1024) suffix; MIN:MAX of those (either side may be left out, keeping
 * what *min and *max hold). 0 when parsed, -1 when malformed. */
int    osu_parse_uint(const char *s, long max, long *out);
int    osu_parse_bytes(const char *s, size_t *out);
int    osu_parse_range(const char *s, size_t *min, size_t *max);
/* --thread-level WORD as an MPI_THREAD_* level; -1 for an unknown word. */
int    osu_thread_level(const char *word);
const char *osu_thread_level_name(int level);
/* Record the program's name, read --thread-level from @p argv (a bad or
 * missing value leaves @p def; the option parser reports it), and
 * initialise MPI with that level (MPI_Init when @p def is -1 and no option
 * asks for one). Sets osu_rank; returns the level MPI provided. */
int    osu_init_mpi(int *argc, char ***argv, int def, int *requested);
/* The MPI library's version, its first line, tabs as spaces. */
void   osu_mpi_version(char *buf, size_t len);
/* Print "what failed: detail" for this rank and MPI_Abort. */
void   osu_die(const char *what, const char *detail);
/* osu_die unless the call named @p what returned success: a fastreduce
 * status (its name and fr_last_error()) or an MPI error code (its string). */
void   osu_check_fr(fr_status_t st, const char *what);
void   osu_check_mpi(int rc, const char *what);
/* The median of @p v (sorted in place). */
double osu_median(double *v, int n);
/* Timed and untimed iterations for a size of @p bytes (-i, -x, or the defaults). */
int    osu_default_iters(const osu_opts_t *o, size_t bytes);
int    osu_default_warmup(const osu_opts_t *o, size_t bytes);
/* The timing blocks of a size of @p bytes: --blocks, or its timed
 * iterations where they are fewer (a block holds one call at least). */
int    osu_blocks(const osu_opts_t *o, size_t bytes);
/* The headers' count of blocks, the run's sizes (of elements of @p esize
 * bytes) together: "5 blocks", or "3 to 5 blocks, by size" where they differ,
 * so that the header states what each size's median was taken over. */
void   osu_blocks_text(const osu_opts_t *o, size_t esize, char *buf, size_t len);
/* Every size of the run: the first, and the next after @p size (0 past the last). */
size_t osu_first_size(const osu_opts_t *o);
size_t osu_next_size(const osu_opts_t *o, size_t size);
/* The blocking call, and the non-blocking one started and waited for
 * (osu_nb.c): the calls validation makes. */
fr_status_t osu_call_blocking(const osu_coll_t *coll, osu_ctx_t *c);
fr_status_t osu_call_nonblocking(const osu_coll_t *coll, osu_ctx_t *c);
/* Validate the current size (c->count) with two rounds of @p call; 1 when
 * every rank's result is right (collective over the ranks). */
int    osu_validate_size(const osu_coll_t *coll, osu_ctx_t *c, size_t size,
                         fr_status_t (*call)(const osu_coll_t *, osu_ctx_t *));
/* Whether the bytes this node's ranks will touch, @p each on every rank and
 * @p first more on rank 0, fit in the node's MemAvailable (/proc/meminfo).
 * Asked before the buffers are filled: under overcommit an allocation
 * larger than the memory succeeds, and the OOM killer ends the job while
 * it fills the pages. Collective over MPI_COMM_WORLD; 0 when some node's
 * would not fit (its first rank says so, naming @p what it counted), 1
 * where they fit or the file cannot say. */
int    osu_memory_fits(double each, double first, const char *what);
/* fr_comm_create(MPI_COMM_WORLD) on every rank, @p algo as fr_config_t's;
 * 0 when it failed on some rank (each such rank says why on stderr). */
int    osu_create_comm(fr_comm_t *out, const char *algo);
/* The set-up both drivers share: MPI, options, the communicator and the
 * buffers. -1: go on; else the exit status (MPI already finalised). */
int    osu_setup(int argc, char **argv, const osu_coll_t *coll, int nonblocking, osu_opts_t *o, osu_ctx_t *c);
void   osu_teardown(osu_ctx_t *c);
/* The first header lines both drivers print: the test's name ("Allreduce
 * Latency Test"), the type, the library, the ranks and the collective's
 * arguments. */
void   osu_print_intro(const osu_ctx_t *c, const osu_coll_t *coll, const char *name);
/* The header lines of the non-blocking calls' conditions: the MPI library
 * with the thread level asked and provided, and who runs the requests
 * (FASTREDUCE_PROGRESS as @p comm has it). */
void   osu_print_threads(fr_comm_t comm, int requested, int provided);

#endif

/* The communicator, the call descriptor and the algorithm interface. */
#ifndef FR_COMM_H
#define FR_COMM_H

#include <stdint.h>
#include <stddef.h>
#include <mpi.h>
#include "fastreduce.h"
#include "settings.h"
#include "tune.h"

typedef enum { FR_COLL_ALLREDUCE = 0, FR_COLL_BCAST, FR_COLL_COUNT } fr_coll_t;
typedef enum { FR_MEM_HOST = 1u, FR_MEM_CUDA = 2u } fr_mem_t;
#define FR_MEM_ALL ((unsigned)(FR_MEM_HOST | FR_MEM_CUDA))

/* One collective call, as the algorithms see it. */
typedef struct fr_call {
    fr_coll_t   coll;
    const void *sendbuf;   /* allreduce input; == recvbuf when in place */
    void       *recvbuf;   /* allreduce output; bcast buffer */
    size_t      count;
    size_t      bytes;     /* count * element size */
    fr_dtype_t  dtype;
    fr_op_t     op;        /* FR_AVG is reduced as a sum; the caller divides */
    int         root;      /* bcast only */
    fr_mem_t    mem;
    uint64_t    chunk;     /* the rule's chunk= parameter, 0 for the algorithm's default */
    int         fanout;    /* the rule's fanout= parameter, 0 for the default */
    int         across;    /* the rule's across= parameter (FR_ACROSS_*), 0 for the default */
    int         proto;     /* the rule's proto= parameter (FR_PROTO_*), 0 for NCCL's choice */
    void       *stream;    /* device buffers: the cudaStream_t (NULL: the legacy default stream) */
    int         async;     /* the *_stream call: return once enqueued where the algorithm can */
    int         agreed;    /* set by an algorithm failing on every rank alike before anything moved: the
                              communicator stays usable (any other failure breaks it) */
} fr_call_t;

struct fr_ucx;
struct fr_shm;

#define FR_COMM_MAGIC 0x46524331u  /* "FRC1" */

struct fr_comm {
    unsigned     magic;        /* FR_COMM_MAGIC while alive */
    MPI_Comm     mpi;          /* private duplicate of the user's communicator */
    int          rank, size;
    /* node shape (real or faked with FASTREDUCE_NODE_SIZE / FASTREDUCE_HOSTID) */
    int          node, nnodes; /* this rank's node index, number of nodes */
    int          local_rank, local_size;
    int          ppn;          /* largest number of ranks on one node */
    int         *rank_node;    /* [size]: node index of every rank */
    int         *rank_local;   /* [size]: local rank of every rank */
    MPI_Comm     node_comm;    /* the ranks of this node, ordered by rank */
    int          gpu;          /* CUDA index of this rank's GPU (topology/bind.c), -1 when none */
    char         nic[32];      /* the NIC chosen for this rank, "" when none */
    char         fingerprint[160]; /* this node's topology fingerprint (tuning tables record it), "" if unknown */
    size_t       llc_share;    /* the machine's last-level cache bytes over its ranks here, 0 if unknown */
    struct fr_ucx *ucx;        /* UCX worker and endpoints, NULL until the first call that needs them */
    int          ucx_state;    /* 0: not set up yet, 1: ready, -1: the set-up failed on every rank (ucx_why) */
    char         ucx_why[256];
    struct fr_shm *shm;        /* the node's shared-memory segment (NULL if none) */
    uint64_t     shm_size;     /* FASTREDUCE_SHM_SIZE as the communicator's rank 0 read it: the same on
                                  every rank (lib/shm.c, fr_shm_create) */
    fr_table_t   table;        /* the resolved selection table (same on every rank) */
    /* The settings as this rank read them at fr_comm_create (fr_config_t
     * applied), and FASTREDUCE_NCCL_TUNER from the NCCL set-up: a program
     * may change the environment between communicators. */
    fr_settings_t set;
    /* The rules of table that can match this communicator (its nodes and
     * ranks per node), in order: those of collective k and memory type m
     * (0 host, 1 device) are sel[sel_at[2k+m] .. sel_at[2k+m+1]); NULL:
     * none listed (lib/select.c, fr_select_use). */
    int         *sel;
    int          sel_at[2 * FR_COLL_COUNT + 1];
    uint64_t     seq;          /* number of collectives started on this communicator */
    void        *scratch;      /* grow-only scratch buffer for algorithms */
    size_t       scratch_size;
    uint64_t     spin;         /* polls before a waiting rank starts to yield */
    int          oversubscribed; /* this machine's ranks outnumber its cores (the same on all of them) */
    unsigned     warned;       /* bit per collective: the forced-fallback warning was given */
    /* reliability (lib/wait.c) */
    uint64_t     timeout_ns;   /* FASTREDUCE_TIMEOUT: a wait without progress this long fails; 0: none */
    int          check;        /* FASTREDUCE_CHECK: the ranks compare each call's arguments first */
    const fr_call_t *cur;      /* the collective running (for diagnostics), NULL between calls */
    const char  *cur_alg;      /* its algorithm */
    fr_status_t  broken;       /* not FR_SUCCESS: a collective failed part-way; only destroy works now */
    char         broken_why[512];
    int          mpi_left;     /* a timed-out MPI request is still pending on mpi: it is never freed */
    MPI_Request  bye;          /* fr_comm_destroy_many's barrier */
    /* a transfer in flight while shared-memory steps run (hier allreduce's
     * network stage of one chunk under the next chunk's shm steps): the shm
     * waits and long copies call bg(comm, bg_arg) to move it on; NULL: none */
    fr_status_t (*bg)(struct fr_comm *comm, void *arg);
    void        *bg_arg;
    /* device buffers (lib/device.c) */
    void        *nccl;         /* ncclComm_t, NULL until made */
    int          nccl_state;   /* 0 not tried yet, 1 ready, -1 not available (same on every rank) */
    int          nccl_tuned;   /* 1: fastreduce's tuner plugin steers it on every rank */
    void        *stage;        /* pinned host buffer of the staged path */
    size_t       stage_size;
};

/* Rule parameters: the key=value words after a rule's algorithm
 * (docs/tuning.md); FR_PARAM_NONE ends an algorithm's list. */
enum { FR_PARAM_NONE = 0, FR_PARAM_CHUNK, FR_PARAM_FANOUT, FR_PARAM_ACROSS, FR_PARAM_PROTO, FR_PARAM_COUNT };
/* A fanout the tuner tries: as many children as the job allows (at most 64), the flat tree. */
#define FR_FANOUT_FLAT UINT64_MAX
#define FR_SWEEP_MAX 3

/* A rule parameter an algorithm reads, and the values the autotuner
 * measures besides the algorithm's default (0 ends the list). */
typedef struct fr_alg_param {
    int         key;                        /* FR_PARAM_* */
    uint64_t    sweep[FR_SWEEP_MAX];
} fr_alg_param_t;

/* What an algorithm serves and how it works, as the tests and the tuner
 * need to know it without naming the algorithm (fr_alg_t.traits). */
enum {
    FR_ALG_ONE_NODE = 1u << 0,     /* serves the ranks of one node only (declines several nodes) */
    FR_ALG_NODES = 1u << 1,        /* serves several nodes only (declines one node) */
    FR_ALG_EQUAL_NODES = 1u << 2,  /* needs every node to hold as many ranks */
    FR_ALG_SHM = 1u << 3,          /* moves the data through the node's shared segment */
    FR_ALG_MPI = 1u << 4,          /* the MPI library's own collective */
    FR_ALG_LAST_RESORT = 1u << 5,  /* serves every call of its memory type: where selection ends */
    FR_ALG_VIA_HOST = 1u << 6,     /* runs a host algorithm on host copies of device buffers */
};

/* The algorithm interface: one file in algorithms/ defines one of these. */
typedef struct fr_alg {
    const char *name;                       /* used in tables, variables and logs */
    fr_coll_t   coll;
    unsigned    mem_types;                  /* FR_MEM_HOST | FR_MEM_CUDA */
    /* FR_SUCCESS if it can serve the call; FR_ERR_NOT_SUPPORTED to decline.
     * Must depend only on values that are the same on every rank. */
    fr_status_t (*check)(const fr_call_t *call, const struct fr_comm *comm);
    fr_status_t (*run)(fr_call_t *call, struct fr_comm *comm);
    const char *desc;                       /* one line, for fastreduce-info and the docs' tables */
    /* the rule parameters it reads, in FR_PARAM_* order, with the values the tuner sweeps */
    fr_alg_param_t params[FR_PARAM_COUNT - 1];
    uint64_t    chunk_def;                  /* its chunk size when the rule gives none (FR_PARAM_CHUNK) */
    /* where that depends on the call, the chunk size for @p call (NULL: chunk_def) */
    uint64_t    (*chunk_for)(const fr_call_t *call);
    unsigned    needs;                      /* FR_NEEDS_*: what fr_dispatch sets up before it runs */
    unsigned    traits;                     /* FR_ALG_* */
    /* The tuner's tie order among its collective and memory type: of two
     * candidates within the noise the lower rank wins (the one with fewer
     * moving parts; the MPI library's own last). */
    int         tie_rank;
} fr_alg_t;

/* Transports an algorithm uses that a communicator makes on first use. */
enum { FR_NEEDS_UCX = 1u };

/* The chunk size @p a takes for @p call when the rule gives none. */
static inline uint64_t fr_alg_chunk_default(const fr_alg_t *a, const fr_call_t *call)
{
    return a->chunk_for ? a->chunk_for(call) : a->chunk_def;
}

/* @p a's entry for rule parameter @p key, or NULL when it does not read it. */
static inline const fr_alg_param_t *fr_alg_param(const fr_alg_t *a, int key)
{
    for (int i = 0; i < FR_PARAM_COUNT - 1 && a->params[i].key; i++)
        if (a->params[i].key == key) return &a->params[i];
    return NULL;
}

/* algorithms/registry.c */
extern const fr_alg_t *const fr_algs[];
extern const int fr_nalgs;
/* Index of the algorithm named @p name for @p coll (coll < 0: any), or -1. */
int fr_alg_lookup(int coll, const char *name);
const char *fr_coll_name(fr_coll_t coll);

/* A scratch buffer of at least @p bytes owned by the communicator, or NULL
 * (with the error recorded) if it cannot be allocated. */
void *fr_comm_scratch(struct fr_comm *comm, size_t bytes);

/* FR_SUCCESS when MPI is initialized and not finalized. */
fr_status_t fr_mpi_ready(void);
/* Collective: every rank learns whether any rank's @p st failed. */
fr_status_t fr_agree(MPI_Comm comm, fr_status_t st, const char *what);
/* fr_agree's outcome once the worst status of all ranks, @p worst, is known. */
fr_status_t fr_agreed(fr_status_t st, int worst, const char *what);
/* lib/select.c: build the table on rank 0 from FASTREDUCE_ALGO, _TUNE,
 * _TUNE_FILE (comm->set, fr_config_t applied) and the default, and
 * broadcast it (collective). */
fr_status_t fr_select_load(struct fr_comm *comm);

/* lib/select.c: make @p table comm's selection table (its rules are not
 * copied) and list again the rules of it that can match comm (sel,
 * sel_at). Whoever changes comm->table after fr_comm_create (the tuner
 * does, to force each candidate) goes through here; when the list cannot
 * be allocated, calls scan the whole table. */
void fr_select_use(struct fr_comm *comm, fr_table_t table);

/* lib/select.c: the algorithm the table gives @p call (whose coll, mem,
 * count and bytes are set): the first matching rule whose algorithm
 * accepts it, else the MPI library's own. Sets the rule's parameters on
 * the call; *rule is the rule index or -1. */
const fr_alg_t *fr_select_choose(struct fr_comm *comm, fr_call_t *call, int *rule);

/* lib/select.c: choose @p call's algorithm and run it (the per-call log
 * line, the communicator's sequence number, avg's division of host
 * buffers; the NCCL set-up at the first device call). */
fr_status_t fr_dispatch(struct fr_comm *comm, fr_call_t *call);
/* What fr_allreduce_algorithm / fr_bcast_algorithm (in @p mem) answer, as
 * a label written into @p label: the name, the rule's chunk where it is
 * not the algorithm's default, and the other parameters the rule sets
 * ("shm chunk=1M"); NULL as they. */
const char *fr_allreduce_choice(fr_comm_t comm, size_t count, fr_dtype_t dtype, fr_op_t op, fr_mem_t mem,
                                char *label, size_t len);
const char *fr_bcast_choice(fr_comm_t comm, size_t count, fr_dtype_t dtype, int root, fr_mem_t mem, char *label,
                            size_t len);
/* The algorithm of this thread's last fr_dispatch ("" before any). */
const char *fr_last_algorithm(void);

/* Validate a handle: FR_SUCCESS or FR_ERR_BAD_COMM with a message. */
fr_status_t fr_comm_check(const struct fr_comm *comm);
/* fr_comm_destroy of @p n communicators at once (collective over each; NULL
 * entries are skipped): the ranks may list them in different orders. */
fr_status_t fr_comm_destroy_many(fr_comm_t *comms, int n);

/* Element range [*off, *off + *len) of block @p i when @p count elements are
 * split into @p nblocks nearly equal blocks (the first count % nblocks get
 * one more). */
static inline void fr_block(size_t count, int nblocks, int i, size_t *off, size_t *len)
{
    size_t q = count / (size_t)nblocks, r = count % (size_t)nblocks, ui = (size_t)i;
    *off = ui * q + (ui < r ? ui : r);
    *len = q + (ui < r ? 1 : 0);
}

/* Element offset where block @p i of fr_block() starts; @p count for
 * i >= nblocks, so blocks [lo, hi) span fr_block_start(hi) - fr_block_start(lo). */
static inline size_t fr_block_start(size_t count, int nblocks, int i)
{
    size_t off, len;
    if (i >= nblocks) return count;
    fr_block(count, nblocks, i, &off, &len);
    return off;
}

#endif

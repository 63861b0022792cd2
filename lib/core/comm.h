/* The communicator and the call descriptor: the data every layer above
 * the core works on. */
#ifndef FR_COMM_H
#define FR_COMM_H

#include <stdint.h>
#include <stddef.h>
#include <mpi.h>
#include "fastreduce.h"
#include "settings.h"
#include "table.h"

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
    int         zcopy;     /* set by an algorithm that moved the data zero-copy (algorithms/shm_zcopy.c) */
    int         cma;       /* set by a bcast whose data this rank copied from the root's buffer or the
                              readers copied from this root's, by cma (algorithms/shm_zcopy.c) */
    uint64_t    t_issue;   /* when it was queued as a request, where calls are observed (lib/api/observe.c); 0:
                              it was not queued, or nothing observes */
    int         agreed;    /* set by an algorithm failing on every rank alike before anything moved: the
                              communicator stays usable (any other failure breaks it) */
} fr_call_t;

struct fr_ucx;
struct fr_shm;
struct fr_prog;
struct fr_observe;

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
    void        *scratch;      /* the algorithms' scratch buffer, the same size on every rank */
    size_t       scratch_size;
    void        *fusion;       /* grow-only fusion buffer of grouped allreduces, from fr_mem_alloc where it
                                  can be (lib/api/group.c) */
    size_t       fusion_size;
    struct fr_prog *prog;      /* the queue of requests and its progress thread (lib/api/progress.c) */
    struct fr_observe *obs;    /* its timeline, metrics and late-rank report (lib/api/observe.c); NULL: none */
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
    MPI_Request  bye;          /* fr_comm_destroy_many's barrier ... */
    long        *bye_vals;     /* ... an allreduce: [3] in, [3] out (the heap: a timed-out request keeps it) */
    /* a transfer in flight while shared-memory steps run (hier allreduce's
     * network stage of one chunk under the next chunk's shm steps): the shm
     * waits and long copies call bg(comm, bg_arg) to move it on; NULL: none */
    fr_status_t (*bg)(struct fr_comm *comm, void *arg);
    void        *bg_arg;
    /* dispatch of a call to the algorithm the table gives it (set by
     * fr_comm_create): the staged device path runs its host copy through
     * it, and dispatch sits in a layer above the algorithms */
    fr_status_t (*run_host)(struct fr_comm *comm, fr_call_t *call);
    /* device buffers (lib/device.c) */
    void        *nccl;         /* ncclComm_t, NULL until made */
    int          nccl_state;   /* 0 not tried yet, 1 ready, -1 not available (same on every rank) */
    int          nccl_tuned;   /* 1: fastreduce's tuner plugin steers it on every rank */
    void        *stage;        /* pinned host buffer of the staged path */
    size_t       stage_size;
};

/* The communicator's scratch buffer, which fr_dispatch reserved for the
 * running algorithm (fr_alg_t.scratch); NULL, with FR_ERR_INTERNAL
 * recorded, where @p bytes is more than was reserved. */
void *fr_comm_scratch(struct fr_comm *comm, size_t bytes);
/* The scratch buffer made at least @p bytes (its contents lost). Not
 * collective: fr_dispatch agrees on the outcome. */
fr_status_t fr_comm_scratch_grow(struct fr_comm *comm, size_t bytes);
/* The scratch buffer freed (every rank alike, after a failed agreement). */
void fr_comm_scratch_drop(struct fr_comm *comm);

/* The name of collective @p coll ("allreduce", "bcast"). */
const char *fr_coll_name(fr_coll_t coll);

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

/* The algorithm interface: what one file in algorithms/ defines, and the
 * rule parameters an algorithm may read. The registry (lib/select/registry.c)
 * lists every fr_alg_t; nothing else names them. */
#ifndef FR_ALG_H
#define FR_ALG_H

#include <stdint.h>
#include "comm.h"

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
    /* The bytes of the communicator's scratch buffer (fr_comm_scratch) it
     * takes for @p call, as chosen (its rule's parameters set): a bound the
     * same on every rank, which fr_dispatch reserves before the run and the
     * ranks agree on, so that a rank without the memory fails the call on
     * every rank instead of leaving them waiting. NULL: none. */
    size_t      (*scratch)(const fr_call_t *call, const struct fr_comm *comm);
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

/* The scratch bytes @p a takes for @p call (0 where it takes none). */
static inline size_t fr_alg_scratch(const fr_alg_t *a, const fr_call_t *call, const struct fr_comm *comm)
{
    return a->scratch ? a->scratch(call, comm) : 0;
}

/* @p a's entry for rule parameter @p key, or NULL when it does not read it. */
static inline const fr_alg_param_t *fr_alg_param(const fr_alg_t *a, int key)
{
    for (int i = 0; i < FR_PARAM_COUNT - 1 && a->params[i].key; i++)
        if (a->params[i].key == key) return &a->params[i];
    return NULL;
}

#endif

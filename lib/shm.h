/* The node's shared-memory segment: created by local rank 0, mapped by the
 * node's ranks, unlinked as soon as all have mapped it (so nothing stays in
 * /dev/shm if a rank dies). It holds a control area of flags, one per rank
 * and cache line, and data slots used by the shm algorithms. */
#ifndef FR_SHM_H
#define FR_SHM_H

#include <stdint.h>
#include <stddef.h>
#include "comm.h"

#define FR_CACHELINE 64

typedef struct fr_shm_flag {
    volatile uint64_t v;
    char pad[FR_CACHELINE - sizeof(uint64_t)];
} fr_shm_flag_t;

/* Flags per rank, each a counter of rounds that only grows. */
enum { FR_SHM_F_SMALL = 0, FR_SHM_F_ARRIVE, FR_SHM_F_REDUCED, FR_SHM_F_BREADY, FR_SHM_F_BACK,
       FR_SHM_NFLAGS };
#define FR_SHM_SMALL   16384          /* bytes per rank in each of the two small slots */
#define FR_SHM_BCAST_NBUF 8           /* chunks in flight in the bcast ring */
/* Buffers of the chunked allreduce. A rank reuses buffer R % 3 at round R
 * once every rank of the node has arrived at round R-1: by then each has
 * finished the allgather of round R-3, also when hier allreduce runs the
 * allgather of round R-1 only after the reduce-scatter of round R. */
#define FR_SHM_RED_NBUF 3

typedef struct fr_shm {
    void          *base;
    size_t         size;
    int            lrank, lsize;
    fr_shm_flag_t *flags;     /* [lsize * FR_SHM_NFLAGS] */
    char          *small;     /* [2][lsize][FR_SHM_SMALL]: one-shot small allreduce */
    char          *red;       /* [FR_SHM_RED_NBUF][lsize][red_slot]: chunked large allreduce */
    size_t         red_slot;  /* bytes per rank per buffer */
    char          *bc;        /* [FR_SHM_BCAST_NBUF][bc_slot]: bcast ring */
    size_t         bc_slot;
    uint64_t       round[FR_SHM_NFLAGS]; /* this rank's local copy of its flag counters */
} fr_shm_t;

/* Collective over comm->node_comm. Leaves comm->shm NULL (and succeeds)
 * when the node has one rank. */
fr_status_t fr_shm_create(struct fr_comm *comm);
void fr_shm_destroy(struct fr_comm *comm);

static inline volatile uint64_t *fr_shm_flag(fr_shm_t *s, int lrank, int which)
{
    return &s->flags[lrank * FR_SHM_NFLAGS + which].v;
}

/* Wait until flag @p which of every local rank is >= @p value (spin, then
 * yield); FR_ERR_TIMED_OUT, naming the ranks behind, past FASTREDUCE_TIMEOUT. */
fr_status_t fr_shm_wait_all(struct fr_comm *comm, int which, uint64_t value);
/* Wait until flag @p which of local rank @p lrank is >= @p value. */
fr_status_t fr_shm_wait_one(struct fr_comm *comm, int lrank, int which, uint64_t value);
/* Publish this rank's flag (a release store). */
static inline void fr_shm_post(fr_shm_t *s, int which, uint64_t value)
{
    __atomic_store_n(fr_shm_flag(s, s->lrank, which), value, __ATOMIC_RELEASE);
}

/* The allreduce buffers of round @p R: [lsize][red_slot]. */
static inline char *fr_shm_red(const fr_shm_t *s, uint64_t R)
{
    return s->red + (size_t)(R % FR_SHM_RED_NBUF) * (size_t)s->lsize * s->red_slot;
}

/* The spin-then-yield step used by every waiting loop. */
void fr_backoff(uint64_t *polls, uint64_t spin);

#endif

/* Zero-copy steps of the shm algorithms: where every rank's buffers (an
 * allreduce) or the root's (a bcast) come from fr_mem_alloc, the ranks
 * read and write each other's buffers directly instead of copying through
 * the node's segment. Each rank first publishes a descriptor of its
 * buffers; the ranks that read the descriptors all see the same answers, so
 * every rank takes the same path. */
#ifndef FR_SHM_ZCOPY_H
#define FR_SHM_ZCOPY_H
#include "alg.h"
#include "shm_steps.h"

/* Whether calls of this size look for zero-copy buffers at all (the same
 * on every rank: it reads the call's size and the node's segment only). */
int fr_shm_zc_allreduce_size(const struct fr_comm *comm, const fr_call_t *call);
int fr_shm_zc_bcast_size(const struct fr_comm *comm, const fr_call_t *call);
/* Whether a bcast of this size has its readers copy a private root buffer
 * straight from the root's memory by cma (lib/transport/cma.h), the same
 * on every rank of the node (comm->shm->cma_on is agreed). */
int fr_shm_cma_bcast_size(const struct fr_comm *comm, const fr_call_t *call);
/* The sizes from *lo to *hi bytes that fr_shm_cma_bcast_size takes where
 * the node may: 1 when this rank's node does, else 0. */
int fr_shm_cma_bcast_range(const struct fr_comm *comm, size_t *lo, size_t *hi);

/* Run @p call zero-copy where the buffers allow: *done = 1 when it has
 * (call->zcopy set), 0 when the copy path must run it, on every rank
 * alike. Every rank calls them for each call of a size above. The
 * allreduce gives the bits the copy path would: each rank reduces its
 * block (fr_block) of every chunk of @p cel elements, combining the inputs
 * in the copy path's order (@p own_first: this rank's first, as the
 * chunked path does; else in rank order, as the one-shot path does, which
 * passes cel = count). With @p between (hier: across the nodes) each rank
 * reduces its block into its own output, calls between on it, and writes
 * it to the others' outputs; the node's ranks then agree that all could map
 * before any block moves (a rank's blocks cannot be left out, since its
 * peers on other nodes wait for them). */
fr_status_t fr_shm_zc_allreduce(struct fr_comm *comm, fr_call_t *call, size_t cel, int own_first,
                                fr_slice_fn between, int *done);
/* The bcast's: every rank calls it for each call of a size either of the
 * two above takes. */
fr_status_t fr_shm_zc_bcast(struct fr_comm *comm, fr_call_t *call, int *done);

/* A bcast whose data reaches one rank of the node chunk by chunk (hier:
 * over the network to the node's leader, local rank @p src), copied by the
 * others straight from the leader's buffer as the chunks come, where that
 * buffer is fr_mem_alloc's. */
typedef struct fr_zc_stream {
    int      on;       /* 1: this call's node stage is zero-copy (the same on the node's ranks) */
    int      src;      /* the leader's local rank */
    uint64_t Z;        /* its round */
    uint64_t base;     /* s->round[FR_SHM_F_ZAVAIL] before its chunks */
    char    *from;     /* a reader: the leader's buffer, mapped */
} fr_zc_stream_t;

/* Every local rank, before the chunks: the leader describes its buffer,
 * the others map it, and all learn whether every one could (z->on). */
fr_status_t fr_shm_zc_stream_start(struct fr_comm *comm, const fr_call_t *call, int src, size_t nchunks,
                                   fr_zc_stream_t *z);
/* The leader: its first @p k chunks are in its buffer. */
void fr_shm_zc_stream_ready(struct fr_comm *comm, const fr_zc_stream_t *z, size_t k);
/* Another rank: chunk @p k ([off, off + n) of the buffer) into its own
 * buffer @p data, once the leader has it. */
fr_status_t fr_shm_zc_stream_copy(struct fr_comm *comm, const fr_zc_stream_t *z, size_t k, char *data, size_t off,
                                  size_t n, fr_copy_fn copy);
/* After the chunks: the others say they are done; the leader waits for
 * them (its buffer is read until then). */
fr_status_t fr_shm_zc_stream_end(struct fr_comm *comm, const fr_zc_stream_t *z);

#endif

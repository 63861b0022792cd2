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
fr_status_t fr_shm_zc_bcast(struct fr_comm *comm, fr_call_t *call, int *done);

#endif

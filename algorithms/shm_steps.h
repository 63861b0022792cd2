/* Steps through the node's shared segment that several algorithms share:
 * the reduce-scatter and allgather halves of one chunk of the shm
 * allreduce, and one chunk of the shm bcast. Every rank of the node calls
 * them with the same arguments (except its own data), in the same order. */
#ifndef FR_SHM_STEPS_H
#define FR_SHM_STEPS_H
#include <stddef.h>
#include <stdint.h>
#include "alg.h"
#include "copy.h"

/* One chunk's reduce-scatter: @p n elements of @p send go into this rank's
 * slot; this rank reduces its slice (elements [*so, *so + *sl) of the
 * chunk) from every rank's copy. Sets *slice to the reduced slice, in the
 * segment, and *round to the round it used (for fr_shm_ag_chunk). With
 * @p recv (the chunk's place in the result, or NULL) the slice is also
 * left there. While comm->bg is set, it is called between pieces of the
 * copies and the reduction, and in the waits. */
fr_status_t fr_shm_rs_chunk(struct fr_comm *comm, const fr_call_t *call, const char *send, size_t n,
                            char *recv, char **slice, uint64_t *round, size_t *so, size_t *sl);
/* The same chunk's allgather: publish this rank's reduced slice and copy
 * every slice into @p recv (n elements), but its own when @p have_own (the
 * reduce-scatter left it there). */
fr_status_t fr_shm_ag_chunk(struct fr_comm *comm, const fr_call_t *call, char *recv, size_t n, uint64_t round,
                     int have_own, fr_copy_fn copy_out);
/* Elements per chunk of the chunked allreduce: the rule's chunk= or
 * @p def_chunk bytes, at most a slot, at least one element. */
size_t fr_shm_chunk_elems(const struct fr_comm *comm, const fr_call_t *call, size_t def_chunk);
/* The chunked shm allreduce of call (chunk= or @p def_chunk bytes, at most a
 * slot): per chunk, fr_shm_rs_chunk, then @p between (NULL: nothing) on this
 * rank's reduced slice of @p sl elements (chunk number @p k), then
 * fr_shm_ag_chunk. */
typedef fr_status_t (*fr_slice_fn)(struct fr_comm *comm, const fr_call_t *call, char *slice, size_t sl,
                                   unsigned k);
fr_status_t fr_shm_allreduce_chunks(struct fr_comm *comm, const fr_call_t *call, size_t def_chunk,
                                    fr_slice_fn between);
/* One bcast chunk of @p n bytes of @p data from local rank @p root, of a
 * message of @p total bytes. */
fr_status_t fr_shm_bcast_chunk(struct fr_comm *comm, int root, char *data, size_t n, size_t total,
                               fr_copy_fn copy_out);

#endif

/* allreduce "shm": the ranks of one node reduce through the node's shared
 * segment. Small messages (up to one_shot_max bytes: 8K, or 16K when the
 * machine's ranks outnumber its cores): every rank publishes its vector and
 * reduces all of them in rank order (one synchronisation). Larger ones: in
 * chunks (up to 1M in one chunk, then chunk=512K; at most a third of
 * FASTREDUCE_SHM_SIZE), in three buffers in turn; each rank copies its chunk in,
 * reduces its own slice of the chunk from every rank's copy, publishes the
 * result, and copies the other slices' results out. Where every rank's
 * buffers come from fr_mem_alloc, messages from 4 KiB (64 KiB when the
 * machine's ranks outnumber its cores) go zero-copy instead (shm_zcopy.h). */
#include <string.h>
#include "alg_util.h"
#include "alg.h"
#include "reduce.h"
#include "copy.h"
#include "shm.h"
#include "shm_steps.h"
#include "shm_zcopy.h"
#include "log.h"

#define DEFAULT_CHUNK (512u * 1024u)
/* A message of up to 1 MiB goes in one chunk by default: below that the
 * pipeline of chunks has too little to overlap to pay for its extra waits
 * (docs/performance.md, "Design decisions"). */
#define ONE_CHUNK_MAX ((size_t)1024 * 1024)
static uint64_t default_chunk(const fr_call_t *call)
{
    return call->bytes <= ONE_CHUNK_MAX ? ONE_CHUNK_MAX : DEFAULT_CHUNK;
}

/* The small buffer of round @p R: [lsize][FR_SHM_SMALL_SLOT]. */
static char *small_buf(const fr_shm_t *s, uint64_t R)
{
    return s->small + (size_t)(R & 1) * (size_t)s->lsize * FR_SHM_SMALL_SLOT;
}

/* Data that fits in a header line goes in each rank's next line of
 * s->small_tiny rather than in the first line of its small slot, always
 * the same: the line a rank writes was then last read by the others
 * FR_SHM_TINY_NR rounds ago, so the writer does not wait for lines the
 * readers still hold across dies. (Within the small slots the lines cannot
 * move: a longer message's data there would read as a later round's
 * header.) */
static fr_status_t small(fr_call_t *call, fr_comm_t comm)
{
    fr_shm_t *s = comm->shm;
    uint64_t R = ++s->round[FR_SHM_F_SMALL];
    const int tiny = call->bytes <= FR_SHM_INLINE;
    const size_t stride = tiny ? (size_t)FR_SHM_TINY_NR * FR_CACHELINE : FR_SHM_SMALL_SLOT;
    char *base = tiny ? s->small_tiny + (size_t)(R % FR_SHM_TINY_NR) * FR_CACHELINE : small_buf(s, R);
    /* these slots served round R-2 (small buffers) or R - FR_SHM_TINY_NR
     * (lines) at the latest: every rank is done with them once it has
     * published round R-1 */
    if (R > 1) FR_CHECK(fr_shm_wait_slots(comm, s->small_prev, s->small_prev_stride, FR_SHM_F_SMALL, R - 1));
    s->small_prev = base;
    s->small_prev_stride = stride;
    char *mine = base + (size_t)s->lrank * stride;
    fr_shm_put(s, fr_shm_slot_data(mine, call->bytes), call->sendbuf, call->bytes);
    fr_shm_slot_post(mine, R);
    FR_CHECK(fr_shm_wait_slots(comm, base, stride, FR_SHM_F_SMALL, R));
    fr_reduce3(call->recvbuf, fr_shm_slot_data(base, call->bytes), fr_shm_slot_data(base + stride, call->bytes),
               call->count, call->dtype, call->op);
    for (int j = 2; j < s->lsize; j++)
        fr_reduce(call->recvbuf, fr_shm_slot_data(base + (size_t)j * stride, call->bytes), call->count,
                  call->dtype, call->op);
    return FR_SUCCESS;
}

/* The largest message every rank reduces whole: 8 KiB, or a small slot
 * (16 KiB) when the machine's ranks outnumber its cores. Above, the chunked
 * path waits twice (the inputs in, the slices reduced) but each rank
 * reduces only its slice; oversubscribed, every wait can be one for a rank
 * without a core, so one wait pays longer. Both values are the same on
 * every rank of a node, as the two paths must be. */
#define ONE_SHOT_MAX ((size_t)8192)
static size_t one_shot_max(const struct fr_comm *comm)
{
    return comm->oversubscribed ? FR_SHM_SMALL : ONE_SHOT_MAX;
}

static fr_status_t run(fr_call_t *call, fr_comm_t comm)
{
    if (comm->size == 1) {
        if (call->sendbuf != call->recvbuf) fr_copy(call->recvbuf, call->sendbuf, call->bytes);
        return FR_SUCCESS;
    }
    if (fr_shm_zc_allreduce_size(comm, call)) {
        int done, chunked = call->bytes > one_shot_max(comm);
        size_t cel = chunked ? fr_shm_chunk_elems(comm, call, default_chunk(call)) : call->count;
        FR_CHECK(fr_shm_zc_allreduce(comm, call, cel, chunked, NULL, &done));
        if (done) return FR_SUCCESS;
    }
    if (call->bytes <= one_shot_max(comm)) return small(call, comm);
    return fr_shm_allreduce_chunks(comm, call, default_chunk(call), NULL);
}

const fr_alg_t fr_alg_allreduce_shm = {
    .name = "shm", .coll = FR_COLL_ALLREDUCE, .mem_types = FR_MEM_HOST, .check = fr_alg_check_shm, .run = run,
    .desc = "one node: the ranks reduce through the node's shared-memory segment",
    .params = { { FR_PARAM_CHUNK, { DEFAULT_CHUNK / 4, DEFAULT_CHUNK * 4 } } },
    .chunk_def = DEFAULT_CHUNK, .chunk_for = default_chunk,
    .traits = FR_ALG_ONE_NODE | FR_ALG_SHM, .tie_rank = 4,
};

/* allreduce "shm": the ranks of one node reduce through the node's shared
 * segment. Small messages (up to one_shot_max bytes: 8K, or 16K when the
 * machine's ranks outnumber its cores): every rank publishes its vector and
 * reduces all of them in rank order (one synchronisation). Larger ones: in
 * chunks (up to 1M in one chunk, then chunk=512K; at most a third of
 * FASTREDUCE_SHM_SIZE), in three buffers in turn; each rank copies its chunk in,
 * reduces its own slice of the chunk from every rank's copy, publishes the
 * result, and copies the other slices' results out. */
#include <string.h>
#include "alg_util.h"
#include "comm.h"
#include "reduce.h"
#include "copy.h"
#include "shm.h"
#include "shm_steps.h"
#include "log.h"

#define DEFAULT_CHUNK (512u * 1024u)
/* A message of up to 1 MiB goes in one chunk by default. On the 2-core VM,
 * one chunk against 512 KiB chunks side by side (fr_osu_allreduce
 * --compare, 31 blocks, 3 launches each): 2 ranks 768 KiB 0.88-0.94 of the
 * time, 1 MiB 0.93-0.96; 4 ranks on the 2 cores 0.93-0.95 and 0.80-0.96.
 * At 1.5 MiB one chunk took 1.06-1.08 (2 ranks) and 0.99-1.28 (4 ranks).
 * Every tuner run had picked chunk=2M at 768 KiB, and its check found the
 * default behind at 1 MiB. */
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
 * FR_SHM_TINY_NR rounds ago. With the two vCPUs of the project's VM on
 * different dies, a 4 B allreduce took 0.38 us (median of 30 launches)
 * against 0.47 in the slot's first line, and 8-32 B the same (Open MPI
 * with vader: 0.42-0.49 in those launches); on one die it made no
 * difference (0.15-0.16 us). (Within the small slots the lines cannot
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
 * reduces only its slice. On the 2-core VM, launches alternated with a
 * build that reduced whole up to 16 KiB: 2 ranks 16 KiB 1.60 against
 * 2.87 us with the cores near (4 launches), 2.99 against 4.25 far apart
 * (3); 8 KiB 0.81 against 1.47 near but 3.69 against 2.60 far, so 8 KiB
 * stays whole. With 3 and 4 ranks on the 2 cores every wait can be one for
 * a rank without a core, and the chunked path took 1.22-1.23 of the time
 * at 16 KiB and 1.51-1.58 at 8 KiB. Both values are the same on every
 * rank of a node, as the two paths must be. */
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

/* bcast "shm": the root copies chunks into a ring of buffers in the node's
 * shared segment; the other ranks copy them out as they appear. The root
 * reuses a buffer once every rank has acknowledged it. The ring has 8
 * buffers; a message of fewer than 8 chunks takes turns in those that fit
 * in 2 MiB, 2 at least. Chunks are 256K, 512K from 1M (chunk=, at most
 * FASTREDUCE_SHM_SIZE x ranks / 8 less a 64-byte header); chunks up to 16K
 * go through a ring of 256 slots, up to 8 bytes a ring of 512 packed slots. */
#include <string.h>
#include "alg_util.h"
#include "comm.h"
#include "copy.h"
#include "shm.h"
#include "shm_steps.h"
#include "log.h"

#define DEFAULT_CHUNK (256u * 1024u)
/* A message of 1 MiB or more goes in chunks of 512 KiB by default. On the
 * 2-core VM, side by side with 256 KiB chunks in one run (other algorithms'
 * blocks between them, 15 blocks a size, 3 to 8 runs, the two vCPUs near
 * each other; median times and median ratios): 2 ranks 1 MiB 28.0 against
 * 30.0 us (0.94), 2 MiB 54.6 against 60.6 (0.90), 4 MiB 109 against 121
 * (0.90), 8 MiB 301 against 322 (0.93), 16-64 MiB 0.93-0.96; 4 ranks on
 * the 2 cores 1.03, 0.99 and 1.02 at 1, 2 and 4 MiB, 0.95-0.99 from 8 MiB.
 * 1 MiB chunks did better at 2 ranks from 1 to 4 MiB (0.82-0.90) but worse
 * from 8 MiB (1.07-1.16: eight slots of 1 MiB in turn) and at 4 ranks
 * (1.05-1.18 at 1-4 MiB). A message under 1 MiB would be one chunk, with
 * nothing to overlap: 512 KiB took 1.05 times as long in one. */
#define BIG_CHUNK (512u * 1024u)
#define BIG_FROM  ((size_t)1024 * 1024)
static uint64_t default_chunk(const fr_call_t *call)
{
    return call->bytes >= BIG_FROM ? BIG_CHUNK : DEFAULT_CHUNK;
}

static fr_status_t run(fr_call_t *call, fr_comm_t comm)
{
    fr_shm_t *s = comm->shm;
    if (comm->size == 1) return FR_SUCCESS;
    size_t chunk = call->chunk ? call->chunk : default_chunk(call);
    if (chunk > fr_shm_bcast_max(s)) chunk = fr_shm_bcast_max(s);
    /* (With 128 small slots of 4 KiB, a 2-4 KiB message went in two halves:
     * the root wrote 64 lines a reader still held and stalled, 0.52-0.55 us
     * in one chunk against 0.35-0.37 in two. With 256 slots of 16 KiB the
     * lines are 4 MiB of slots back, and one chunk is faster: 3 KiB 0.87
     * and 4 KiB 0.74-0.77 of the time in two halves with the VM's cores
     * near, 0.91-1.00 with them far apart.) */
    fr_copy_fn copy_out = fr_shm_copy_for(comm, call);
    int root = comm->rank_local[call->root];
    for (size_t off = 0; off < call->bytes; off += chunk) {
        size_t n = call->bytes - off < chunk ? call->bytes - off : chunk;
        FR_CHECK(fr_shm_bcast_chunk(comm, root, (char *)call->recvbuf + off, n, call->bytes, copy_out));
    }
    return FR_SUCCESS;
}

const fr_alg_t fr_alg_bcast_shm = {
    .name = "shm", .coll = FR_COLL_BCAST, .mem_types = FR_MEM_HOST, .check = fr_alg_check_shm, .run = run,
    .desc = "one node: the root streams chunks through a ring of shared-memory buffers",
    .params = { { FR_PARAM_CHUNK, { DEFAULT_CHUNK / 4, DEFAULT_CHUNK * 4 } } },
    .chunk_def = DEFAULT_CHUNK, .chunk_for = default_chunk,
    .traits = FR_ALG_ONE_NODE | FR_ALG_SHM, .tie_rank = 3,
};

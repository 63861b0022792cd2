/* bcast "shm": the root copies chunks into a ring of buffers in the node's
 * shared segment; the other ranks copy them out as they appear. The root
 * reuses a buffer once every rank has acknowledged it. The ring has 8
 * buffers; a message of fewer than 8 chunks takes turns in those that fit
 * in 2 MiB, 2 at least. Chunks are 256K, 512K from 1M (chunk=, at most
 * FASTREDUCE_SHM_SIZE x ranks / 8 less a 64-byte header); chunks up to 16K
 * go through a ring of 256 slots, up to 8 bytes a ring of 512 packed slots.
 * Where the root's buffer comes from fr_mem_alloc, the others copy from it
 * directly (shm_zcopy.h); where it is private, from 64 KiB to 512 KiB, they
 * copy it straight from the root's memory by cma where the kernel allows. */
#include <string.h>
#include "alg_util.h"
#include "alg.h"
#include "copy.h"
#include "shm.h"
#include "shm_steps.h"
#include "shm_zcopy.h"
#include "log.h"

#define DEFAULT_CHUNK (256u * 1024u)
/* A message of 1 MiB or more goes in chunks of 512 KiB by default, smaller
 * ones in 256 KiB chunks: larger chunks wait less, smaller ones overlap the
 * root's puts with the readers' copies, and 512 KiB was the best of the
 * sizes tried from 1 MiB (docs/performance.md, "Design decisions"). */
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
    fr_copy_fn copy_out = fr_shm_copy_for(comm, call);
    int root = comm->rank_local[call->root];
    if (fr_shm_zc_bcast_size(comm, call) || fr_shm_cma_bcast_size(comm, call)) {
        int done;
        FR_CHECK(fr_shm_zc_bcast(comm, call, &done));
        if (done) return FR_SUCCESS;
    }
    for (size_t off = 0; off < call->bytes; off += chunk) {
        size_t n = call->bytes - off < chunk ? call->bytes - off : chunk;
        FR_CHECK(fr_shm_bcast_chunk(comm, root, (char *)call->recvbuf + off, n, call->bytes, copy_out));
    }
    return FR_SUCCESS;
}

const fr_alg_t fr_alg_bcast_shm = {
    .name = "shm", .coll = FR_COLL_BCAST, .mem_types = FR_MEM_HOST, .check = fr_alg_check_shm, .run = run,
    .desc = "one node: the root streams chunks through a ring of shared-memory buffers "
            "(64-512 KiB: the others copy its buffer by cma)",
    .params = { { FR_PARAM_CHUNK, { DEFAULT_CHUNK / 4, DEFAULT_CHUNK * 4 } } },
    .chunk_def = DEFAULT_CHUNK, .chunk_for = default_chunk,
    .traits = FR_ALG_ONE_NODE | FR_ALG_SHM, .tie_rank = 3,
};

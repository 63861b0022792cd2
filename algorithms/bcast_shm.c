/* bcast "shm": the root copies chunks into a ring of buffers in the node's
 * shared segment; the other ranks copy them out as they appear. The root
 * reuses a buffer once every rank has acknowledged it. */
#include <string.h>
#include "alg_util.h"
#include "comm.h"
#include "copy.h"
#include "shm.h"
#include "shm_steps.h"
#include "log.h"

#define DEFAULT_CHUNK (256u * 1024u)

static fr_status_t run(fr_call_t *call, fr_comm_t comm)
{
    fr_shm_t *s = comm->shm;
    if (comm->size == 1) return FR_SUCCESS;
    size_t chunk = call->chunk ? call->chunk : DEFAULT_CHUNK;
    if (chunk > fr_shm_bcast_max(s)) chunk = fr_shm_bcast_max(s);
    fr_copy_fn copy_out = fr_copy_for(call->bytes);
    int root = comm->rank_local[call->root];
    for (size_t off = 0; off < call->bytes; off += chunk) {
        size_t n = call->bytes - off < chunk ? call->bytes - off : chunk;
        FR_CHECK(fr_shm_bcast_chunk(comm, root, (char *)call->recvbuf + off, n, copy_out));
    }
    return FR_SUCCESS;
}

const fr_alg_t fr_alg_bcast_shm = {
    .name = "shm", .coll = FR_COLL_BCAST, .mem_types = FR_MEM_HOST, .check = fr_alg_check_shm, .run = run,
    .desc = "single node: the root streams chunks through a ring of 8 shared-memory buffers; "
            "chunk=256K (at most FASTREDUCE_SHM_SIZE x ranks / 8, less a 64-byte header); chunks up to 4K go "
            "through a ring of 128 slots",
    .params = FR_PARAM_CHUNK, .chunk_def = DEFAULT_CHUNK,
};

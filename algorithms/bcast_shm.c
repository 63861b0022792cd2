/* bcast "shm": the root copies chunks into a ring of buffers in the node's
 * shared segment; the other ranks copy them out as they appear. The root
 * reuses a buffer once every rank has acknowledged it. */
#include <string.h>
#include "alg_util.h"
#include "comm.h"
#include "copy.h"
#include "shm.h"

#define DEFAULT_CHUNK (256u * 1024u)

static fr_status_t run(fr_call_t *call, fr_comm_t comm)
{
    fr_shm_t *s = comm->shm;
    if (comm->size == 1) return FR_SUCCESS;
    size_t chunk = call->chunk ? call->chunk : DEFAULT_CHUNK;
    if (chunk > s->bc_slot) chunk = s->bc_slot;
    void (*copy_out)(void *, const void *, size_t) = fr_copy_for(call->bytes);
    int root = comm->rank_local[call->root];
    char *data = call->recvbuf;
    size_t off = 0;
    do {
        size_t n = call->bytes - off < chunk ? call->bytes - off : chunk;
        uint64_t R = ++s->round[FR_SHM_F_BREADY];
        char *buf = s->bc + (size_t)((R - 1) % FR_SHM_BCAST_NBUF) * s->bc_slot;
        if (s->lrank == root) {
            if (R > FR_SHM_BCAST_NBUF) fr_shm_wait_all(s, FR_SHM_F_BACK, R - FR_SHM_BCAST_NBUF, comm->spin);
            fr_copy(buf, data + off, n);
            fr_shm_post(s, FR_SHM_F_BREADY, R);
        } else {
            fr_shm_wait_one(s, root, FR_SHM_F_BREADY, R, comm->spin);
            copy_out(data + off, buf, n);
        }
        fr_shm_post(s, FR_SHM_F_BACK, R);
        off += n;
    } while (off < call->bytes);
    return FR_SUCCESS;
}

const fr_alg_t fr_alg_bcast_shm = {
    .name = "shm", .coll = FR_COLL_BCAST, .mem_types = FR_MEM_HOST, .check = fr_alg_check_shm, .run = run,
    .desc = "single node: the root streams chunks through a ring of 8 shared-memory buffers; "
            "chunk=256K (at most FASTREDUCE_SHM_SIZE x ranks / 8)",
};

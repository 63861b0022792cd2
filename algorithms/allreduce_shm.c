/* allreduce "shm": the ranks of one node reduce through the node's shared
 * segment. Small messages (up to FR_SHM_SMALL bytes): every rank publishes
 * its vector and reduces all of them in rank order (one synchronisation).
 * Larger ones: in chunks, double-buffered; each rank copies its chunk in,
 * reduces its own slice of the chunk from every rank's copy, publishes the
 * result, and copies the other slices' results out. */
#include <string.h>
#include "alg_util.h"
#include "comm.h"
#include "reduce.h"
#include "copy.h"
#include "shm.h"

#define DEFAULT_CHUNK (512u * 1024u)

static void small(fr_call_t *call, fr_comm_t comm)
{
    fr_shm_t *s = comm->shm;
    uint64_t R = ++s->round[FR_SHM_F_SMALL];
    char *base = s->small + (size_t)(R & 1) * (size_t)s->lsize * FR_SHM_SMALL;
    if (R > 1) fr_shm_wait_all(s, FR_SHM_F_SMALL, R - 1, comm->spin);
    fr_copy(base + (size_t)s->lrank * FR_SHM_SMALL, call->sendbuf, call->bytes);
    fr_shm_post(s, FR_SHM_F_SMALL, R);
    fr_shm_wait_all(s, FR_SHM_F_SMALL, R, comm->spin);
    fr_reduce3(call->recvbuf, base, base + FR_SHM_SMALL, call->count, call->dtype, call->op);
    for (int j = 2; j < s->lsize; j++)
        fr_reduce(call->recvbuf, base + (size_t)j * FR_SHM_SMALL, call->count, call->dtype, call->op);
}

static void large(fr_call_t *call, fr_comm_t comm)
{
    /* A result larger than a good part of the cache is written with
     * streaming stores: it saves reading the destination lines first. */
    void (*copy_out)(void *, const void *, size_t) = fr_copy_for(call->bytes);
    fr_shm_t *s = comm->shm;
    const int l = s->lsize, me = s->lrank;
    const size_t es = fr_dtype_size(call->dtype);
    size_t chunk = call->chunk ? call->chunk : DEFAULT_CHUNK;
    if (chunk > s->red_slot) chunk = s->red_slot;
    size_t cel = chunk / es ? chunk / es : 1;
    const char *send = call->sendbuf;
    char *recv = call->recvbuf;

    for (size_t off = 0; off < call->count; off += cel) {
        size_t n = call->count - off < cel ? call->count - off : cel, so, sl;
        uint64_t R = ++s->round[FR_SHM_F_ARRIVE];
        char *bufs = s->red + (size_t)(R & 1) * (size_t)l * s->red_slot;
        char *mine = bufs + (size_t)me * s->red_slot;
        fr_block(n, l, me, &so, &sl);
        /* The buffer of round R-2 is free once every rank has started R-1. */
        if (R > 1) fr_shm_wait_all(s, FR_SHM_F_ARRIVE, R - 1, comm->spin);
        fr_copy(mine, send + off * es, so * es);
        fr_copy(mine + (so + sl) * es, send + (off + so + sl) * es, (n - so - sl) * es);
        fr_shm_post(s, FR_SHM_F_ARRIVE, R);
        fr_shm_wait_all(s, FR_SHM_F_ARRIVE, R, comm->spin);

        /* My slice: my own values (from the send buffer) combined with every
         * other rank's copy, written into my slot, where all ranks (me too)
         * copy it from. */
        char *res = mine + so * es;
        const char *own = send + (off + so) * es;
        int first = 1;
        for (int j = 0; j < l; j++) {
            if (j == me) continue;
            const char *src = bufs + (size_t)j * s->red_slot + so * es;
            if (first) fr_reduce3(res, own, src, sl, call->dtype, call->op);
            else fr_reduce(res, src, sl, call->dtype, call->op);
            first = 0;
        }
        fr_shm_post(s, FR_SHM_F_REDUCED, R);

        for (int k = 0; k < l; k++) {
            int j = (me + k) % l;   /* my own slice first: it is ready */
            size_t jo, jl;
            fr_block(n, l, j, &jo, &jl);
            if (j != me) fr_shm_wait_one(s, j, FR_SHM_F_REDUCED, R, comm->spin);
            copy_out(recv + (off + jo) * es, bufs + (size_t)j * s->red_slot + jo * es, jl * es);
        }
    }
}

static fr_status_t run(fr_call_t *call, fr_comm_t comm)
{
    if (comm->size == 1) {
        if (call->sendbuf != call->recvbuf) fr_copy(call->recvbuf, call->sendbuf, call->bytes);
        return FR_SUCCESS;
    }
    if (call->bytes <= FR_SHM_SMALL) small(call, comm);
    else large(call, comm);
    return FR_SUCCESS;
}

const fr_alg_t fr_alg_allreduce_shm = {
    .name = "shm", .coll = FR_COLL_ALLREDUCE, .mem_types = FR_MEM_HOST, .check = fr_alg_check_shm, .run = run,
    .desc = "single node, through one shared-memory segment: up to 16K every rank reduces all; above, "
            "each rank reduces its slice of double-buffered chunks (chunk=512K, at most half of "
            "FASTREDUCE_SHM_SIZE)",
};

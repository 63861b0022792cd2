/* Ring allreduce: a reduce-scatter then an allgather around the ring of
 * ranks (n-1 steps each), every step cut into chunks so that reducing one
 * chunk overlaps the transfer of the next. Each block is reduced along the
 * ring once, by a single chain, and then copied to every rank, so results
 * are bit-identical on all ranks. */
#include "alg_util.h"
#include "ring_pass.h"

#define RING_CHUNK_DEFAULT ((uint64_t)256 * 1024)

static fr_status_t ring_run(fr_call_t *call, struct fr_comm *comm)
{
    int n = comm->size;
    if (call->count == 0) return FR_SUCCESS;
    if (n == 1) { fr_alg_copy_input(call); return FR_SUCCESS; }

    size_t es = fr_dtype_size(call->dtype), off, maxlen;
    fr_block(call->count, n, 0, &off, &maxlen);
    size_t ce = fr_alg_chunk_elems(call, RING_CHUNK_DEFAULT, es, maxlen);
    char *tmp = fr_comm_scratch(comm, 2 * ce * es);
    if (!tmp) return FR_ERR_NO_MEMORY;
    FR_TRACE(FR_SUB_COLL, "ring: %zu bytes, %d ranks, chunk %zu bytes", call->bytes, n, ce * es);

    fr_ring_t g = {
        .pos = comm->rank, .n = n,
        .left = (comm->rank + n - 1) % n, .right = (comm->rank + 1) % n,
        .buf = call->recvbuf, .src = call->sendbuf,
        .count = call->count, .elsize = es, .dtype = call->dtype, .op = call->op,
        .rs_steps = n - 1, .ag_steps = n - 1,
        .chunk = ce, .tmp = tmp, .tag = 0,
    };
    return fr_ring_run(comm, &g);
}

const fr_alg_t fr_alg_allreduce_ring = {
    .name = "ring",
    .coll = FR_COLL_ALLREDUCE,
    .mem_types = FR_MEM_HOST,
    .check = fr_alg_check_host,
    .run = ring_run,
    .desc = "reduce-scatter then allgather around the ring of ranks, each step pipelined in chunks",
    .params = { { FR_PARAM_CHUNK, { RING_CHUNK_DEFAULT / 4, RING_CHUNK_DEFAULT * 4 } } },
    .chunk_def = RING_CHUNK_DEFAULT,
    .tie_rank = 1,
    .needs = FR_NEEDS_UCX,
};

/* Ring allreduce: a reduce-scatter then an allgather around the ring of
 * ranks (n-1 steps each), every step cut into chunks so that reducing one
 * chunk overlaps the transfer of the next. Each block is reduced along the
 * ring once, by a single chain, and then copied to every rank, so results
 * are bit-identical on all ranks. */
#include "alg_util.h"
#include "ring_pass.h"

#define RING_CHUNK_DEFAULT ((uint64_t)256 * 1024)

/* Elements per chunk: the rule's chunk=, at most the largest block. */
static size_t ring_chunk(const fr_call_t *call, const struct fr_comm *comm)
{
    size_t off, maxlen;
    fr_block(call->count, comm->size, 0, &off, &maxlen);
    return fr_alg_chunk_elems(call, RING_CHUNK_DEFAULT, fr_dtype_size(call->dtype), maxlen);
}

/* Two chunks: one arriving while the other is reduced. */
static size_t ring_scratch(const fr_call_t *call, const struct fr_comm *comm)
{
    return call->count && comm->size > 1 ? 2 * ring_chunk(call, comm) * fr_dtype_size(call->dtype) : 0;
}

static fr_status_t ring_run(fr_call_t *call, struct fr_comm *comm)
{
    int n = comm->size;
    if (call->count == 0) return FR_SUCCESS;
    if (n == 1) { fr_alg_copy_input(call); return FR_SUCCESS; }

    size_t es = fr_dtype_size(call->dtype), ce = ring_chunk(call, comm);
    char *tmp = fr_comm_scratch(comm, ring_scratch(call, comm));
    if (!tmp) return FR_ERR_INTERNAL;
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
    .scratch = ring_scratch,
    .desc = "reduce-scatter then allgather around the ring of ranks, each step pipelined in chunks",
    .params = { { FR_PARAM_CHUNK, { RING_CHUNK_DEFAULT / 4, RING_CHUNK_DEFAULT * 4 } } },
    .chunk_def = RING_CHUNK_DEFAULT,
    .tie_rank = 1,
    .needs = FR_NEEDS_UCX,
};

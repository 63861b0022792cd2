/* Scatter-allgather broadcast (van de Geijn): the message is cut into n
 * blocks (block i for the rank i places after the root); a binomial tree
 * scatters them, each rank receiving the blocks of its subtree, then a ring
 * allgather (ring_pass.h, chunked) gives every rank every block. About twice
 * the message per rank instead of log2(n) times: suits large messages. */
#include "alg_util.h"
#include "binomial.h"
#include "ring_pass.h"

#define SAG_CHUNK_DEFAULT ((uint64_t)256 * 1024)
#define SAG_STEP_SCATTER  0
#define SAG_STEP_RING     1   /* ring steps use 1 .. n-1 */

/* Byte range of blocks [lo, hi) of the n blocks (hi clipped to n). */
static void blocks(const fr_call_t *call, int n, int lo, int hi, size_t *off, size_t *len)
{
    size_t es = fr_dtype_size(call->dtype), start = fr_block_start(call->count, n, lo);
    *off = start * es;
    *len = (fr_block_start(call->count, n, hi) - start) * es;
}

static fr_status_t sag_run(fr_call_t *call, struct fr_comm *comm)
{
    int n = comm->size, root = call->root;
    if (call->count == 0 || n == 1) return FR_SUCCESS;
    size_t es = fr_dtype_size(call->dtype);
    char *buf = call->recvbuf;
    int vr = (comm->rank - root + n) % n;

    /* binomial scatter: each rank gets the blocks of its subtree */
    FR_CHECK(fr_binomial_pass(comm, call, buf, blocks, SAG_STEP_SCATTER));

    /* ring allgather of the blocks, by relative rank */
    size_t o0, maxlen;
    fr_block(call->count, n, 0, &o0, &maxlen);
    fr_ring_t g = {
        .pos = vr, .n = n,
        .left = (comm->rank + n - 1) % n, .right = (comm->rank + 1) % n,
        .buf = buf, .src = buf,
        .count = call->count, .elsize = es, .dtype = call->dtype, .op = call->op,
        .rs_steps = 0, .ag_steps = n - 1,
        .chunk = fr_alg_chunk_elems(call, SAG_CHUNK_DEFAULT, es, maxlen), .tmp = NULL,
        .tag = SAG_STEP_RING,
    };
    return fr_ring_run(comm, &g);
}

const fr_alg_t fr_alg_bcast_scatter_allgather = {
    .name = "scatter_allgather",
    .coll = FR_COLL_BCAST,
    .mem_types = FR_MEM_HOST,
    .check = fr_alg_check_host,
    .run = sag_run,
    .desc = "binomial scatter of n blocks, then a ring allgather in chunks (van de Geijn)",
    .params = { { FR_PARAM_CHUNK, { SAG_CHUNK_DEFAULT / 4, SAG_CHUNK_DEFAULT * 4 } } },
    .chunk_def = SAG_CHUNK_DEFAULT,
    .needs = FR_NEEDS_UCX,
    .tie_rank = 2,
};

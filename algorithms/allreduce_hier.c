/* allreduce "hier", for several nodes with the same number of ranks each:
 * per chunk, a shared-memory reduce-scatter inside the node (local rank i
 * owns slice i), an allreduce of each slice across the nodes between
 * the ranks of the same local index (over UCX: recursive doubling or the
 * ring, by the rule's across= or by size; every node sends its
 * data across the network once, spread over all its ranks), and a
 * shared-memory allgather inside the node. Within a chunk the stages run
 * one after another; the ring overlaps its reductions with its transfers. */
#include "alg_util.h"
#include "shm.h"
#include "shm_steps.h"

#define HIER_CHUNK_DEFAULT ((uint64_t)4 * 1024 * 1024)
#define HIER_RING_CHUNK ((uint64_t)256 * 1024)
#define HIER_RD_MAX ((size_t)64 * 1024)

/* Same ranks per node on every node, and a segment where a node has more than one. */
static fr_status_t check(const fr_call_t *call, const struct fr_comm *comm)
{
    if (call->mem != FR_MEM_HOST || comm->nnodes < 2 || comm->size != comm->nnodes * comm->ppn)
        return FR_ERR_NOT_SUPPORTED;
    return comm->ppn == 1 || comm->shm ? FR_SUCCESS : FR_ERR_NOT_SUPPORTED;
}

/* The rank of local index @p local on node @p node. */
static int rank_at(const struct fr_comm *comm, int node, int local)
{
    for (int r = 0; r < comm->size; r++)
        if (comm->rank_node[r] == node && comm->rank_local[r] == local) return r;
    return -1;
}

/* Recursive doubling across a power-of-two number of nodes: log2(nodes)
 * exchanges of the whole slice, the lower node's operand first, so both
 * ends of every exchange compute the same bits. */
static fr_status_t across_rd(struct fr_comm *comm, const fr_call_t *call, char *buf, const char *src,
                             size_t count, unsigned tag)
{
    int n = comm->nnodes, me = comm->node, l = comm->local_rank;
    size_t bytes = count * fr_dtype_size(call->dtype);
    char *tmp = fr_comm_scratch(comm, bytes);
    if (!tmp) return FR_ERR_NO_MEMORY;
    const char *cur = src;
    for (int mask = 1, t = 0; mask < n; mask <<= 1, t++) {
        int p = me ^ mask;
        FR_CHECK(fr_alg_xchg(comm, rank_at(comm, p, l), cur, bytes, tmp, bytes, tag + (unsigned)t));
        fr_alg_reduce_ordered(buf, cur, tmp, p < me, count, call->dtype, call->op);
        cur = buf;
    }
    return FR_SUCCESS;
}

/* Allreduce of @p count elements of @p buf (input @p src) across the nodes,
 * among the ranks of this rank's local index: the rule's across=, else
 * recursive doubling for slices up to HIER_RD_MAX bytes and the ring above.
 * Recursive doubling needs a power-of-two node count; otherwise the ring. */
static fr_status_t across(struct fr_comm *comm, const fr_call_t *call, char *buf, const char *src,
                          size_t count, unsigned tag)
{
    int n = comm->nnodes, me = comm->node, l = comm->local_rank;
    size_t es = fr_dtype_size(call->dtype), off, maxlen;
    if (!count) return FR_SUCCESS;
    int rd = call->across == FR_ACROSS_RD || (call->across == FR_ACROSS_AUTO && count * es <= HIER_RD_MAX);
    if (rd && !(n & (n - 1))) return across_rd(comm, call, buf, src, count, tag);
    fr_block(count, n, 0, &off, &maxlen);
    size_t ce = HIER_RING_CHUNK / es < maxlen ? HIER_RING_CHUNK / es : maxlen;
    char *tmp = fr_comm_scratch(comm, 2 * ce * es);
    if (!tmp) return FR_ERR_NO_MEMORY;
    fr_ring_t g = {
        .pos = me, .n = n, .left = rank_at(comm, (me + n - 1) % n, l), .right = rank_at(comm, (me + 1) % n, l),
        .buf = buf, .src = src, .count = count, .elsize = es, .dtype = call->dtype, .op = call->op,
        .rs_steps = n - 1, .ag_steps = n - 1, .chunk = ce, .tmp = tmp, .tag = tag,
    };
    return fr_ring_run(comm, &g);
}

/* Between the shared-memory halves: this slice across the nodes, in place. */
static fr_status_t slice_across(struct fr_comm *comm, const fr_call_t *call, char *slice, size_t sl, unsigned k)
{
    return across(comm, call, slice, slice, sl, k * 2u * (unsigned)comm->nnodes);
}

static fr_status_t run(fr_call_t *call, struct fr_comm *comm)
{
    if (call->count == 0) return FR_SUCCESS;
    if (comm->ppn == 1) return across(comm, call, call->recvbuf, call->sendbuf, call->count, 0);
    return fr_shm_allreduce_chunks(comm, call, HIER_CHUNK_DEFAULT, slice_across);
}

const fr_alg_t fr_alg_allreduce_hier = {
    .name = "hier", .coll = FR_COLL_ALLREDUCE, .mem_types = FR_MEM_HOST, .check = check, .run = run,
    .desc = "several nodes of equal size: shared-memory reduce-scatter, ring allreduce of each slice "
            "across the nodes over UCX (across=rd|ring; default rd up to 64K per slice on a power-of-two "
            "node count), shared-memory allgather; chunk=4M (at most half of FASTREDUCE_SHM_SIZE)",
    .params = FR_PARAM_CHUNK | FR_PARAM_ACROSS, .chunk_def = HIER_CHUNK_DEFAULT,
};

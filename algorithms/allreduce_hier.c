/* allreduce "hier", for several nodes with the same number of ranks each:
 * per chunk, a shared-memory reduce-scatter inside the node (local rank i
 * owns slice i), an allreduce of each slice across the nodes between
 * the ranks of the same local index (over UCX: recursive doubling or the
 * ring, by the rule's across= or by size: without it recursive doubling
 * for slices up to 64K on a power-of-two node count; every node sends its
 * data across the network once, spread over all its ranks), and a
 * shared-memory allgather inside the node. Chunks are 4M (chunk=, at most a
 * third of FASTREDUCE_SHM_SIZE). With several chunks whose
 * slices cross by the ring, the network stage of one chunk runs under the
 * shared-memory steps of its neighbours (every slice then crosses by the
 * ring); the ring also overlaps its reductions with its transfers. Where the node's buffers come from
 * fr_mem_alloc, the node stages are zero-copy (shm_zcopy.h), chunk after
 * chunk. */
#include "alg_util.h"
#include "copy.h"
#include "recursive_doubling.h"
#include "ring_pass.h"
#include "shm.h"
#include "shm_steps.h"
#include "shm_zcopy.h"

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

/* The rank map's rank() across the nodes: the rank of this rank's local
 * index on node @p node. */
static int node_rank(const void *comm, int node)
{
    const struct fr_comm *c = comm;
    return rank_at(c, node, c->local_rank);
}

/* Recursive doubling across a power-of-two number of nodes, by node index
 * (the lower node's operand first), among the ranks of this local index. */
static fr_status_t across_rd(struct fr_comm *comm, const fr_call_t *call, char *buf, const char *src,
                             size_t count, unsigned tag)
{
    char *tmp = fr_comm_scratch(comm, count * fr_dtype_size(call->dtype));
    if (!tmp) return FR_ERR_INTERNAL;
    fr_rank_map_t map = {.n = comm->nnodes, .me = comm->node, .rank = node_rank, .arg = comm};
    return fr_rd_allreduce(comm, call, buf, src, count, tmp, &map, tag);
}

/* Whether a slice of @p count elements crosses the nodes by recursive
 * doubling: the rule's across=, else up to HIER_RD_MAX bytes; only on a
 * power-of-two node count (otherwise the ring). */
static int use_rd(const struct fr_comm *comm, const fr_call_t *call, size_t count)
{
    int n = comm->nnodes;
    int rd = call->across == FR_ACROSS_RD ||
             (call->across == FR_ACROSS_AUTO && count * fr_dtype_size(call->dtype) <= HIER_RD_MAX);
    return rd && !(n & (n - 1));
}

/* The most the stage across the nodes takes: a slice of recursive doubling
 * (HIER_RD_MAX unless across=rd) or two of the ring's chunks, for the
 * largest slice of this call (local rank 0's; the whole message at one
 * rank a node). Every node cuts its chunks alike (their slices cross
 * together), so the bound is alike on every rank. */
static size_t hier_scratch(const fr_call_t *call, const struct fr_comm *comm)
{
    size_t es = fr_dtype_size(call->dtype), most = call->count, off;
    if (comm->ppn > 1) {
        size_t cel = fr_shm_chunk_elems(comm, call, HIER_CHUNK_DEFAULT);
        fr_block(cel < most ? cel : most, comm->local_size, 0, &off, &most);
    }
    size_t bytes = most * es, ring = 2 * (bytes < HIER_RING_CHUNK ? bytes : HIER_RING_CHUNK), rd = 0;
    if (!(comm->nnodes & (comm->nnodes - 1)) && call->across != FR_ACROSS_RING)
        rd = call->across == FR_ACROSS_RD || bytes < HIER_RD_MAX ? bytes : HIER_RD_MAX;
    return ring > rd ? ring : rd;
}

/* The ring across the nodes for @p count (> 0) elements of @p buf (input
 * @p src), among the ranks of this rank's local index. */
static fr_status_t ring_setup(struct fr_comm *comm, const fr_call_t *call, char *buf, const char *src,
                              size_t count, unsigned tag, fr_ring_t *g)
{
    int n = comm->nnodes, me = comm->node, l = comm->local_rank;
    size_t es = fr_dtype_size(call->dtype), off, maxlen;
    fr_block(count, n, 0, &off, &maxlen);
    size_t ce = HIER_RING_CHUNK / es < maxlen ? HIER_RING_CHUNK / es : maxlen;
    char *tmp = fr_comm_scratch(comm, 2 * ce * es);
    if (!tmp) return FR_ERR_INTERNAL;
    *g = (fr_ring_t){
        .pos = me, .n = n, .left = rank_at(comm, (me + n - 1) % n, l), .right = rank_at(comm, (me + 1) % n, l),
        .buf = buf, .src = src, .count = count, .elsize = es, .dtype = call->dtype, .op = call->op,
        .rs_steps = n - 1, .ag_steps = n - 1, .chunk = ce, .tmp = tmp, .tag = tag,
    };
    return FR_SUCCESS;
}

/* The ring across the nodes, run to its end. */
static fr_status_t across_ring(struct fr_comm *comm, const fr_call_t *call, char *buf, const char *src,
                               size_t count, unsigned tag)
{
    fr_ring_t g;
    FR_CHECK(ring_setup(comm, call, buf, src, count, tag, &g));
    return fr_ring_run(comm, &g);
}

/* Allreduce of @p count elements of @p buf (input @p src) across the nodes. */
static fr_status_t across(struct fr_comm *comm, const fr_call_t *call, char *buf, const char *src,
                          size_t count, unsigned tag)
{
    if (!count) return FR_SUCCESS;
    if (use_rd(comm, call, count)) return across_rd(comm, call, buf, src, count, tag);
    return across_ring(comm, call, buf, src, count, tag);
}

/* Whether the copy path pipelines the call's chunks of @p cel elements:
 * several chunks whose largest slices cross by the ring. Then every
 * chunk's slices cross by the ring, the last chunk's small ones too. */
static int pipelines(const struct fr_comm *comm, const fr_call_t *call, size_t cel)
{
    size_t so, sl;
    if (call->count <= cel) return 0;
    fr_block(cel, comm->local_size, 0, &so, &sl);
    return !use_rd(comm, call, sl);
}

/* The step numbers of chunk k's network stage. */
static unsigned chunk_tag(const struct fr_comm *comm, size_t k)
{
    return (unsigned)k * 2u * (unsigned)comm->nnodes;
}

/* Between the shared-memory halves: this slice across the nodes, in place,
 * as the pipelined copy path sends it where the call pipelines: a node
 * whose buffers go zero-copy must cross as a node on the copy path does. */
static fr_status_t slice_across(struct fr_comm *comm, const fr_call_t *call, char *slice, size_t sl, unsigned k)
{
    if (sl && pipelines(comm, call, fr_shm_chunk_elems(comm, call, HIER_CHUNK_DEFAULT)))
        return across_ring(comm, call, slice, slice, sl, chunk_tag(comm, k));
    return across(comm, call, slice, slice, sl, chunk_tag(comm, k));
}

/* comm->bg while a chunk's ring runs under the shared-memory steps. */
static fr_status_t ring_bg(struct fr_comm *comm, void *arg)
{
    return fr_ring_advance(comm, (fr_ring_prog_t *)arg, 0);
}

/* The chunks with their network stages overlapped: chunk k's ring runs
 * under the reduce-scatter of chunk k+1 and the allgather of chunk k-1.
 * Every rank goes RS(k), finish ring(k-1), start ring(k), AG(k-1), so three
 * chunks are in the segment at once (shm.h). */
static fr_status_t pipelined(fr_call_t *call, struct fr_comm *comm, size_t cel)
{
    fr_copy_fn copy_out = fr_shm_copy_for(comm, call);
    const size_t es = fr_dtype_size(call->dtype), nch = (call->count + cel - 1) / cel;
    fr_ring_prog_t x;
    char *prev_recv = NULL;
    size_t prev_n = 0;
    uint64_t prev_R = 0;
    for (size_t k = 0; k <= nch; k++) {
        size_t off = k * cel, n = 0, so, sl = 0;
        char *slice = NULL;
        uint64_t R = 0;
        if (k < nch) {
            n = call->count - off < cel ? call->count - off : cel;
            FR_CHECK(fr_shm_rs_chunk(comm, call, (const char *)call->sendbuf + off * es, n, NULL, &slice, &R, &so,
                                         &sl));
        }
        if (k > 0) {
            comm->bg = NULL;
            FR_CHECK(fr_ring_advance(comm, &x, 1));
        }
        if (k < nch) {
            fr_ring_t g = {.count = 0};
            if (sl) FR_CHECK(ring_setup(comm, call, slice, slice, sl, chunk_tag(comm, k), &g));
            FR_CHECK(fr_ring_start(comm, &g, &x));
            comm->bg = ring_bg;
            comm->bg_arg = &x;
        }
        if (k > 0) FR_CHECK(fr_shm_ag_chunk(comm, call, prev_recv, prev_n, prev_R, 0, copy_out));
        prev_recv = (char *)call->recvbuf + off * es;
        prev_n = n;
        prev_R = R;
    }
    return FR_SUCCESS;
}

static fr_status_t run(fr_call_t *call, struct fr_comm *comm)
{
    if (call->count == 0) return FR_SUCCESS;
    if (comm->ppn == 1) return across(comm, call, call->recvbuf, call->sendbuf, call->count, 0);
    size_t cel = fr_shm_chunk_elems(comm, call, HIER_CHUNK_DEFAULT);
    /* the node stages zero-copy where the node's buffers allow (the same
     * slices cross the nodes either way, so nodes may choose differently) */
    if (fr_shm_zc_allreduce_size(comm, call)) {
        int done;
        FR_CHECK(fr_shm_zc_allreduce(comm, call, cel, 1, slice_across, &done));
        if (done) return FR_SUCCESS;
    }
    /* one chunk, or slices that cross by recursive doubling: in sequence
     * (the slice of local rank 0 is a largest one) */
    if (!pipelines(comm, call, cel)) return fr_shm_allreduce_chunks(comm, call, HIER_CHUNK_DEFAULT, slice_across);
    fr_status_t st = pipelined(call, comm, cel);
    comm->bg = NULL;
    return st;
}

const fr_alg_t fr_alg_allreduce_hier = {
    .name = "hier", .coll = FR_COLL_ALLREDUCE, .mem_types = FR_MEM_HOST, .check = check, .run = run,
    .scratch = hier_scratch,
    .desc = "several nodes: shared memory inside each node, a ring or recursive doubling across (UCX)",
    /* (not four times the default chunk: past 4M, the largest chunk the tuner tries) */
    .params = { { FR_PARAM_CHUNK, { HIER_CHUNK_DEFAULT / 4 } },
                { FR_PARAM_ACROSS, { FR_ACROSS_RING, FR_ACROSS_RD } } },
    .chunk_def = HIER_CHUNK_DEFAULT,
    .needs = FR_NEEDS_UCX,
    .traits = FR_ALG_NODES | FR_ALG_EQUAL_NODES | FR_ALG_SHM, .tie_rank = 5,
};

/* bcast "hier", for several nodes (of any sizes): per chunk, a binomial
 * tree across the nodes over UCX between one rank per node (the root on its
 * node, local rank 0 elsewhere), then the shm bcast inside each node from
 * that rank. A rank forwards a chunk to its child nodes without waiting,
 * so those sends overlap its node's shared-memory stage. Where that rank's
 * buffer is fr_mem_alloc's, the node's other ranks copy each chunk from it
 * as it lands (shm_zcopy.h). Chunks are 512K
 * (chunk=, at most a 2-rank node's shm bcast slot less its 64-byte header). */
#include "alg_util.h"
#include "copy.h"
#include "shm.h"
#include "shm_steps.h"
#include "shm_zcopy.h"

#define HIER_BCAST_CHUNK ((uint64_t)512 * 1024)
#define MAX_CHILDREN 32

static fr_status_t check(const fr_call_t *call, const struct fr_comm *comm)
{
    return call->mem == FR_MEM_HOST && comm->nnodes >= 2 ? FR_SUCCESS : FR_ERR_NOT_SUPPORTED;
}

/* The rank that speaks for node @p node: the root on its node, else local rank 0. */
static int leader(const struct fr_comm *comm, int node, int root)
{
    if (comm->rank_node[root] == node) return root;
    for (int r = 0; r < comm->size; r++)
        if (comm->rank_node[r] == node && comm->rank_local[r] == 0) return r;
    return -1;
}

static fr_status_t run(fr_call_t *call, struct fr_comm *comm)
{
    if (call->bytes == 0) return FR_SUCCESS;
    const int nn = comm->nnodes, rn = comm->rank_node[call->root];
    const int vr = (comm->node - rn + nn) % nn;
    const int me_leader = leader(comm, comm->node, call->root) == comm->rank;
    const int src_local = comm->rank_local[leader(comm, comm->node, call->root)];
    size_t chunk = call->chunk ? call->chunk : HIER_BCAST_CHUNK;
    /* the same cap on every node, whatever its size */
    if (chunk > fr_shm_bcast_cap(comm)) chunk = fr_shm_bcast_cap(comm);
    fr_copy_fn copy_out = fr_shm_copy_for(comm, call);
    char *data = call->recvbuf;
    unsigned step = 0;
    /* the node stage zero-copy where the leader's buffer allows (nodes may differ: the network stage is the same) */
    fr_zc_stream_t z = {.on = 0};
    const size_t nchunks = (call->bytes + chunk - 1) / chunk;
    if (comm->local_size > 1 && fr_shm_zc_bcast_size(comm, call))
        FR_CHECK(fr_shm_zc_stream_start(comm, call, src_local, nchunks, &z));
    if (z.on && me_leader && !vr) fr_shm_zc_stream_ready(comm, &z, nchunks);   /* (the root has them all) */
    for (size_t off = 0; off < call->bytes; off += chunk, step++) {
        size_t n = call->bytes - off < chunk ? call->bytes - off : chunk;
        fr_req_t rq[MAX_CHILDREN];
        int nrq = 0;
        if (me_leader) {
            int low = 1;
            while (low < nn && !(vr & low)) low <<= 1;   /* vr's lowest set bit (nn for vr 0) */
            if (vr) FR_CHECK(fr_p2p_recv(comm, leader(comm, (vr - low + rn) % nn, call->root), data + off, n,
                                         FR_ALG_STEP(step)));
            for (int m = low >> 1; m >= 1; m >>= 1)
                if (vr + m < nn && nrq < MAX_CHILDREN) {
                    rq[nrq] = (fr_req_t)FR_REQ_INIT;
                    FR_CHECK(fr_p2p_isend(comm, leader(comm, (vr + m + rn) % nn, call->root), FR_ALG_STEP(step),
                                          data + off, n, &rq[nrq]));
                    nrq++;
                }
        }
        if (z.on && me_leader && vr) fr_shm_zc_stream_ready(comm, &z, step + 1);
        else if (z.on && !me_leader) FR_CHECK(fr_shm_zc_stream_copy(comm, &z, step, data, off, n, copy_out));
        else if (!z.on && comm->local_size > 1)
            FR_CHECK(fr_shm_bcast_chunk(comm, src_local, data + off, n, call->bytes, copy_out));
        if (nrq) FR_CHECK(fr_p2p_wait(comm, rq, nrq));
    }
    if (z.on) FR_CHECK(fr_shm_zc_stream_end(comm, &z));
    call->zcopy = z.on;
    return FR_SUCCESS;
}

const fr_alg_t fr_alg_bcast_hier = {
    .name = "hier", .coll = FR_COLL_BCAST, .mem_types = FR_MEM_HOST, .check = check, .run = run,
    .desc = "several nodes: a binomial tree across the nodes (UCX), then shared memory inside each",
    .params = { { FR_PARAM_CHUNK, { HIER_BCAST_CHUNK / 4, HIER_BCAST_CHUNK * 4 } } },
    .chunk_def = HIER_BCAST_CHUNK,
    .needs = FR_NEEDS_UCX,
    .traits = FR_ALG_NODES | FR_ALG_SHM, .tie_rank = 4,
};

/* Pipelined chain broadcast: the message is cut into chunks that flow from
 * the root through the ranks in ring order (root, root+1, ...); each rank
 * keeps several receives posted and forwards a chunk as soon as it lands, so
 * all links carry different chunks at once. Time ~ (n - 1 + chunks) chunk
 * transfers: suits large messages. */
#include "alg_util.h"

#define PIPE_CHUNK_DEFAULT ((uint64_t)256 * 1024)
#define PIPE_DEPTH         4     /* receives (and sends) in flight per rank */
#define PIPE_STEP          0

static fr_status_t pipe_run(fr_call_t *call, struct fr_comm *comm)
{
    int n = comm->size, r = comm->rank;
    if (call->count == 0 || n == 1) return FR_SUCCESS;
    size_t es = fr_dtype_size(call->dtype);
    size_t ce = fr_alg_chunk_elems(call, PIPE_CHUNK_DEFAULT, es, call->count);
    size_t m = (call->count + ce - 1) / ce;
    int vr = (r - call->root + n) % n;
    int prev = vr > 0 ? (r + n - 1) % n : -1, next = vr < n - 1 ? (r + 1) % n : -1;
    char *buf = call->recvbuf;
    fr_req_t rr[PIPE_DEPTH], sr[PIPE_DEPTH];
    for (int i = 0; i < PIPE_DEPTH; i++) rr[i] = sr[i] = (fr_req_t)FR_REQ_INIT;
#define CHUNK_LEN(c) ((call->count - (c) * ce < ce ? call->count - (c) * ce : ce) * es)

    if (prev >= 0)
        for (size_t c = 0; c < m && c < PIPE_DEPTH; c++)
            FR_CHECK(fr_p2p_irecv(comm, prev, PIPE_STEP, buf + c * ce * es, CHUNK_LEN(c), &rr[c]));
    for (size_t c = 0; c < m; c++) {
        if (prev >= 0) {
            FR_CHECK(fr_p2p_wait(comm, &rr[c % PIPE_DEPTH], 1));
            size_t nc = c + PIPE_DEPTH;
            if (nc < m)
                FR_CHECK(fr_p2p_irecv(comm, prev, PIPE_STEP, buf + nc * ce * es, CHUNK_LEN(nc),
                                      &rr[c % PIPE_DEPTH]));
        }
        if (next >= 0) {
            FR_CHECK(fr_p2p_wait(comm, &sr[c % PIPE_DEPTH], 1));
            FR_CHECK(fr_p2p_isend(comm, next, PIPE_STEP, buf + c * ce * es, CHUNK_LEN(c),
                                  &sr[c % PIPE_DEPTH]));
        }
    }
#undef CHUNK_LEN
    return fr_p2p_wait(comm, sr, PIPE_DEPTH);
}

const fr_alg_t fr_alg_bcast_pipeline = {
    .name = "pipeline",
    .coll = FR_COLL_BCAST,
    .mem_types = FR_MEM_HOST,
    .check = fr_alg_check_host,
    .run = pipe_run,
    .desc = "chunked chain from the root through the ranks in ring order, 4 chunks in flight per link",
    .params = { { FR_PARAM_CHUNK, { PIPE_CHUNK_DEFAULT / 4, PIPE_CHUNK_DEFAULT * 4 } } },
    .chunk_def = PIPE_CHUNK_DEFAULT,
    .needs = FR_NEEDS_UCX,
    .tie_rank = 1,
};

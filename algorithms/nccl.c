/* The NCCL algorithms of device buffers: one backend, several names.
 *   allreduce nccl       NCCL's own choice of algorithm and protocol
 *   allreduce nccl_ring  NCCL's ring, forced through fastreduce's tuner plugin
 *   allreduce nccl_tree  NCCL's tree, likewise
 *   bcast     nccl       NCCL's broadcast (its only algorithm is a ring)
 *   bcast     nccl_ring  the same, named as the table names it
 * proto=ll|ll128|simple (the _ring and _tree names) picks NCCL's protocol too. They decline host
 * buffers, a communicator without NCCL, the ring/tree names when the plugin
 * does not steer NCCL, and integer avg (NCCL's integer average rounds
 * otherwise than ours; the staged path gives ours). They live in one file
 * because they are one call into NCCL that differs only in the hint.
 * On a communicator of one rank every collective is a copy, which they
 * enqueue themselves: NCCL's one-rank reduction kernel before 2.29.7 leaves
 * the tail of an out-of-place average unwritten (NVIDIA/nccl#1950; seen here
 * with 2.28.3, float64, 65537 elements, on an H200). */
#include "config.h"
#include "alg.h"
#include "device.h"
#include "log.h"
#include "nccl_plugin.h"
#ifdef FR_HAVE_NCCL
#include <nccl.h>

static int nccl_type(fr_dtype_t t, ncclDataType_t *out)
{
    static const int map[FR_DTYPE_COUNT] = {
        [FR_INT8] = ncclInt8, [FR_UINT8] = ncclUint8, [FR_INT32] = ncclInt32, [FR_UINT32] = ncclUint32,
        [FR_INT64] = ncclInt64, [FR_UINT64] = ncclUint64, [FR_FLOAT16] = ncclFloat16,
        [FR_BFLOAT16] = ncclBfloat16, [FR_FLOAT32] = ncclFloat32, [FR_FLOAT64] = ncclFloat64,
    };
    if ((unsigned)t >= FR_DTYPE_COUNT) return 0;
    *out = (ncclDataType_t)map[t];
    return 1;
}

static int is_float(fr_dtype_t t)
{
    return t == FR_FLOAT16 || t == FR_BFLOAT16 || t == FR_FLOAT32 || t == FR_FLOAT64;
}

static int nccl_op(fr_op_t op, fr_dtype_t t, ncclRedOp_t *out)
{
    switch (op) {
    case FR_SUM: *out = ncclSum; return 1;
    case FR_PROD: *out = ncclProd; return 1;
    case FR_MIN: *out = ncclMin; return 1;
    case FR_MAX: *out = ncclMax; return 1;
    case FR_AVG: *out = ncclAvg; return is_float(t);
    default: return 0;
    }
}

/* steered: the ring/tree names, which need the plugin */
static fr_status_t check(const fr_call_t *call, const struct fr_comm *comm, int steered)
{
    ncclDataType_t t;
    ncclRedOp_t o;
    /* (nccl_state 0, not set up yet, is only seen by the algorithm queries:
     * a call sets NCCL up before it chooses; they answer as if it comes up) */
    if (call->mem != FR_MEM_CUDA || comm->nccl_state < 0 || !nccl_type(call->dtype, &t)) return FR_ERR_NOT_SUPPORTED;
    if (call->coll == FR_COLL_ALLREDUCE && !nccl_op(call->op, call->dtype, &o)) return FR_ERR_NOT_SUPPORTED;
    if (steered && comm->nccl_state == 1 && !comm->nccl_tuned) return FR_ERR_NOT_SUPPORTED;
    return FR_SUCCESS;
}

static fr_status_t run(fr_call_t *call, struct fr_comm *comm, int algo)
{
    if (comm->size == 1) {
        const void *src = call->coll == FR_COLL_ALLREDUCE ? call->sendbuf : call->recvbuf;
        FR_CHECK(fr_device_copy_async(call->recvbuf, src, call->bytes, call->stream));
        return call->async ? FR_SUCCESS : fr_device_wait_nccl(comm, call->stream);
    }
    ncclDataType_t t = ncclInt8;
    ncclRedOp_t o = ncclSum;
    nccl_type(call->dtype, &t);
    if (call->coll == FR_COLL_ALLREDUCE) nccl_op(call->op, call->dtype, &o);
    fr_nccl_hint_set(algo, call->proto);
    ncclResult_t r = call->coll == FR_COLL_ALLREDUCE ?
        ncclAllReduce(call->sendbuf, call->recvbuf, call->count, t, o, (ncclComm_t)comm->nccl,
                      (cudaStream_t)call->stream) :
        ncclBroadcast(call->recvbuf, call->recvbuf, call->count, t, call->root, (ncclComm_t)comm->nccl,
                      (cudaStream_t)call->stream);
    fr_nccl_hint_clear();
    if (r != ncclSuccess)
        return FR_ERROR(FR_ERR_CUDA, "%s: %s (%s)", call->coll == FR_COLL_ALLREDUCE ? "ncclAllReduce" : "ncclBroadcast",
                        ncclGetErrorString(r), ncclGetLastError((ncclComm_t)comm->nccl));
    return call->async ? FR_SUCCESS : fr_device_wait_nccl(comm, call->stream);
}

#else

static fr_status_t check(const fr_call_t *call, const struct fr_comm *comm, int steered)
{
    return FR_ERR_NOT_SUPPORTED;
}

static fr_status_t run(fr_call_t *call, struct fr_comm *comm, int algo)
{
    return FR_ERROR(FR_ERR_NOT_SUPPORTED, "libfastreduce was built without NCCL");
}

#endif

static fr_status_t check_own(const fr_call_t *c, const struct fr_comm *m) { return check(c, m, 0); }
static fr_status_t check_steered(const fr_call_t *c, const struct fr_comm *m) { return check(c, m, 1); }
static fr_status_t run_own(fr_call_t *c, struct fr_comm *m) { return run(c, m, FR_NCCL_ALGO_NCCL); }
static fr_status_t run_ring(fr_call_t *c, struct fr_comm *m) { return run(c, m, fr_nccl_algo_of("nccl_ring")); }
static fr_status_t run_tree(fr_call_t *c, struct fr_comm *m) { return run(c, m, fr_nccl_algo_of("nccl_tree")); }

/* proto= of the steered names, and every protocol for the tuner to try */
#define PROTOS { FR_PARAM_PROTO, { FR_PROTO_LL, FR_PROTO_LL128, FR_PROTO_SIMPLE } }

const fr_alg_t fr_alg_allreduce_nccl = {
    .name = "nccl", .coll = FR_COLL_ALLREDUCE, .mem_types = FR_MEM_CUDA, .check = check_own, .run = run_own,
    .desc = "ncclAllReduce with NCCL's own choice of algorithm and protocol",
    .tie_rank = 0,   /* a tie keeps NCCL deciding */
};
const fr_alg_t fr_alg_allreduce_nccl_ring = {
    .name = "nccl_ring", .coll = FR_COLL_ALLREDUCE, .mem_types = FR_MEM_CUDA, .check = check_steered,
    .run = run_ring, .desc = "NCCL's ring, forced through fastreduce's tuner plugin",
    .params = { PROTOS }, .tie_rank = 1,
};
const fr_alg_t fr_alg_allreduce_nccl_tree = {
    .name = "nccl_tree", .coll = FR_COLL_ALLREDUCE, .mem_types = FR_MEM_CUDA, .check = check_steered,
    .run = run_tree, .desc = "NCCL's tree, forced through fastreduce's tuner plugin",
    .params = { PROTOS }, .tie_rank = 2,
};
const fr_alg_t fr_alg_bcast_nccl = {
    .name = "nccl", .coll = FR_COLL_BCAST, .mem_types = FR_MEM_CUDA, .check = check_own, .run = run_own,
    .desc = "ncclBroadcast with NCCL's own choice of protocol (its broadcast is a ring)",
    .tie_rank = 0,
};
const fr_alg_t fr_alg_bcast_nccl_ring = {
    .name = "nccl_ring", .coll = FR_COLL_BCAST, .mem_types = FR_MEM_CUDA, .check = check_steered,
    .run = run_ring, .desc = "ncclBroadcast, its ring and proto= forced through the plugin",
    .params = { PROTOS }, .tie_rank = 1,
};

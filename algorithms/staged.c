/* "staged" (allreduce and bcast of device buffers): copy to pinned host
 * memory, run the host algorithm the table picks there, copy back. What
 * serves a device buffer when NCCL cannot: a build without NCCL, an op
 * NCCL rounds otherwise (integer avg), a communicator whose NCCL set-up
 * failed. It waits for the stream's earlier work and returns when done,
 * also from the *_stream calls; the ranks agree that every one staged its
 * input (one small MPI_Allreduce) before the host call. */
#include <string.h>
#include "alg.h"
#include "device.h"
#include "agree.h"
#include "log.h"
#include "wait.h"

static fr_status_t check(const fr_call_t *call, const struct fr_comm *comm)
{
    (void)comm;
    return call->mem == FR_MEM_CUDA ? FR_SUCCESS : FR_ERR_NOT_SUPPORTED;
}

static fr_status_t run(fr_call_t *call, struct fr_comm *comm)
{
    char *h = fr_device_stage(comm, call->bytes);
    fr_call_t host = *call;
    host.mem = FR_MEM_HOST;
    host.sendbuf = host.recvbuf = h;
    host.stream = NULL;
    host.async = 0;
    int in = call->coll == FR_COLL_ALLREDUCE || comm->rank == call->root;
    fr_status_t st = !h ? FR_ERR_NO_MEMORY : in ? fr_device_copy(h, call->sendbuf, call->bytes, call->stream)
                                               : fr_device_sync(call->stream);
    /* a rank that cannot stage must not leave the others in the host call */
    st = fr_agree_bounded(comm, st, "staging a device buffer in host memory");
    /* (every rank has the same outcome, unless the agreement itself timed out) */
    if (st != FR_SUCCESS) { call->agreed = !comm->broken; return st; }
    st = comm->run_host(comm, &host);
    /* (the host call failed alike everywhere, before moving data, unless it broke the communicator) */
    if (st != FR_SUCCESS) { call->agreed = !comm->broken; return st; }
    if (call->coll == FR_COLL_BCAST && comm->rank == call->root) return FR_SUCCESS;
    return fr_device_copy(call->recvbuf, h, call->bytes, call->stream);
}

/* It serves every device call; it is never a tuner candidate (never faster
 * than the host algorithm it runs), so its tie rank is after every other. */
#define TRAITS (FR_ALG_VIA_HOST | FR_ALG_LAST_RESORT)

const fr_alg_t fr_alg_allreduce_staged = {
    .name = "staged", .coll = FR_COLL_ALLREDUCE, .mem_types = FR_MEM_CUDA, .check = check, .run = run,
    .desc = "device buffers through pinned host memory and the host algorithm the table picks",
    .traits = TRAITS, .tie_rank = 8,
};
const fr_alg_t fr_alg_bcast_staged = {
    .name = "staged", .coll = FR_COLL_BCAST, .mem_types = FR_MEM_CUDA, .check = check, .run = run,
    .desc = "device buffers through pinned host memory and the host algorithm the table picks",
    .traits = TRAITS, .tie_rank = 8,
};

/* Binomial-tree broadcast: ranks are numbered relative to the root; a rank
 * receives the whole message from the rank that differs in its lowest set
 * bit, then sends it to the ranks vr + 2^j below that bit, largest subtree
 * first. log2(n) rounds; suits small messages. */
#include "alg_util.h"
#include "binomial.h"

#define BINOMIAL_STEP 0

/* Every subtree gets the whole message. */
static void whole(const fr_call_t *call, int n, int lo, int hi, size_t *off, size_t *len)
{
    (void)n; (void)lo; (void)hi;
    *off = 0;
    *len = call->bytes;
}

static fr_status_t binomial_run(fr_call_t *call, struct fr_comm *comm)
{
    if (call->bytes == 0 || comm->size == 1) return FR_SUCCESS;
    return fr_binomial_pass(comm, call, call->recvbuf, whole, BINOMIAL_STEP);
}

const fr_alg_t fr_alg_bcast_binomial = {
    .name = "binomial",
    .coll = FR_COLL_BCAST,
    .mem_types = FR_MEM_HOST,
    .check = fr_alg_check_host,
    .run = binomial_run,
    .desc = "binomial tree from the root, the whole message on every edge, log2(n) rounds",
    .needs = FR_NEEDS_UCX,
    .tie_rank = 0,
};

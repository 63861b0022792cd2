/* Binomial-tree broadcast: ranks are numbered relative to the root; a rank
 * receives the whole message from the rank that differs in its lowest set
 * bit, then sends it to the ranks vr + 2^j below that bit, largest subtree
 * first. log2(n) rounds; suits small messages. */
#include "alg_util.h"

#define BINOMIAL_STEP 0

static fr_status_t binomial_check(const fr_call_t *call, const struct fr_comm *comm)
{
    return fr_alg_check_host(call, comm);
}

static fr_status_t binomial_run(fr_call_t *call, struct fr_comm *comm)
{
    int n = comm->size, root = call->root;
    if (call->bytes == 0 || n == 1) return FR_SUCCESS;
    int vr = (comm->rank - root + n) % n, mask = 1;
    while (mask < n) {
        if (vr & mask) {
            FR_CHECK(fr_p2p_recv(comm, (vr - mask + root) % n, call->recvbuf, call->bytes, BINOMIAL_STEP));
            break;
        }
        mask <<= 1;
    }
    fr_req_t rq[32];
    int nr = 0;
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (vr + mask >= n) continue;
        rq[nr] = (fr_req_t)FR_REQ_INIT;
        FR_CHECK(fr_p2p_isend(comm, (vr + mask + root) % n, BINOMIAL_STEP, call->recvbuf, call->bytes,
                              &rq[nr]));
        nr++;
    }
    return fr_p2p_wait(comm, rq, nr);
}

const fr_alg_t fr_alg_bcast_binomial = {
    .name = "binomial",
    .coll = FR_COLL_BCAST,
    .mem_types = FR_MEM_HOST,
    .check = binomial_check,
    .run = binomial_run,
    .desc = "binomial tree from the root, the whole message on every edge, log2(n) rounds; "
            "no parameters",
};

/* The binomial tree pass (binomial.h). */
#include "binomial.h"
#include "alg_util.h"

fr_status_t fr_binomial_pass(struct fr_comm *comm, const fr_call_t *call, char *buf,
                             fr_subtree_fn range, unsigned step)
{
    int n = comm->size, root = call->root, vr = (comm->rank - root + n) % n, mask = 1;
    size_t off, len;
    for (; mask < n; mask <<= 1) {
        if (!(vr & mask)) continue;
        range(call, n, vr, vr + mask, &off, &len);
        if (len) FR_CHECK(fr_p2p_recv(comm, (vr - mask + root) % n, buf + off, len, step));
        break;
    }
    fr_req_t rq[32];
    int nr = 0;
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (vr + mask >= n) continue;
        range(call, n, vr + mask, vr + 2 * mask, &off, &len);
        if (!len) continue;
        rq[nr] = (fr_req_t)FR_REQ_INIT;
        FR_CHECK(fr_p2p_isend(comm, (vr + mask + root) % n, step, buf + off, len, &rq[nr]));
        nr++;
    }
    return fr_p2p_wait(comm, rq, nr);
}

/* Helpers shared by the point-to-point algorithms (header only, all static
 * inline): defaults and chunk sizes, and the binomial tree pass. The
 * non-power-of-two fold is in fold.h, the chunked ring pass in ring_pass.h. */
#ifndef FR_ALG_UTIL_H
#define FR_ALG_UTIL_H

#include <stdint.h>
#include <string.h>
#include "comm.h"
#include "p2p.h"
#include "reduce.h"
#include "log.h"

/* Step numbers are 16 bits (p2p.h). */
#define FR_ALG_STEP(s) ((unsigned)(s) & 0xFFFFu)

/* check() of every point-to-point algorithm: host memory only. */
static inline fr_status_t fr_alg_check_host(const fr_call_t *call, const struct fr_comm *comm)
{
    (void)comm;
    return call->mem == FR_MEM_HOST ? FR_SUCCESS : FR_ERR_NOT_SUPPORTED;
}

/* check() of the shm algorithms: host memory on a single node (or one rank,
 * where there is nothing to share). */
static inline fr_status_t fr_alg_check_shm(const fr_call_t *call, const struct fr_comm *comm)
{
    if (call->mem != FR_MEM_HOST || comm->nnodes != 1) return FR_ERR_NOT_SUPPORTED;
    return comm->size == 1 || comm->shm ? FR_SUCCESS : FR_ERR_NOT_SUPPORTED;
}

/* Elements per chunk: the rule's chunk= (bytes) or @p def_bytes, at least one
 * element and at most @p max elements (max > 0). */
static inline size_t fr_alg_chunk_elems(const fr_call_t *call, uint64_t def_bytes, size_t elsize,
                                        size_t max)
{
    uint64_t b = call->chunk ? call->chunk : def_bytes;
    uint64_t e = b / (elsize ? elsize : 1);
    if (e == 0) e = 1;
    if (e > (uint64_t)max) e = (uint64_t)max;
    return (size_t)e;
}

/* Allreduce output = input (used when there is nothing to combine). */
static inline void fr_alg_copy_input(fr_call_t *call)
{
    if (call->bytes && call->sendbuf != call->recvbuf)
        memcpy(call->recvbuf, call->sendbuf, call->bytes);
}

/* Exchange with one peer, skipping a zero-length side (both ends compute the
 * same lengths, so they skip the same messages). */
static inline fr_status_t fr_alg_xchg(struct fr_comm *comm, int peer, const void *sbuf, size_t slen,
                                      void *rbuf, size_t rlen, unsigned step)
{
    if (!slen && !rlen) return FR_SUCCESS;
    return fr_p2p_sendrecv(comm, slen ? peer : -1, sbuf, slen, rlen ? peer : -1, rbuf, rlen,
                           FR_ALG_STEP(step));
}

/* out = a OP b with the operand of the lower rank first, so that the two
 * ends of an exchange compute bit-identical values even for NaN payloads. */
static inline void fr_alg_reduce_ordered(void *out, const void *mine, const void *theirs,
                                         int theirs_lower, size_t count, fr_dtype_t dt, fr_op_t op)
{
    if (theirs_lower) fr_reduce3(out, theirs, mine, count, dt, op);
    else fr_reduce3(out, mine, theirs, count, dt, op);
}

/* The bytes a binomial subtree of relative ranks [lo, hi) needs (hi may
 * pass n). */
typedef void (*fr_subtree_fn)(const fr_call_t *call, int n, int lo, int hi, size_t *off, size_t *len);

/* One pass down a binomial tree rooted at call->root, over ranks relative to
 * the root: a rank receives its subtree's bytes from the rank that differs in
 * its lowest set bit, then sends each child subtree its bytes, largest first.
 * Empty ranges are not sent (both ends compute the same lengths). */
static inline fr_status_t fr_binomial_pass(struct fr_comm *comm, const fr_call_t *call, char *buf,
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

#endif

/* Small helpers shared by the point-to-point algorithms (header only, all
 * static inline): the check() functions, chunk sizes, the copy for nothing
 * to combine, an exchange with one peer and the ordered reduction. The
 * shared patterns have units of their own: fold.h, ring_pass.h, binomial.h
 * and recursive_doubling.h. */
#ifndef FR_ALG_UTIL_H
#define FR_ALG_UTIL_H

#include <stdint.h>
#include <string.h>
#include "alg.h"
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

/* fr_alg_t.scratch of the algorithms that take a whole message of scratch
 * (none where there is nothing to combine). */
static inline size_t fr_alg_scratch_message(const fr_call_t *call, const struct fr_comm *comm)
{
    return call->count && comm->size > 1 ? call->bytes : 0;
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

#endif

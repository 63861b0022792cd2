/* Helpers shared by the point-to-point algorithms (header only, all static
 * inline): defaults and chunk sizes, a chunked ring pass used by ring
 * allreduce (reduce-scatter + allgather) and scatter_allgather bcast, and
 * the binomial tree pass. The non-power-of-two fold is in fold.h. */
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

/* ---- chunked ring pass -----------------------------------------------------
 * The vector of @p count elements is cut into n blocks with fr_block(); block
 * i belongs to ring position i. At step t a rank sends block (pos - t) to the
 * right and receives block (pos - t - 1) from the left. The first rs_steps
 * steps reduce what arrives into buf (reduce-scatter: after n-1 of them
 * position pos holds block pos+1 complete); the next ag_steps steps only
 * copy (allgather). Each step is cut into m chunks of at most @p chunk
 * elements (chunk k of every block at the same element offset, so both ends
 * agree; empty chunks are skipped). Round g = (step, chunk) is posted before
 * round g-1 is reduced, so the reduction of one chunk overlaps the transfer of
 * the next. Step t uses step number tag + t (mod 2^16); the chunks of one
 * step share it, which is safe because UCX keeps their order. */
typedef struct fr_ring {
    int         pos, n;        /* place in the ring, ring length (>= 2) */
    int         left, right;   /* communicator ranks of the neighbours */
    char       *buf;           /* the vector */
    const char *src;           /* reduce-scatter input (== buf when in place) */
    size_t      count, elsize;
    fr_dtype_t  dtype;
    fr_op_t     op;
    int         rs_steps, ag_steps;
    size_t      chunk;         /* elements per chunk, >= 1 */
    char       *tmp;           /* 2 * chunk elements when rs_steps > 0 */
    unsigned    tag;
} fr_ring_t;

static inline int fr_ring_mod(long v, int n)
{
    long r = v % n;
    return (int)(r < 0 ? r + n : r);
}

/* Element range of chunk k of block b. */
static inline void fr_ring_chunk(const fr_ring_t *g, int b, size_t k, size_t *off, size_t *len)
{
    size_t bo, bl, lo = k * g->chunk;
    fr_block(g->count, g->n, b, &bo, &bl);
    if (lo >= bl) { *off = bo + bl; *len = 0; return; }
    *off = bo + lo;
    *len = bl - lo < g->chunk ? bl - lo : g->chunk;
}

/* Start round @p g (of m chunks per step): rq[0] receive, rq[1] send. */
static inline fr_status_t fr_ring_post(struct fr_comm *comm, const fr_ring_t *g, size_t round,
                                       size_t m, fr_req_t *rq)
{
    int t = (int)(round / m);
    size_t k = round % m, so, sl, ro, rl, es = g->elsize;
    int red = t < g->rs_steps;
    unsigned tag = FR_ALG_STEP(g->tag + (unsigned)t);
    fr_ring_chunk(g, fr_ring_mod((long)g->pos - t, g->n), k, &so, &sl);
    fr_ring_chunk(g, fr_ring_mod((long)g->pos - t - 1, g->n), k, &ro, &rl);
    if (rl) {
        void *dst = red ? g->tmp + (round % 2) * g->chunk * es : g->buf + ro * es;
        FR_CHECK(fr_p2p_irecv(comm, g->left, tag, dst, rl * es, &rq[0]));
    }
    if (sl) {
        const char *s = (red && t == 0) ? g->src : g->buf;
        FR_CHECK(fr_p2p_isend(comm, g->right, tag, s + so * es, sl * es, &rq[1]));
    }
    return FR_SUCCESS;
}

/* Finish round @p g: reduce the received chunk during reduce-scatter. */
static inline void fr_ring_compute(const fr_ring_t *g, size_t round, size_t m)
{
    int t = (int)(round / m);
    size_t ro, rl, es = g->elsize;
    if (t >= g->rs_steps) return;
    fr_ring_chunk(g, fr_ring_mod((long)g->pos - t - 1, g->n), round % m, &ro, &rl);
    if (rl)
        fr_reduce3(g->buf + ro * es, g->src + ro * es, g->tmp + (round % 2) * g->chunk * es, rl,
                   g->dtype, g->op);
}

/* A ring pass that runs while other work is done: fr_ring_start posts its
 * first round, fr_ring_advance moves it on (waiting, or only as far as
 * the transfers already done allow); it is finished when r == total. */
typedef struct fr_ring_prog {
    fr_ring_t g;
    size_t    m, total, r;   /* chunks per step, rounds, the round in flight */
    fr_req_t  rq[2][2];
} fr_ring_prog_t;

static inline fr_status_t fr_ring_start(struct fr_comm *comm, const fr_ring_t *g, fr_ring_prog_t *x)
{
    size_t off, maxlen;
    int steps = g->rs_steps + g->ag_steps;
    *x = (fr_ring_prog_t){.g = *g, .rq = {{FR_REQ_INIT, FR_REQ_INIT}, {FR_REQ_INIT, FR_REQ_INIT}}};
    if (steps == 0 || g->count == 0) return FR_SUCCESS;
    fr_block(g->count, g->n, 0, &off, &maxlen);  /* block 0 is a largest one */
    x->m = (maxlen + g->chunk - 1) / g->chunk;
    x->total = x->m * (size_t)steps;
    return fr_ring_post(comm, g, 0, x->m, x->rq[0]);
}

/* @p block: wait for the rest; else return as soon as a round is pending. */
static inline fr_status_t fr_ring_advance(struct fr_comm *comm, fr_ring_prog_t *x, int block)
{
    const fr_ring_t *g = &x->g;
    size_t m = x->m;
    for (; x->r < x->total; x->r++) {
        size_t r = x->r;
        if (block) {
            FR_CHECK(fr_p2p_wait(comm, x->rq[r % 2], 2));
        } else {
            int complete;
            FR_CHECK(fr_p2p_test(comm, x->rq[r % 2], 2, &complete));
            if (!complete) return FR_SUCCESS;
        }
        if (r + 1 == x->total) {
            fr_ring_compute(g, r, m);
        } else if (m == 1) {
            /* the next round sends the chunk this round reduces */
            fr_ring_compute(g, r, m);
            FR_CHECK(fr_ring_post(comm, g, r + 1, m, x->rq[(r + 1) % 2]));
        } else {
            FR_CHECK(fr_ring_post(comm, g, r + 1, m, x->rq[(r + 1) % 2]));
            fr_ring_compute(g, r, m);
        }
    }
    return FR_SUCCESS;
}

static inline fr_status_t fr_ring_run(struct fr_comm *comm, const fr_ring_t *g)
{
    fr_ring_prog_t x;
    FR_CHECK(fr_ring_start(comm, g, &x));
    return fr_ring_advance(comm, &x, 1);
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

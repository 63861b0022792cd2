/* The chunked ring pass (ring_pass.h). A round is one (step, chunk) pair,
 * round = step * m + chunk; round g is posted before round g-1 is reduced. */
#include "ring_pass.h"
#include "alg_util.h"

static int ring_mod(long v, int n)
{
    long r = v % n;
    return (int)(r < 0 ? r + n : r);
}

/* Element range of chunk k of block b. */
static void ring_chunk(const fr_ring_t *g, int b, size_t k, size_t *off, size_t *len)
{
    size_t bo, bl, lo = k * g->chunk;
    fr_block(g->count, g->n, b, &bo, &bl);
    if (lo >= bl) { *off = bo + bl; *len = 0; return; }
    *off = bo + lo;
    *len = bl - lo < g->chunk ? bl - lo : g->chunk;
}

/* Start @p round (of m chunks per step): rq[0] receive, rq[1] send. */
static fr_status_t ring_post(struct fr_comm *comm, const fr_ring_t *g, size_t round, size_t m,
                             fr_req_t *rq)
{
    int t = (int)(round / m);
    size_t k = round % m, so, sl, ro, rl, es = g->elsize;
    int red = t < g->rs_steps;
    unsigned tag = FR_ALG_STEP(g->tag + (unsigned)t);
    ring_chunk(g, ring_mod((long)g->pos - t, g->n), k, &so, &sl);
    ring_chunk(g, ring_mod((long)g->pos - t - 1, g->n), k, &ro, &rl);
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

/* Finish @p round: reduce the received chunk during reduce-scatter. */
static void ring_compute(const fr_ring_t *g, size_t round, size_t m)
{
    int t = (int)(round / m);
    size_t ro, rl, es = g->elsize;
    if (t >= g->rs_steps) return;
    ring_chunk(g, ring_mod((long)g->pos - t - 1, g->n), round % m, &ro, &rl);
    if (rl)
        fr_reduce3(g->buf + ro * es, g->src + ro * es, g->tmp + (round % 2) * g->chunk * es, rl,
                   g->dtype, g->op);
}

fr_status_t fr_ring_start(struct fr_comm *comm, const fr_ring_t *g, fr_ring_prog_t *x)
{
    size_t off, maxlen;
    int steps = g->rs_steps + g->ag_steps;
    *x = (fr_ring_prog_t){.g = *g, .rq = {{FR_REQ_INIT, FR_REQ_INIT}, {FR_REQ_INIT, FR_REQ_INIT}}};
    if (steps == 0 || g->count == 0) return FR_SUCCESS;
    fr_block(g->count, g->n, 0, &off, &maxlen);  /* block 0 is a largest one */
    x->m = (maxlen + g->chunk - 1) / g->chunk;
    x->total = x->m * (size_t)steps;
    return ring_post(comm, g, 0, x->m, x->rq[0]);
}

fr_status_t fr_ring_advance(struct fr_comm *comm, fr_ring_prog_t *x, int block)
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
            ring_compute(g, r, m);
        } else if (m == 1) {
            /* the next round sends the chunk this round reduces */
            ring_compute(g, r, m);
            FR_CHECK(ring_post(comm, g, r + 1, m, x->rq[(r + 1) % 2]));
        } else {
            FR_CHECK(ring_post(comm, g, r + 1, m, x->rq[(r + 1) % 2]));
            ring_compute(g, r, m);
        }
    }
    return FR_SUCCESS;
}

fr_status_t fr_ring_run(struct fr_comm *comm, const fr_ring_t *g)
{
    fr_ring_prog_t x;
    FR_CHECK(fr_ring_start(comm, g, &x));
    return fr_ring_advance(comm, &x, 1);
}

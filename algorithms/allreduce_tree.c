/* Tree allreduce: a pipelined reduce up a k-ary tree rooted at rank 0
 * (parent of r is (r-1)/k), then a pipelined broadcast of the result back
 * down the same tree. The vector is cut into chunks: a rank reduces chunk c
 * from its children while chunk c+1 is in flight, sends it up, and forwards
 * result chunks down as they come back, so every level works on a different
 * chunk at once. Only the root computes final values, so every rank gets the
 * same bits. The rule's fanout= is k (default 2, at most 64), its chunk=
 * the bytes of one message. */
#include "alg_util.h"

#define TREE_CHUNK_DEFAULT  ((uint64_t)128 * 1024)
#define TREE_FANOUT_DEFAULT 2
#define TREE_FANOUT_MAX     64
#define TREE_LAG_MAX        64
/* A parent holds two chunks from each child: a chunk is cut so that this
 * holds for the largest fanout, whatever chunk= asks (the same on every
 * rank, as it depends on the call and the fanout alone), so a rule of
 * fanout 64 and chunks as large as the message cannot ask 128 times the
 * message of scratch. */
#define TREE_SCRATCH_MAX    ((size_t)16 << 20)
#define TREE_STEP_UP        0
#define TREE_STEP_DOWN      1

typedef struct tree {
    fr_call_t  *call;
    size_t      es, ce, m;   /* element size, chunk elements, number of chunks */
    int         parent, child0, nc;
    char       *buf;
    const char *src;
    char       *tmp;         /* [2][nc] chunks from the children */
} tree_t;

static void chunk_range(const tree_t *t, size_t c, size_t *off, size_t *len)
{
    *off = c * t->ce;
    *len = t->call->count - *off < t->ce ? t->call->count - *off : t->ce;
}

static char *child_tmp(const tree_t *t, size_t c, int i)
{
    return t->tmp + ((c % 2) * (size_t)t->nc + (size_t)i) * t->ce * t->es;
}

static fr_status_t post_children(struct fr_comm *comm, const tree_t *t, size_t c, fr_req_t *rq)
{
    size_t off, len;
    chunk_range(t, c, &off, &len);
    for (int i = 0; i < t->nc; i++)
        FR_CHECK(fr_p2p_irecv(comm, t->child0 + i, TREE_STEP_UP, child_tmp(t, c, i), len * t->es, &rq[i]));
    return FR_SUCCESS;
}

/* Send result chunk @p c to the children (after the sends of chunk c-2). */
static fr_status_t send_down(struct fr_comm *comm, const tree_t *t, size_t c, fr_req_t *ds)
{
    size_t off, len;
    if (!t->nc) return FR_SUCCESS;
    chunk_range(t, c, &off, &len);
    fr_req_t *rq = ds + (c % 2) * TREE_FANOUT_MAX;
    FR_CHECK(fr_p2p_wait(comm, rq, t->nc));
    for (int i = 0; i < t->nc; i++)
        FR_CHECK(fr_p2p_isend(comm, t->child0 + i, TREE_STEP_DOWN, t->buf + off * t->es, len * t->es, &rq[i]));
    return FR_SUCCESS;
}

/* The rule's fanout=, or the default, at most TREE_FANOUT_MAX. */
static int tree_fanout(const fr_call_t *call)
{
    int k = call->fanout > 0 ? call->fanout : TREE_FANOUT_DEFAULT;
    return k > TREE_FANOUT_MAX ? TREE_FANOUT_MAX : k;
}

/* Elements per chunk for fanout @p k (TREE_SCRATCH_MAX above). */
static size_t tree_chunk(const fr_call_t *call, int k)
{
    size_t es = fr_dtype_size(call->dtype), ce = fr_alg_chunk_elems(call, TREE_CHUNK_DEFAULT, es, call->count);
    size_t ce_max = TREE_SCRATCH_MAX / (2 * (size_t)k * es);
    return ce > ce_max ? (ce_max ? ce_max : 1) : ce;
}

/* Two chunks from each child of the rank with the most children: the bound
 * must be alike on every rank, so the leaves reserve it too. */
static size_t tree_scratch(const fr_call_t *call, const struct fr_comm *comm)
{
    if (!call->count || comm->size == 1) return 0;
    int k = tree_fanout(call), most = comm->size - 1 < k ? comm->size - 1 : k;
    return 2 * (size_t)most * tree_chunk(call, k) * fr_dtype_size(call->dtype);
}

static fr_status_t tree_run(fr_call_t *call, struct fr_comm *comm)
{
    int n = comm->size, r = comm->rank;
    if (call->count == 0) return FR_SUCCESS;
    if (n == 1) { fr_alg_copy_input(call); return FR_SUCCESS; }

    int k = tree_fanout(call);
    tree_t t;
    t.call = call;
    t.es = fr_dtype_size(call->dtype);
    t.ce = tree_chunk(call, k);
    t.m = (call->count + t.ce - 1) / t.ce;
    t.parent = r ? (r - 1) / k : -1;
    long first = (long)r * k + 1;
    t.child0 = (int)(first < n ? first : n);
    t.nc = first < n ? (int)((long)n - first < k ? (long)n - first : k) : 0;
    t.buf = call->recvbuf;
    t.src = call->sendbuf;
    t.tmp = NULL;
    if (t.nc) {
        t.tmp = fr_comm_scratch(comm, 2 * (size_t)t.nc * t.ce * t.es);
        if (!t.tmp) return FR_ERR_INTERNAL;
    }
    /* A result chunk returns about 2*depth chunk-times after it went up:
     * keep that many down-receives posted before waiting for one. */
    int depth = 0;
    for (int x = r; x; x = (x - 1) / k) depth++;
    size_t lag = (size_t)(2 * depth + 2);
    if (lag > TREE_LAG_MAX) lag = TREE_LAG_MAX;
    FR_TRACE(FR_SUB_COLL, "tree: %zu bytes, fanout %d, chunk %zu bytes, %zu chunks", call->bytes, k,
             t.ce * t.es, t.m);

    fr_req_t cr[2][TREE_FANOUT_MAX], ds[2 * TREE_FANOUT_MAX], up[2], dr[TREE_LAG_MAX];
    for (int i = 0; i < TREE_FANOUT_MAX; i++) cr[0][i] = cr[1][i] = (fr_req_t)FR_REQ_INIT;
    for (int i = 0; i < 2 * TREE_FANOUT_MAX; i++) ds[i] = (fr_req_t)FR_REQ_INIT;
    for (int i = 0; i < TREE_LAG_MAX; i++) dr[i] = (fr_req_t)FR_REQ_INIT;
    up[0] = up[1] = (fr_req_t)FR_REQ_INIT;

    if (t.nc) FR_CHECK(post_children(comm, &t, 0, cr[0]));
    size_t iters = t.parent < 0 ? t.m : t.m + lag;
    for (size_t it = 0; it < iters; it++) {
        size_t off, len;
        if (it < t.m) {
            /* up: combine chunk it with the children's, pass it on */
            size_t c = it;
            const char *data;
            chunk_range(&t, c, &off, &len);
            if (t.nc) {
                FR_CHECK(fr_p2p_wait(comm, cr[c % 2], t.nc));
                if (c + 1 < t.m) FR_CHECK(post_children(comm, &t, c + 1, cr[(c + 1) % 2]));
                char *o = t.buf + off * t.es;
                fr_reduce3(o, t.src + off * t.es, child_tmp(&t, c, 0), len, call->dtype, call->op);
                for (int i = 1; i < t.nc; i++)
                    fr_reduce(o, child_tmp(&t, c, i), len, call->dtype, call->op);
                data = o;
            } else {
                data = t.src + off * t.es;
            }
            if (t.parent < 0) {
                FR_CHECK(send_down(comm, &t, c, ds));
                continue;
            }
            FR_CHECK(fr_p2p_isend(comm, t.parent, TREE_STEP_UP, data, len * t.es, &up[c % 2]));
        }
        if (it >= 1 && it <= t.m) {
            /* chunk it-1 has left: its place may now receive the result */
            size_t c = it - 1;
            chunk_range(&t, c, &off, &len);
            FR_CHECK(fr_p2p_wait(comm, &up[c % 2], 1));
            FR_CHECK(fr_p2p_irecv(comm, t.parent, TREE_STEP_DOWN, t.buf + off * t.es, len * t.es,
                                  &dr[c % lag]));
        }
        if (it >= lag) {
            /* down: result chunk it-lag has (nearly) arrived; forward it */
            size_t c = it - lag;
            FR_CHECK(fr_p2p_wait(comm, &dr[c % lag], 1));
            FR_CHECK(send_down(comm, &t, c, ds));
        }
    }
    FR_CHECK(fr_p2p_wait(comm, ds, 2 * TREE_FANOUT_MAX));
    return FR_SUCCESS;
}

const fr_alg_t fr_alg_allreduce_tree = {
    .name = "tree",
    .coll = FR_COLL_ALLREDUCE,
    .mem_types = FR_MEM_HOST,
    .check = fr_alg_check_host,
    .run = tree_run,
    .scratch = tree_scratch,
    .desc = "pipelined reduce up a k-ary tree rooted at rank 0 (k = fanout, default 2), then down it",
    .params = { { FR_PARAM_CHUNK, { TREE_CHUNK_DEFAULT / 4, TREE_CHUNK_DEFAULT * 4 } },
                { FR_PARAM_FANOUT, { 4, 8, FR_FANOUT_FLAT } } },
    .chunk_def = TREE_CHUNK_DEFAULT,
    .needs = FR_NEEDS_UCX,
    .tie_rank = 3,
};

/* test_requests: non-blocking and grouped collectives (fr_iallreduce,
 * fr_ibcast, fr_allreduce_group, fr_iallreduce_group), completed with
 * fr_waitall, fr_wait and fr_test, for every host algorithm forced in turn.
 *
 * Every result is checked against reference.h's, computed on every rank:
 *  1. many requests in flight on one communicator (every host algorithm of
 *     the registry forced, each collective's in turn, and the default
 *     table), completed in an order other than the start order by each of
 *     the three ways; every dtype and op on the default table, a fixed pair
 *     per forced allreduce; bcasts from every root; blocking calls between
 *     requests, after which the requests started before them must be done
 *     at once; random plans of such calls in a row; requests of two
 *     communicators completed in one fr_waitall, and (progress threads)
 *     in different orders on even and odd ranks;
 *  2. grouped allreduces, blocking and not, of uneven counts (0 among them)
 *     and of no buffer, all in place (sendbufs NULL) or some, with
 *     FASTREDUCE_FUSION_BYTES of 1000 (several fusion buffers, some buffers
 *     alone), 0 and the default, FASTREDUCE_FUSION_BUFFER_MAX of 100 and
 *     the default (a buffer over it alone): each buffer's result that of
 *     its own allreduce; the pointer and count arrays overwritten at once
 *     after the start (the library copies them);
 *  3. under MPI_THREAD_MULTIPLE, threads each on a communicator of their
 *     own, all with requests in flight at once (skipped, with a note, at a
 *     lower level).
 * FASTREDUCE_PROGRESS (thread or caller) comes from the environment: the
 * launcher runs both. With caller, each fr_test must find its request done.
 * Under FASTREDUCE_CHECK=1 below MPI_THREAD_MULTIPLE every request waits
 * for the caller (its agreement calls MPI).
 *
 * Usage: test_requests [--thread-level single|funneled|serialized|multiple]
 *                      [--quick] [--threads T]
 *   --thread-level  what MPI_Init_thread asks for (default multiple)
 *   --quick         no counts of 70001 elements
 *   --threads T     threads of part 3 (default 3)
 */
#include <pthread.h>
#include "requests.h"
#include "forced.h"

static int np, me, quick, nthreads = 3, provided;

/* the registry's host algorithms of each collective, forced in turn */
static const fr_alg_t *ar_algs[TU_MAX_FORCED], *bc_algs[TU_MAX_FORCED];
static int n_ar, n_bc;

/* uneven counts, 0 among them, and (not --quick) one of several chunks */
static size_t counts[8];
static int ncounts;

#define MAXOPS 16

static const char *name_of(const fr_alg_t *a) { return a ? a->name : "default"; }

/* The fr_config_t.algo forcing the @p a th host algorithm of each
 * collective (one communicator serves both: fewer to make, which MPICH's
 * spinning ranks make slow where ranks outnumber cores). */
static const char *pair_spec(int a, char *buf, size_t len)
{
    const char *ar = n_ar ? ar_algs[a % n_ar]->name : NULL, *bc = n_bc ? bc_algs[a % n_bc]->name : NULL;
    if (a < n_ar && a < n_bc) snprintf(buf, len, "allreduce=%s,bcast=%s", ar, bc);
    else if (a < n_ar) snprintf(buf, len, "allreduce=%s", ar);
    else snprintf(buf, len, "bcast=%s", bc);
    return buf;
}

/* Check each of ops[0..n) (named "@p label N" in messages) and free it. */
static void check_free(rq_op_t *ops, int n, const char *label)
{
    char why[600];
    for (int j = 0; j < n; j++) {
        TU_CHECK(rq_ok(&ops[j], why, sizeof why), "%s %d: %s", label, j, why);
        rq_free(&ops[j]);
    }
}

/* Start ops[0..n) on @p comm, complete them by @p style in another order,
 * check every one; free them. */
static void run_batch(rq_op_t *ops, int n, fr_comm_t comm, int style, uint64_t seed)
{
    char why[600];
    for (int j = 0; j < n; j++) TU_CHECK(rq_start(&ops[j], comm), "request %d did not start: %s", j, tu_status(ops[j].st));
    TU_CHECK(rq_complete(ops, n, style, seed, why, sizeof why), "%s", why);
    check_free(ops, n, "request");
}

/* ---- 1. requests in flight ------------------------------------------------- */

/* On the default table, every dtype with every op: for each dtype five
 * requests, one per op, of uneven counts, in place every other one. */
static void test_every_pair(fr_comm_t comm)
{
    rq_op_t ops[FR_OP_COUNT];
    for (int dt = 0; dt < FR_DTYPE_COUNT; dt++) {
        int style = dt % RQ_NSTYLES;
        tu_begin("default table: %s, every op, %d requests in flight, completed by %s", tu_dtype_names[dt],
                 FR_OP_COUNT, rq_style_names[style]);
        for (int op = 0; op < FR_OP_COUNT; op++)
            rq_allreduce(&ops[op], (fr_dtype_t)dt, (fr_op_t)op, counts[(dt + op) % ncounts], (dt + op) % 2,
                         tu_hash3(0xA11, (uint64_t)dt, (uint64_t)op));
        run_batch(ops, FR_OP_COUNT, comm, style, tu_hash3(0x5EED, (uint64_t)dt, 0));
    }
}

/* A forced allreduce algorithm (index @p a): 12 requests of its fixed
 * dtype and op, of every count, in place or not, completed by each way. */
static void test_allreduce_flight(fr_comm_t comm, const fr_alg_t *alg, int a)
{
    static const struct { fr_dtype_t dt; fr_op_t op; } pairs[] = {
        { FR_FLOAT32, FR_SUM }, { FR_INT64, FR_MAX }, { FR_FLOAT16, FR_AVG }, { FR_UINT8, FR_PROD },
        { FR_BFLOAT16, FR_MIN }, { FR_INT32, FR_SUM }, { FR_FLOAT64, FR_PROD }, { FR_UINT64, FR_AVG },
    };
    const int npairs = (int)(sizeof pairs / sizeof pairs[0]), n = 12;
    fr_dtype_t dt = pairs[a % npairs].dt;
    fr_op_t op = pairs[a % npairs].op;
    rq_op_t ops[MAXOPS];
    for (int style = 0; style < RQ_NSTYLES; style++) {
        tu_begin("allreduce algo=%s: %d requests of %s %s in flight, completed by %s", name_of(alg), n,
                 tu_dtype_names[dt], tu_op_names[op], rq_style_names[style]);
        for (int j = 0; j < n; j++)
            rq_allreduce(&ops[j], dt, op, counts[(j + style) % ncounts], (j / 2 + style) % 2,
                         tu_hash3((uint64_t)a, (uint64_t)style, (uint64_t)j));
        run_batch(ops, n, comm, style, tu_hash3(0x5EED, (uint64_t)a, (uint64_t)style));
    }
}

/* Bcasts from every root at once, twice over with other counts and
 * element sizes, completed by each way. */
static void test_bcast_flight(fr_comm_t comm, const fr_alg_t *alg, int a)
{
    static const fr_dtype_t dts[] = { FR_INT8, FR_FLOAT16, FR_INT32, FR_FLOAT64, FR_UINT8 };
    rq_op_t ops[MAXOPS];
    int n = 2 * np < MAXOPS ? 2 * np : MAXOPS;
    for (int style = 0; style < RQ_NSTYLES; style++) {
        tu_begin("bcast algo=%s: %d requests, every root, in flight, completed by %s", name_of(alg), n,
                 rq_style_names[style]);
        for (int j = 0; j < n; j++)
            rq_bcast(&ops[j], dts[(j + style) % 5], counts[(j + a) % ncounts], j < np ? j : (2 * np - 1 - j) % np,
                     tu_hash3(0xBC + (uint64_t)a, (uint64_t)style, (uint64_t)j));
        run_batch(ops, n, comm, style, tu_hash3(0xB5EED, (uint64_t)a, (uint64_t)style));
    }
}

/* Call @p j of a plan: an allreduce (R, B) of any dtype and op, or a bcast
 * (r, b) from a root moving with j, of a count from the list; by @p salt. */
static void plan_op(rq_op_t *o, char kind, int j, uint64_t salt)
{
    uint64_t h = tu_hash3(salt, (uint64_t)j, 0x91A);
    size_t count = counts[h % (uint64_t)ncounts];
    if (kind == 'R' || kind == 'B')
        rq_allreduce(o, (fr_dtype_t)((h >> 8) % FR_DTYPE_COUNT), (fr_op_t)((h >> 16) % FR_OP_COUNT), count,
                     (int)(h >> 24) & 1, h);
    else
        rq_bcast(o, (fr_dtype_t)((h >> 8) % FR_DTYPE_COUNT), count, (int)((h >> 32) % (uint64_t)np), h);
}

/* Calls of @p plan (R/r: an allreduce/bcast request; B/b: a blocking one)
 * on @p comm. A blocking call runs after the requests started before it,
 * so when it returns fr_test must find each of them done at once (tested
 * in the reverse order); the rest are completed at the end, by a way and
 * in an order drawn from @p salt. */
static void test_mixed(fr_comm_t comm, const char *name, const char *plan, uint64_t salt)
{
    const int n = (int)strlen(plan);
    rq_op_t ops[MAXOPS];
    char why[600];
    tu_begin("algo=%s: requests and blocking calls mixed (%s)", name, plan);
    int last = 0;   /* ops[last..j) are started and not yet completed */
    for (int j = 0; j < n; j++) {
        plan_op(&ops[j], plan[j], j, salt);
        if (plan[j] == 'R' || plan[j] == 'r') {
            TU_CHECK(rq_start(&ops[j], comm), "request %d did not start: %s", j, tu_status(ops[j].st));
            continue;
        }
        rq_blocking(&ops[j], comm);
        for (int k = j - 1; k >= last; k--) {
            int done = 0;
            if (ops[k].req == FR_REQUEST_NULL) continue;
            ops[k].st = fr_test(&ops[k].req, &done);
            TU_CHECK(done == 1 && ops[k].req == FR_REQUEST_NULL,
                     "request %d, started before blocking call %d, not done when it returned", k, j);
            if (!done) ops[k].st = fr_wait(&ops[k].req);
        }
        last = j + 1;
    }
    TU_CHECK(rq_complete(ops + last, n - last, (int)(salt % RQ_NSTYLES), salt, why, sizeof why), "%s", why);
    check_free(ops, n, "call");
}

/* @p rounds plans drawn at random (4 to 16 calls, mostly requests): many
 * requests in flight and completed in turn on one communicator, the
 * library's buffers and slots reused from one to the next. */
static void test_stream(fr_comm_t comm, const char *name, int rounds, uint64_t salt)
{
    static const char kinds[] = "RRRrrBb";
    char plan[MAXOPS + 1];
    for (int r = 0; r < rounds; r++) {
        uint64_t h = tu_hash3(salt, (uint64_t)r, 0x57);
        int n = 4 + (int)(h % (MAXOPS - 3));
        for (int j = 0; j < n; j++) plan[j] = kinds[tu_hash3(h, (uint64_t)j, 1) % 7];
        plan[n] = '\0';
        test_mixed(comm, name, plan, h);
    }
}

/* Requests on two communicators, started alternately. Completed by one
 * fr_waitall (the same order on every rank, as caller progress needs), or
 * with @p cross in different orders on different ranks, as MPI allows and
 * progress threads must serve: even ranks wait for @p c0's first, odd ones
 * for @p c1's, each in the reverse order (not with caller progress, which
 * forbids it, nor on communicators whose algorithms call MPI, which below
 * MPI_THREAD_MULTIPLE only the caller may do). */
static void test_two_comms(fr_comm_t c0, fr_comm_t c1, const char *names, int cross)
{
    const int n = 10;
    rq_op_t ops[MAXOPS];
    char why[600];
    tu_begin("requests on two communicators (%s) in flight, %s", names,
             cross ? "completed in different orders on even and odd ranks" : "one fr_waitall");
    for (int j = 0; j < n; j++) {
        plan_op(&ops[j], j % 3 == 2 ? 'r' : 'R', j, 0x2C + (uint64_t)cross);
        TU_CHECK(rq_start(&ops[j], j % 2 ? c1 : c0), "request %d did not start: %s", j, tu_status(ops[j].st));
    }
    if (!cross) TU_CHECK(rq_complete(ops, n, RQ_WAITALL, 0x2C, why, sizeof why), "%s", why);
    for (int pass = 0; cross && pass < 2; pass++)
        for (int j = n - 1; j >= 0; j--)
            if (j % 2 == ((me % 2) ^ pass)) ops[j].st = fr_wait(&ops[j].req);
    check_free(ops, n, "request");
}

/* ---- 2. grouped allreduces -------------------------------------------------- */

#define GMAX 15

/* One grouped call: each buffer an rq_op_t (its input, expected result
 * and, when not in place, its send buffer), and the arrays passed. */
typedef struct grp {
    int          n, all_inplace;       /* all_inplace: sendbufs NULL */
    rq_op_t      ops[GMAX];
    const void  *sendbufs[GMAX];
    void        *recvbufs[GMAX];
    size_t       counts[GMAX];
    fr_request_t req;
} grp_t;

/* @p n buffers of (dt, op): all in place through sendbufs NULL, or mixed:
 * FR_IN_PLACE, the receive buffer itself, a send buffer of its own, in turn. */
static void grp_make(grp_t *g, int n, fr_dtype_t dt, fr_op_t op, int all_inplace, uint64_t salt)
{
    /* (elements: for 4-byte types 250 fill a 1000-byte fusion buffer, 251, 300
     * and 2000 go alone; 20000 is over FASTREDUCE_FUSION_BUFFER_MAX's 64K,
     * 26 and 25 either side of 100 bytes) */
    const size_t gcounts[GMAX] = { 0, 1, 7, 300, 0, 250, 251, 20000, 2000, 3, (size_t)np + 1, 26, 25, 0, 64 };
    memset(g, 0, sizeof *g);
    g->n = n;
    g->all_inplace = all_inplace;
    for (int i = 0; i < n; i++) {
        int way = all_inplace ? 0 : i % 3;
        rq_allreduce(&g->ops[i], dt, op, gcounts[i], way < 2, tu_hash3(salt, (uint64_t)i, 0x6));
        g->recvbufs[i] = g->ops[i].rbuf;
        g->counts[i] = gcounts[i];
        g->sendbufs[i] = way == 0 ? FR_IN_PLACE : way == 1 ? (const void *)g->ops[i].rbuf : g->ops[i].sbuf;
    }
}

/* Start (or, @p blocking, run) @p g on @p comm; a started one's arrays are
 * overwritten at once: the library must have copied them. */
static fr_status_t grp_start(grp_t *g, fr_comm_t comm, int blocking)
{
    const void *const *sb = g->all_inplace ? NULL : g->sendbufs;
    fr_status_t st;
    g->req = FR_REQUEST_NULL;
    if (blocking) return fr_allreduce_group(sb, g->recvbufs, g->counts, (size_t)g->n, g->ops[0].dt, g->ops[0].op, comm);
    st = fr_iallreduce_group(sb, g->recvbufs, g->counts, (size_t)g->n, g->ops[0].dt, g->ops[0].op, comm, &g->req);
    TU_CHECK(st == FR_SUCCESS && g->req != FR_REQUEST_NULL, "fr_iallreduce_group: %s", tu_status(st));
    for (int i = 0; i < g->n; i++) {
        g->sendbufs[i] = NULL;
        g->recvbufs[i] = NULL;
        g->counts[i] = 0;
    }
    return st;
}

/* Every buffer of @p g has its own allreduce's result (the call's status @p st). */
static void grp_check(grp_t *g, fr_status_t st)
{
    char why[600];
    for (int i = 0; i < g->n; i++) {
        g->ops[i].st = st;
        TU_CHECK(rq_ok(&g->ops[i], why, sizeof why), "buffer %d of %d: %s", i, g->n, why);
        rq_free(&g->ops[i]);
    }
}

/* One grouped call of @p n buffers of (dt, op), blocking or a request. */
static void test_group_one(fr_comm_t comm, const char *name, int n, fr_dtype_t dt, fr_op_t op, int all_inplace,
                           int blocking)
{
    static grp_t g;
    tu_begin("%s: %s of %d buffers of %s %s, %s", name, blocking ? "fr_allreduce_group" : "fr_iallreduce_group", n,
             tu_dtype_names[dt], tu_op_names[op], all_inplace ? "sendbufs NULL" : "some in place");
    grp_make(&g, n, dt, op, all_inplace, tu_hash3((uint64_t)n, dt, op));
    fr_status_t st = grp_start(&g, comm, blocking);
    if (!blocking && g.req != FR_REQUEST_NULL) st = fr_wait(&g.req);
    grp_check(&g, st);
}

/* Two grouped requests and two single ones in flight, then a blocking
 * grouped call (which runs after them), then one fr_waitall in the
 * reverse order. */
static void test_group_flight(fr_comm_t comm, const char *name)
{
    static grp_t g[3];
    rq_op_t ops[2];
    tu_begin("%s: 2 grouped and 2 single requests in flight, a blocking grouped call, fr_waitall in the "
             "reverse order", name);
    grp_make(&g[0], GMAX, FR_BFLOAT16, FR_MIN, 0, 0x61);
    grp_make(&g[1], 9, FR_UINT32, FR_SUM, 1, 0x62);
    rq_allreduce(&ops[0], FR_UINT32, FR_SUM, 1027, 1, 0x63);
    rq_bcast(&ops[1], FR_FLOAT32, 300, np - 1, 0x64);
    grp_start(&g[0], comm, 0);
    TU_CHECK(rq_start(&ops[0], comm), "fr_iallreduce: %s", tu_status(ops[0].st));
    grp_start(&g[1], comm, 0);
    TU_CHECK(rq_start(&ops[1], comm), "fr_ibcast: %s", tu_status(ops[1].st));
    grp_make(&g[2], 6, FR_INT8, FR_MIN, 0, 0x65);
    grp_check(&g[2], grp_start(&g[2], comm, 1));
    fr_request_t reqs[4] = { ops[1].req, g[1].req, ops[0].req, g[0].req };
    fr_status_t sts[4];
    fr_status_t st = fr_waitall(4, reqs, sts);
    TU_CHECK(st == FR_SUCCESS, "fr_waitall: %s", tu_status(st));
    for (int k = 0; k < 4; k++) TU_CHECK(reqs[k] == FR_REQUEST_NULL, "request %d not NULL after fr_waitall", k);
    ops[1].st = sts[0];
    ops[0].st = sts[2];
    grp_check(&g[1], sts[1]);
    grp_check(&g[0], sts[3]);
    check_free(ops, 2, "single request");
}

/* No buffer (arrays given, or NULL as a count-0 buffer may be), and
 * buffers of 0 elements only: nothing to do, success. */
static void test_group_empty(fr_comm_t comm, const char *name)
{
    void *rb[1] = { NULL };
    size_t cnt[3] = { 0, 0, 0 };
    fr_request_t r = 7;
    tu_begin("%s: grouped calls of no buffer", name);
    fr_status_t st = fr_allreduce_group(NULL, rb, cnt, 0, FR_FLOAT32, FR_SUM, comm);
    TU_CHECK(st == FR_SUCCESS, "fr_allreduce_group of n=0: %s", tu_status(st));
    st = fr_allreduce_group(NULL, NULL, NULL, 0, FR_FLOAT32, FR_SUM, comm);
    TU_CHECK(st == FR_SUCCESS, "fr_allreduce_group of n=0, arrays NULL: %s", tu_status(st));
    st = fr_iallreduce_group(NULL, rb, cnt, 0, FR_INT8, FR_MAX, comm, &r);
    TU_CHECK(st == FR_SUCCESS, "fr_iallreduce_group of n=0: %s", tu_status(st));
    st = fr_wait(&r);
    TU_CHECK(st == FR_SUCCESS && r == FR_REQUEST_NULL, "fr_wait of a group of n=0: %s", tu_status(st));
    tu_begin("%s: grouped call of 3 buffers of 0 elements", name);
    void *rb3[3] = { NULL, NULL, NULL };
    st = fr_iallreduce_group(NULL, rb3, cnt, 3, FR_FLOAT64, FR_PROD, comm, &r);
    if (TU_CHECK(st == FR_SUCCESS, "fr_iallreduce_group: %s", tu_status(st))) st = fr_wait(&r);
    TU_CHECK(st == FR_SUCCESS, "fr_wait: %s", tu_status(st));
}

/* Grouped calls on @p c, made with the FASTREDUCE_FUSION_BYTES @p name says. */
static void test_groups(fr_comm_t c, const char *name)
{
    test_group_one(c, name, GMAX, FR_FLOAT32, FR_SUM, 1, 1);
    test_group_one(c, name, GMAX, FR_INT8, FR_PROD, 0, 1);
    test_group_one(c, name, GMAX, FR_FLOAT16, FR_AVG, 0, 0);
    test_group_one(c, name, 11, FR_INT64, FR_MAX, 1, 0);
    test_group_one(c, name, 1, FR_FLOAT64, FR_SUM, 0, 0);
    test_group_flight(c, name);
    test_group_empty(c, name);
}

/* A communicator made with FASTREDUCE_FUSION_BYTES=@p fusion and
 * FASTREDUCE_FUSION_BUFFER_MAX=@p small (NULL: unset), its grouped calls. */
static void test_fusion(const char *fusion, const char *small)
{
    char name[96];
    snprintf(name, sizeof name, "FASTREDUCE_FUSION_BYTES=%s FASTREDUCE_FUSION_BUFFER_MAX=%s", fusion,
             small ? small : "(64K)");
    setenv("FASTREDUCE_FUSION_BYTES", fusion, 1);
    if (small) setenv("FASTREDUCE_FUSION_BUFFER_MAX", small, 1);
    fr_comm_t c = rq_make_comm(NULL, MPI_COMM_WORLD);
    unsetenv("FASTREDUCE_FUSION_BYTES");
    unsetenv("FASTREDUCE_FUSION_BUFFER_MAX");
    if (!tu_all(c != NULL)) return;
    tu_begin("fr_comm_fusion under %s", name);
    size_t fb = 0, bm = 0, want_fb = strtoull(fusion, NULL, 10), want_bm = small ? strtoull(small, NULL, 10) : 65536;
    fr_status_t st = fr_comm_fusion(c, &fb, &bm);
    TU_CHECK(st == FR_SUCCESS && fb == want_fb && bm == want_bm, "%s: %zu and %zu, want %zu and %zu", tu_status(st),
             fb, bm, want_fb, want_bm);
    TU_CHECK(fr_comm_fusion(c, NULL, NULL) == FR_SUCCESS, "fr_comm_fusion with NULL outputs failed");
    test_groups(c, name);
    rq_destroy_comm(c, name);
}

/* ---- 3. threads, each with requests on a communicator of its own ---------- */

typedef struct thr {
    int       id;
    pthread_t tid;
    MPI_Comm  mpi;
    fr_comm_t comm;
    long      checks, fails;
    char      why[600];          /* the first failure */
} thr_t;

static void thr_note(thr_t *t, int ok, const char *why)
{
    t->checks++;
    if (ok) return;
    if (!t->fails++) snprintf(t->why, sizeof t->why, "%s", why);
}

/* Rounds of 8 requests (int64 and float32 sums, bcasts), each round
 * completed another way, the data different per thread, round and call. */
static void *thr_run(void *arg)
{
    thr_t *t = arg;
    rq_op_t ops[8];
    char why[600];
    for (int round = 0; round < 6; round++) {
        const int n = 8;
        for (int j = 0; j < n; j++) {
            uint64_t salt = tu_hash3((uint64_t)t->id + 100, (uint64_t)round, (uint64_t)j);
            if (j % 4 == 3) rq_bcast(&ops[j], FR_INT64, counts[j % ncounts], (j + t->id) % np, salt);
            else rq_allreduce(&ops[j], j % 2 ? FR_FLOAT32 : FR_INT64, FR_SUM, counts[(j + round) % ncounts], j % 2, salt);
            snprintf(why, sizeof why, "round %d: request %d did not start: %s", round, j, fr_strerror(ops[j].st));
            thr_note(t, rq_start(&ops[j], t->comm), why);
        }
        int ok = rq_complete(ops, n, (round + t->id) % RQ_NSTYLES, (uint64_t)round, why, sizeof why);
        thr_note(t, ok, why);
        for (int j = 0; j < n; j++) {
            ok = rq_ok(&ops[j], why, sizeof why);
            thr_note(t, ok, why);
            rq_free(&ops[j]);
        }
    }
    return NULL;
}

/* @p nthreads threads at once, each on its own duplicate of MPI_COMM_WORLD
 * with an fr_comm_t forcing an allreduce and a bcast algorithm in turn. */
static void test_threads(void)
{
    thr_t *t = calloc((size_t)nthreads, sizeof *t);
    int made = 1;
    for (int i = 0; i < nthreads; i++) {
        char spec[96];
        t[i].id = i;
        MPI_Comm_dup(MPI_COMM_WORLD, &t[i].mpi);
        t[i].comm = rq_make_comm(pair_spec(i, spec, sizeof spec), t[i].mpi);
        made &= t[i].comm != NULL;
    }
    if (tu_all(made)) {
        for (int i = 0; i < nthreads; i++)
            if (pthread_create(&t[i].tid, NULL, thr_run, &t[i])) MPI_Abort(MPI_COMM_WORLD, 2);
        for (int i = 0; i < nthreads; i++) {
            pthread_join(t[i].tid, NULL);
            tu_begin("thread %d of %d: requests in flight on its own communicator", i, nthreads);
            TU_CHECK(t[i].fails == 0, "%ld of %ld checks failed; the first: %s", t[i].fails, t[i].checks, t[i].why);
        }
    }
    for (int i = 0; i < nthreads; i++) {
        tu_begin("thread %d: fr_comm_destroy", i);
        fr_status_t st = t[i].comm ? fr_comm_destroy(t[i].comm) : FR_SUCCESS;
        TU_CHECK(st == FR_SUCCESS, "fr_comm_destroy: %s", tu_status(st));
        MPI_Comm_free(&t[i].mpi);
    }
    free(t);
}

/* ---- main -------------------------------------------------------------------- */

/* Parse the arguments into the globals; the thread level asked, or -1. */
static int parse(int argc, char **argv)
{
    int level = MPI_THREAD_MULTIPLE;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (v && !strcmp(argv[i], "--thread-level") && (level = rq_thread_level(v)) >= 0) i++;
        else if (v && !strcmp(argv[i], "--threads") && (nthreads = atoi(v)) > 0 && nthreads <= 16) i++;
        else return -1;
    }
    return level;
}

/* The table of @p c chooses the forced @p a th algorithms (so the requests
 * run them), but those made for several nodes: they decline on one. */
static void check_forced(fr_comm_t c, int a, const char *spec)
{
    const size_t n = 4099;
    tu_begin("%s: the forced algorithms are chosen", spec);
    if (a < n_ar && !(ar_algs[a]->traits & FR_ALG_NODES)) {
        const char *got = fr_allreduce_algorithm(c, n, FR_FLOAT32, FR_SUM);
        TU_CHECK(got && !strcmp(got, ar_algs[a]->name), "allreduce: %s", got ? got : "NULL");
    }
    if (a < n_bc && !(bc_algs[a]->traits & FR_ALG_NODES)) {
        const char *got = fr_bcast_algorithm(c, n, FR_FLOAT32, 0);
        TU_CHECK(got && !strcmp(got, bc_algs[a]->name), "bcast: %s", got ? got : "NULL");
    }
}

/* Every forced algorithm's tests, on communicators forcing one of each
 * collective's; the first with @p dflt: requests on both in flight. */
static void test_forced(fr_comm_t dflt)
{
    for (int a = 0; a < n_ar || a < n_bc; a++) {
        char spec[96];
        fr_comm_t c = rq_make_comm(pair_spec(a, spec, sizeof spec), MPI_COMM_WORLD);
        if (!tu_all(c != NULL)) continue;
        check_forced(c, a, spec);
        if (a < n_ar) {
            test_allreduce_flight(c, ar_algs[a], a);
            test_group_one(c, spec, GMAX, FR_FLOAT32, FR_SUM, 0, 0);
        }
        if (a < n_bc) test_bcast_flight(c, bc_algs[a], a);
        test_mixed(c, spec, "RRrBRrBbRRrb", (uint64_t)a);
        test_stream(c, spec, 4, (uint64_t)a);
        if (a == 0) test_two_comms(dflt, c, spec, 0);
        rq_destroy_comm(c, spec);
    }
}

/* test_two_comms, cross, on two communicators forcing shm, where the progress
 * threads run every request: not with caller progress, nor with
 * FASTREDUCE_CHECK (an MPI call) below MPI_THREAD_MULTIPLE. */
static void test_cross(void)
{
    const char *shm = "allreduce=shm,bcast=shm", *check = getenv("FASTREDUCE_CHECK");
    if (rq_caller_mode() || (provided < MPI_THREAD_MULTIPLE && check && strcmp(check, "0"))) return;
    fr_comm_t c0 = rq_make_comm(shm, MPI_COMM_WORLD), c1 = rq_make_comm(shm, MPI_COMM_WORLD);
    if (tu_all(c0 && c1)) test_two_comms(c0, c1, shm, 1);
    rq_destroy_comm(c0, shm);
    rq_destroy_comm(c1, shm);
}

int main(int argc, char **argv)
{
    int level = parse(argc, argv);
    MPI_Init_thread(&argc, &argv, level < 0 ? MPI_THREAD_SINGLE : level, &provided);
    tu_init("test_requests");
    np = tu.size;
    me = tu.rank;
    if (level < 0) {
        if (me == 0) fprintf(stderr, "usage: test_requests [--thread-level single|funneled|serialized|multiple] "
                                     "[--quick] [--threads T]\n");
        MPI_Finalize();
        return 2;
    }
    const size_t cs[] = { 0, 1, 7, (size_t)np + 1, 1027, (size_t)np - 1, 4099, 70001 };
    ncounts = quick ? 7 : 8;
    memcpy(counts, cs, sizeof cs);
    n_ar = tu_forced("test_requests", FR_COLL_ALLREDUCE, 0, ar_algs);
    n_bc = tu_forced("test_requests", FR_COLL_BCAST, 0, bc_algs);
    if (me == 0)
        printf("test_requests np=%d: FASTREDUCE_PROGRESS=%s, thread level %s asked, %s provided\n", np,
               rq_caller_mode() ? "caller" : "thread", rq_level_name(level), rq_level_name(provided));
    fr_comm_t dflt = rq_make_comm(NULL, MPI_COMM_WORLD);
    if (tu_all(dflt != NULL)) {
        test_forced(dflt);
        test_every_pair(dflt);
        test_allreduce_flight(dflt, NULL, n_ar);
        test_bcast_flight(dflt, NULL, n_bc);
        test_mixed(dflt, "default", "RRrBRrBbRRrb", 200);
        test_stream(dflt, "default", quick ? 10 : 30, 201);
        test_groups(dflt, "FASTREDUCE_FUSION_BYTES and _BUFFER_MAX unset (64M, 64K)");
        rq_destroy_comm(dflt, "default");
    }
    test_fusion("1000", NULL);
    test_fusion("1000", "100");
    test_fusion("0", NULL);
    test_cross();
    if (provided == MPI_THREAD_MULTIPLE) test_threads();
    else if (me == 0) printf("test_requests np=%d: SKIP threads: thread level %s provided, not multiple\n", np,
                             rq_level_name(provided));
    int rc = tu_finish();
    MPI_Finalize();
    return rc;
}

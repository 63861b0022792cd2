/* test_reqfault: requests misused, and a rank that skips one.
 *
 *  1. handles: FR_REQUEST_NULL completes at once (done 1); a stale copy of
 *     a completed handle (also once its slot serves a newer request), a
 *     handle never issued and another generation of a live one are refused
 *     with FR_ERR_INVALID_ARG and a message, leaving live requests alone;
 *     fr_waitall completes the valid ones around a stale one; NULL
 *     pointers give FR_ERR_NULL_POINTER; another thread testing the
 *     handle each new request gets, while it starts, is refused or
 *     completes it, and never crashes;
 *  2. bad arguments to the starting calls fail at once with the blocking
 *     call's error, a message, and *req == FR_REQUEST_NULL; the
 *     communicator goes on;
 *  3. fr_comm_destroy with a request not complete returns FR_ERR_PENDING
 *     and the communicator still works; once it is complete, destroy
 *     succeeds; a request completed but not yet waited for stays valid
 *     after its communicator is destroyed;
 *  4. FASTREDUCE_CHECK=1: a request whose count differs on one rank fails
 *     with FR_ERR_MISMATCH on every rank, the requests around it succeed;
 *  5. FASTREDUCE_TIMEOUT: rank 1 does not start the 3rd request; the other
 *     ranks' fails with FR_ERR_TIMED_OUT (or FR_ERR_UCX) within the timeout
 *     + 2 s, fr_last_error() naming "request 3", through fr_wait and
 *     through fr_waitall's statuses; later calls there say the communicator
 *     is unusable; rank 1's late request comes back; destroy works;
 *  6. a grouped call whose fusion buffer the last rank cannot allocate
 *     fails on every rank, blocking and not, and the communicator goes on;
 *  7. so does a call whose algorithm's scratch buffer the last rank cannot
 *     allocate, with each algorithm that takes one.
 * Runs under FASTREDUCE_PROGRESS=thread or caller (the launcher runs both).
 *
 * Usage: test_reqfault [--timeout SECONDS]   (default 2)
 */
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include "requests.h"
#include "forced.h"

static int np, me, caller;
static double tmo = 2.0;

static int contains(const char *s, const char *sub) { return s && strstr(s, sub) != NULL; }

/* Complete @p o by fr_wait and check it. */
static void wait_ok(rq_op_t *o, const char *what)
{
    char why[600];
    o->st = fr_wait(&o->req);
    TU_CHECK(o->req == FR_REQUEST_NULL, "%s: fr_wait left the request not NULL", what);
    TU_CHECK(rq_ok(o, why, sizeof why), "%s: %s", what, why);
}

/* @p h, not a pending request, is refused by fr_wait and fr_test with
 * FR_ERR_INVALID_ARG, a message and done 0. */
static void refused(fr_request_t h, const char *what)
{
    fr_request_t r = h;
    int done = -1;
    fr_status_t st = fr_wait(&r);
    TU_CHECK(st == FR_ERR_INVALID_ARG && *fr_last_error(), "fr_wait of %s: %s", what, tu_status(st));
    r = h;
    st = fr_test(&r, &done);
    TU_CHECK(st == FR_ERR_INVALID_ARG && done == 0 && *fr_last_error(), "fr_test of %s: %s, done %d", what,
             tu_status(st), done);
}

/* ---- 1. handles ------------------------------------------------------------- */

static void test_null_and_stale(fr_comm_t c)
{
    fr_request_t r = FR_REQUEST_NULL, two[2] = { FR_REQUEST_NULL, FR_REQUEST_NULL };
    int done = -1;
    tu_begin("FR_REQUEST_NULL: fr_test, fr_wait and fr_waitall succeed at once");
    fr_status_t st = fr_test(&r, &done);
    TU_CHECK(st == FR_SUCCESS && done == 1, "fr_test: %s, done %d", tu_status(st), done);
    st = fr_wait(&r);
    TU_CHECK(st == FR_SUCCESS && r == FR_REQUEST_NULL, "fr_wait: %s", tu_status(st));
    fr_status_t sts[2] = { FR_ERR_INTERNAL, FR_ERR_INTERNAL };
    st = fr_waitall(2, two, sts);
    TU_CHECK(st == FR_SUCCESS && sts[0] == FR_SUCCESS && sts[1] == FR_SUCCESS, "fr_waitall: %s", tu_status(st));
    st = fr_waitall(0, NULL, NULL);
    TU_CHECK(st == FR_SUCCESS, "fr_waitall of none: %s", tu_status(st));

    rq_op_t a, b;
    tu_begin("a stale copy of a completed handle is refused, also once a newer request is pending");
    rq_allreduce(&a, FR_INT32, FR_SUM, 1027, 0, 0xA);
    TU_CHECK(rq_start(&a, c), "fr_iallreduce: %s", tu_status(a.st));
    fr_request_t stale = a.req;
    wait_ok(&a, "the request");
    refused(stale, "a completed request's copy");
    rq_allreduce(&b, FR_FLOAT64, FR_MAX, 333, 1, 0xB);
    TU_CHECK(rq_start(&b, c), "fr_iallreduce: %s", tu_status(b.st));
    refused(stale, "a completed request's copy, a newer one pending");
    tu_begin("never-issued handles are refused: 12345, ~0, another generation of a live one");
    refused(12345, "12345");
    refused(~(fr_request_t)0, "~0");
    refused(b.req ^ ((fr_request_t)1 << 40), "a live handle of another generation");
    tu_begin("the live request after the refusals completes");
    wait_ok(&b, "the live request");
    rq_free(&a);
    rq_free(&b);
    /* A handle is a slot and its 32-bit generation: a freed slot is taken
     * again only after the others, so that no slot's generation can wrap
     * back to a stale handle's within a run. (The low half of a handle is
     * its slot: this looks inside the opaque number on purpose.) */
    tu_begin("the slot of a completed request is not given out again among the next 1000");
    int again = 0;
    for (int k = 0; k < 1000; k++) {
        float x = 1;
        fr_request_t h;
        st = fr_iallreduce(FR_IN_PLACE, &x, 1, FR_FLOAT32, FR_SUM, c, &h);
        again += st == FR_SUCCESS && (uint32_t)h == (uint32_t)stale;
        if (st == FR_SUCCESS) st = fr_wait(&h);
        if (!TU_CHECK(st == FR_SUCCESS && x == (float)tu.size, "request %d: %s, %g", k, tu_status(st), (double)x))
            break;
    }
    TU_CHECK(again == 0, "the stale handle's slot came back %d times", again);
    refused(stale, "a completed request's copy, 1000 requests later");
}

/* The handle the next request will most likely get: a freed slot is the
 * next one given, a generation on. Another thread tests it while this one
 * starts and completes requests, so that it meets handles whose start has
 * not returned yet: each is refused or found complete, never followed half
 * made. (A request the guesser completes is refused to its starter.) */
static uint64_t guess_next;
static int guess_stop;
static long guess_odd;

static void *guesser(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&guess_stop, __ATOMIC_ACQUIRE)) {
        fr_request_t h = __atomic_load_n(&guess_next, __ATOMIC_ACQUIRE);
        int done;
        fr_status_t st = fr_test(&h, &done);
        if (st != FR_SUCCESS && st != FR_ERR_INVALID_ARG) guess_odd++;
    }
    return NULL;
}

static void test_guessed_handles(fr_comm_t c)
{
    enum { ROUNDS = 3000 };
    tu_begin("%d requests started while another thread tests the handle each will get", ROUNDS);
    pthread_t t;
    guess_stop = 0;
    if (!TU_CHECK(pthread_create(&t, NULL, guesser, NULL) == 0, "pthread_create failed")) return;
    long ok = 0, taken = 0, wrong = 0;
    /* (a buffer each: a request the guesser took may still be running) */
    static int32_t xs[ROUNDS];
    for (int k = 0; k < ROUNDS; k++) {
        int32_t *x = &xs[k];
        *x = me + k;
        fr_request_t r;
        fr_status_t st = fr_iallreduce(FR_IN_PLACE, x, 1, FR_INT32, FR_SUM, c, &r);
        if (st != FR_SUCCESS) {
            wrong++;
            continue;
        }
        __atomic_store_n(&guess_next, ((r >> 32) + 1) << 32 | (uint32_t)r, __ATOMIC_RELEASE);
        st = fr_wait(&r);
        if (st == FR_SUCCESS) ok += *x == np * (np - 1) / 2 + np * k;
        else if (st == FR_ERR_INVALID_ARG) taken++;
        else wrong++;
    }
    __atomic_store_n(&guess_stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    /* (the requests the guesser took are complete once it has returned) */
    int32_t y = 0;
    fr_allreduce(FR_IN_PLACE, &y, 1, FR_INT32, FR_SUM, c);
    TU_CHECK(wrong == 0 && guess_odd == 0, "%ld starts or waits failed otherwise than refused, %ld tests", wrong,
             guess_odd);
    TU_CHECK(ok + taken == ROUNDS, "%ld right results and %ld requests completed by the guesser of %d", ok, taken,
             ROUNDS);
}

/* fr_waitall over two live requests and a stale handle between them: the
 * stale one refused in its status and the return, the others completed. */
static void test_waitall_stale(fr_comm_t c)
{
    rq_op_t ops[2];
    char why[600];
    tu_begin("fr_waitall of [live, stale, live]: the live ones complete, the stale one is refused");
    rq_bcast(&ops[0], FR_INT8, 100, np - 1, 0x51);
    rq_allreduce(&ops[1], FR_UINT64, FR_PROD, 77, 1, 0x52);
    TU_CHECK(rq_start(&ops[0], c) && rq_start(&ops[1], c), "start: %s / %s", tu_status(ops[0].st),
             tu_status(ops[1].st));
    fr_request_t reqs[3] = { ops[1].req, 12345, ops[0].req };
    fr_status_t sts[3];
    fr_status_t st = fr_waitall(3, reqs, sts);
    TU_CHECK(st == FR_ERR_INVALID_ARG && *fr_last_error(), "fr_waitall returned %s", tu_status(st));
    TU_CHECK(sts[0] == FR_SUCCESS && sts[1] == FR_ERR_INVALID_ARG && sts[2] == FR_SUCCESS,
             "statuses %d %d %d", (int)sts[0], (int)sts[1], (int)sts[2]);
    TU_CHECK(reqs[0] == FR_REQUEST_NULL && reqs[2] == FR_REQUEST_NULL, "a completed request is not NULL");
    ops[1].st = sts[0];
    ops[0].st = sts[2];
    for (int j = 0; j < 2; j++) {
        TU_CHECK(rq_ok(&ops[j], why, sizeof why), "%s", why);
        rq_free(&ops[j]);
    }
}

/* NULL where a pointer is required: FR_ERR_NULL_POINTER, nothing started. */
static void test_null_pointers(fr_comm_t c)
{
    fr_request_t r = FR_REQUEST_NULL;
    int done = 0, x = 0;
    void *rb[1] = { &x };
    size_t one = 1;
    tu_begin("NULL pointers: FR_ERR_NULL_POINTER");
    fr_status_t s[7] = {
        fr_wait(NULL), fr_test(NULL, &done), fr_test(&r, NULL), fr_waitall(2, NULL, NULL),
        fr_iallreduce(FR_IN_PLACE, &x, 1, FR_INT32, FR_SUM, c, NULL), fr_ibcast(&x, 1, FR_INT32, 0, c, NULL),
        fr_iallreduce_group(NULL, rb, &one, 1, FR_INT32, FR_SUM, c, NULL),
    };
    for (int i = 0; i < 7; i++) TU_CHECK(s[i] == FR_ERR_NULL_POINTER, "call %d returned %s", i, tu_status(s[i]));
}

/* ---- 2. bad arguments -------------------------------------------------------- */

/* A start that must fail with @p want, leaving *req NULL (it was not). */
static void start_refused(fr_status_t st, fr_request_t r, fr_status_t want, const char *what)
{
    TU_CHECK(st == want && *fr_last_error(), "%s: %s, want %s", what, tu_status(st), fr_strerror(want));
    TU_CHECK(r == FR_REQUEST_NULL, "%s: *req is %#llx, not FR_REQUEST_NULL", what, (unsigned long long)r);
}

/* (the call sets r before it is read: a sequence point between them) */
#define REFUSE(want, what, call) do { r = 777; fr_status_t st_ = (call); start_refused(st_, r, want, what); } while (0)

static void test_bad_args(fr_comm_t c)
{
    fr_request_t r;
    int32_t buf[64] = { 0 };
    void *rbufs[3] = { buf, NULL, buf + 32 };
    const void *sbufs[3] = { FR_IN_PLACE, FR_IN_PLACE, buf + 8 };
    size_t cnt[3] = { 4, 4, 4 };
    tu_begin("bad arguments: the start fails at once, *req FR_REQUEST_NULL");
    REFUSE(FR_ERR_INVALID_ARG, "iallreduce dtype", fr_iallreduce(FR_IN_PLACE, buf, 4, FR_DTYPE_COUNT, FR_SUM, c, &r));
    REFUSE(FR_ERR_INVALID_ARG, "iallreduce op", fr_iallreduce(FR_IN_PLACE, buf, 4, FR_INT32, FR_OP_COUNT, c, &r));
    REFUSE(FR_ERR_NULL_POINTER, "iallreduce recvbuf NULL", fr_iallreduce(buf, NULL, 4, FR_INT32, FR_SUM, c, &r));
    REFUSE(FR_ERR_NULL_POINTER, "iallreduce sendbuf NULL", fr_iallreduce(NULL, buf, 4, FR_INT32, FR_SUM, c, &r));
    REFUSE(FR_ERR_INVALID_ARG, "iallreduce overlap", fr_iallreduce(buf, buf + 1, 4, FR_INT32, FR_SUM, c, &r));
    REFUSE(FR_ERR_BAD_COMM, "iallreduce comm NULL", fr_iallreduce(FR_IN_PLACE, buf, 4, FR_INT32, FR_SUM, NULL, &r));
    REFUSE(FR_ERR_ROOT, "ibcast root np", fr_ibcast(buf, 4, FR_INT32, np, c, &r));
    REFUSE(FR_ERR_ROOT, "ibcast root -1", fr_ibcast(buf, 4, FR_INT32, -1, c, &r));
    REFUSE(FR_ERR_NULL_POINTER, "ibcast buf NULL", fr_ibcast(NULL, 4, FR_INT32, 0, c, &r));
    REFUSE(FR_ERR_INVALID_ARG, "ibcast dtype", fr_ibcast(buf, 4, (fr_dtype_t)-1, 0, c, &r));
    REFUSE(FR_ERR_NULL_POINTER, "group recvbufs NULL", fr_iallreduce_group(NULL, NULL, cnt, 3, FR_INT32, FR_SUM, c, &r));
    REFUSE(FR_ERR_NULL_POINTER, "group counts NULL", fr_iallreduce_group(NULL, rbufs, NULL, 3, FR_INT32, FR_SUM, c, &r));
    REFUSE(FR_ERR_NULL_POINTER, "group buffer 1 NULL", fr_iallreduce_group(sbufs, rbufs, cnt, 3, FR_INT32, FR_SUM, c, &r));
    rbufs[1] = buf + 16;
    REFUSE(FR_ERR_INVALID_ARG, "group dtype", fr_iallreduce_group(sbufs, rbufs, cnt, 3, FR_DTYPE_COUNT, FR_SUM, c, &r));
    REFUSE(FR_ERR_INVALID_ARG, "group op", fr_iallreduce_group(sbufs, rbufs, cnt, 3, FR_INT32, FR_OP_COUNT, c, &r));
    fr_status_t st = fr_allreduce_group(NULL, NULL, cnt, 3, FR_INT32, FR_SUM, c);
    TU_CHECK(st == FR_ERR_NULL_POINTER, "fr_allreduce_group, recvbufs NULL: %s", tu_status(st));
    /* every rank refused alike and locally: the communicator goes on */
    tu_begin("after the refusals a request on the communicator completes");
    rq_op_t o;
    rq_allreduce(&o, FR_INT32, FR_SUM, 1000, 1, 0xBAD);
    TU_CHECK(rq_start(&o, c), "fr_iallreduce: %s", tu_status(o.st));
    wait_ok(&o, "the request");
    rq_free(&o);
}

/* ---- 3. fr_comm_destroy and requests; 4. FASTREDUCE_CHECK ---------------- */

/* A request that cannot have completed: the last rank starts its part only
 * after the others' fr_comm_destroy (with caller progress nothing runs it
 * before a call, so every rank's is pending). Destroy refuses; the
 * communicator goes on; with the request complete, destroy succeeds. */
static void test_destroy_pending(void)
{
    fr_comm_t c = rq_make_comm(NULL, MPI_COMM_WORLD);
    if (!tu_all(c != NULL)) return;
    rq_op_t o, b;
    /* (a lone rank's progress thread may finish its request at once: no rank is sure) */
    int last = me == np - 1, sure = caller || !last;   /* whose request is surely pending */
    rq_allreduce(&o, FR_FLOAT32, FR_SUM, 5000, 0, 0xDE);
    rq_bcast(&b, FR_INT8, 3001, 0, 0xDF);
    tu_begin("fr_comm_destroy with a request pending: FR_ERR_PENDING%s",
             caller ? "" : " (the last rank's request is started after it)");
    if (sure) {
        TU_CHECK(rq_start(&o, c), "fr_iallreduce: %s", tu_status(o.st));
        fr_status_t st = fr_comm_destroy(c);
        TU_CHECK(st == FR_ERR_PENDING && contains(fr_last_error(), "request"), "fr_comm_destroy: %s", tu_status(st));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (!sure) TU_CHECK(rq_start(&o, c), "fr_iallreduce: %s", tu_status(o.st));
    tu_begin("after FR_ERR_PENDING the communicator works: a blocking bcast, then the request");
    rq_blocking(&b, c);
    char why[600];
    TU_CHECK(rq_ok(&b, why, sizeof why), "the blocking bcast: %s", why);
    int done = 0;
    o.st = fr_test(&o.req, &done);   /* (started before the blocking call: done) */
    TU_CHECK(done == 1, "the request started before the blocking call is not done");
    if (!done) o.st = fr_wait(&o.req);
    TU_CHECK(rq_ok(&o, why, sizeof why), "the request: %s", why);
    rq_destroy_comm(c, "default, once the request is complete");
    rq_free(&o);
    rq_free(&b);
}

/* Requests that completed (those before a waited one) but were not waited
 * for stay valid after fr_comm_destroy: fr_test and fr_wait give their
 * status, once; a copy is refused after. */
static void test_done_after_destroy(void)
{
    fr_comm_t c = rq_make_comm("allreduce=ring", MPI_COMM_WORLD);
    if (!tu_all(c != NULL)) return;
    rq_op_t ops[3];
    char why[600];
    tu_begin("requests completed but not waited for, then fr_comm_destroy: it succeeds");
    rq_allreduce(&ops[0], FR_INT64, FR_SUM, 4099, 0, 0xD0);
    rq_bcast(&ops[1], FR_FLOAT16, 17, np / 2, 0xD1);
    rq_allreduce(&ops[2], FR_FLOAT32, FR_MIN, 10, 1, 0xD2);
    for (int j = 0; j < 3; j++) TU_CHECK(rq_start(&ops[j], c), "start %d: %s", j, tu_status(ops[j].st));
    fr_request_t copy = ops[0].req;
    wait_ok(&ops[2], "the last request");
    fr_status_t st = fr_comm_destroy(c);
    TU_CHECK(st == FR_SUCCESS, "fr_comm_destroy: %s", tu_status(st));
    tu_begin("after fr_comm_destroy: fr_test and fr_wait of the completed requests, then a copy refused");
    int done = 0;
    ops[0].st = fr_test(&ops[0].req, &done);
    TU_CHECK(done == 1 && ops[0].req == FR_REQUEST_NULL, "fr_test: done %d, %s", done, tu_status(ops[0].st));
    TU_CHECK(rq_ok(&ops[0], why, sizeof why), "request 0: %s", why);
    wait_ok(&ops[1], "request 1");
    refused(copy, "a copy of request 0");
    for (int j = 0; j < 3; j++) rq_free(&ops[j]);
}

/* FASTREDUCE_CHECK=1 holds for requests too: a request whose count differs
 * on the last rank fails with FR_ERR_MISMATCH on every rank, its buffer
 * unchanged, and the requests around it succeed. */
static void test_check_mismatch(void)
{
    setenv("FASTREDUCE_CHECK", "1", 1);
    fr_comm_t c = rq_make_comm(NULL, MPI_COMM_WORLD);
    unsetenv("FASTREDUCE_CHECK");
    if (!tu_all(c != NULL)) return;
    rq_op_t ops[3];
    char why[600];
    tu_begin("FASTREDUCE_CHECK=1: the 2nd of 3 requests has another count on rank %d: FR_ERR_MISMATCH", np - 1);
    rq_allreduce(&ops[0], FR_INT32, FR_SUM, 100, 0, 0xC0);
    rq_allreduce(&ops[1], FR_INT32, FR_SUM, me == np - 1 ? 99 : 100, 1, 0xC1);
    rq_bcast(&ops[2], FR_INT8, 64, 0, 0xC2);
    for (int j = 0; j < 3; j++) TU_CHECK(rq_start(&ops[j], c), "start %d: %s", j, tu_status(ops[j].st));
    TU_CHECK(rq_complete(ops, 3, RQ_WAITALL, 0xC, why, sizeof why), "%s", why);
    TU_CHECK(ops[1].st == FR_ERR_MISMATCH && contains(fr_last_error(), "count"), "the mismatched request gave %s: %s",
             fr_strerror(ops[1].st), fr_last_error());
    TU_CHECK(!memcmp(ops[1].rbuf, ops[1].input, ops[1].count * 4), "the refused request changed its buffer");
    for (int j = 0; j < 3; j += 2) TU_CHECK(rq_ok(&ops[j], why, sizeof why), "request %d: %s", j, why);
    for (int j = 0; j < 3; j++) rq_free(&ops[j]);
    rq_destroy_comm(c, "default with FASTREDUCE_CHECK=1");
}

/* ---- 5. a rank skips a request under FASTREDUCE_TIMEOUT ------------------------ */

#define SKIP_COUNT (64 * 1024 + 3)   /* floats: past the small paths, chunked */

/* The third request, which rank 1 skipped, on another rank: completed by
 * fr_wait, or by fr_waitall of all three; its status, time and message.
 * Returns the seconds it took. FASTREDUCE_TIMEOUT counts time without
 * progress, and a rank down a ring from the skipper may see progress until
 * its neighbour gives up, so a waiter is bound by one timeout per rank
 * (+ 2 s), and only the first to fail by one (test_skip checks that). */
static double skipped_waiter(rq_op_t *ops, int by_waitall, const char *spec, double t0)
{
    char why[600], msg[1024];
    fr_status_t st;
    if (by_waitall) {
        fr_request_t reqs[3] = { ops[0].req, ops[1].req, ops[2].req };
        fr_status_t sts[3];
        st = fr_waitall(3, reqs, sts);
        snprintf(msg, sizeof msg, "%s", fr_last_error());
        TU_CHECK(sts[2] == st, "fr_waitall returned %s, the 3rd status is %s", fr_strerror(st), fr_strerror(sts[2]));
        for (int j = 0; j < 3; j++) ops[j].st = sts[j], ops[j].req = reqs[j];
    } else {
        for (int j = 0; j < 2; j++) ops[j].st = fr_wait(&ops[j].req);
        st = fr_wait(&ops[2].req);
        snprintf(msg, sizeof msg, "%s", fr_last_error());
    }
    double t = MPI_Wtime() - t0;
    for (int j = 0; j < 2; j++) TU_CHECK(rq_ok(&ops[j], why, sizeof why), "request %d: %s", j + 1, why);
    TU_CHECK(ops[2].req == FR_REQUEST_NULL, "the failed request is not NULL after completion");
    /* (or UCX's error: a peer that timed out first closed its endpoints) */
    TU_CHECK(st == FR_ERR_TIMED_OUT || st == FR_ERR_UCX, "%s: request 3 gave %s: %s", spec, fr_strerror(st), msg);
    TU_CHECK(t <= np * tmo + 2.0, "%s: request 3 failed after %.2f s (timeout %g s)", spec, t, tmo);
    TU_CHECK(contains(msg, "request 3") && contains(msg, "allreduce"), "%s: the message names no request 3: %s",
             spec, msg);
    if (me == 0) printf("test_reqfault np=%d: %s: %s after %.2f s: %s\n", np, spec, fr_strerror(st), t, msg);
    return t;
}

/* On a communicator a collective failed on: a request fails (at its start
 * or its completion) and a blocking call too, saying it is unusable; the
 * buffer stays as it was. */
static void unusable_after(fr_comm_t c)
{
    float small[4] = { 1, 2, 3, 4 };
    fr_request_t r = FR_REQUEST_NULL;
    fr_status_t st = fr_iallreduce(FR_IN_PLACE, small, 4, FR_FLOAT32, FR_SUM, c, &r);
    if (st == FR_SUCCESS) st = fr_wait(&r);
    TU_CHECK(st == FR_ERR_BAD_COMM && contains(fr_last_error(), "unusable"), "a request: %s", tu_status(st));
    st = fr_bcast(small, 4, FR_FLOAT32, 0, c);
    TU_CHECK(st == FR_ERR_BAD_COMM && contains(fr_last_error(), "unusable"), "a blocking bcast: %s", tu_status(st));
    TU_CHECK(small[0] == 1 && small[3] == 4, "the buffer changed: %g .. %g", small[0], small[3]);
}

/* Rank 1 does not start the third of three requests (large allreduces on
 * a communicator forcing @p algo, NULL: the default table). */
static void test_skip(const char *algo, int by_waitall)
{
    char spec[160], tmo_s[32];
    const int skipper = 1, waiter = me != skipper;
    snprintf(spec, sizeof spec, "%s, request 3 skipped by rank 1, %s", algo ? algo : "default table",
             by_waitall ? "fr_waitall" : "fr_wait");
    snprintf(tmo_s, sizeof tmo_s, "%g", tmo);
    setenv("FASTREDUCE_TIMEOUT", tmo_s, 1);
    fr_comm_t c = rq_make_comm(algo, MPI_COMM_WORLD);
    unsetenv("FASTREDUCE_TIMEOUT");
    if (!tu_all(c != NULL)) return;
    rq_op_t ops[3];
    for (int j = 0; j < 3; j++) rq_allreduce(&ops[j], FR_FLOAT32, FR_SUM, SKIP_COUNT, j % 2, tu_hash3(0x5C, 0, (uint64_t)j));
    tu_begin("%s: the others' request 3 fails with FR_ERR_TIMED_OUT naming it", spec);
    for (int j = 0; j < 2; j++) TU_CHECK(rq_start(&ops[j], c), "start %d: %s", j + 1, tu_status(ops[j].st));
    double t0 = MPI_Wtime(), t = 1e9, first = 0;
    if (waiter) {
        TU_CHECK(rq_start(&ops[2], c), "start 3: %s", tu_status(ops[2].st));
        t = skipped_waiter(ops, by_waitall, spec, t0);
    } else {
        for (int j = 0; j < 2; j++) wait_ok(&ops[j], "a request before the skipped one");
    }
    MPI_Allreduce(&t, &first, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    TU_CHECK(first <= tmo + 2.0, "%s: the first rank's request 3 failed after %.2f s (timeout %g s)", spec, first, tmo);
    tu_begin("%s: later calls there say the communicator is unusable", spec);
    if (waiter) unusable_after(c);
    MPI_Barrier(MPI_COMM_WORLD);
    /* everyone else has given up: the late request times out, fails, or
     * succeeds where what it needed had been sent */
    tu_begin("%s: rank 1's late request 3 comes back", spec);
    if (!waiter) {
        TU_CHECK(rq_start(&ops[2], c), "start 3: %s", tu_status(ops[2].st));
        fr_status_t st = fr_wait(&ops[2].req);
        TU_CHECK(st == FR_ERR_TIMED_OUT || st == FR_SUCCESS || st == FR_ERR_UCX, "%s", tu_status(st));
    }
    tu_begin("%s: fr_comm_destroy", spec);
    t0 = MPI_Wtime();
    fr_status_t st = fr_comm_destroy(c);
    /* (the skipper's, whose late request may have succeeded, waits the timeout for the others' barrier) */
    TU_CHECK(st == FR_SUCCESS || (!waiter && st == FR_ERR_TIMED_OUT), "%s", tu_status(st));
    TU_CHECK(MPI_Wtime() - t0 <= tmo + 2.0, "took %.2f s", MPI_Wtime() - t0);
    for (int j = 0; j < 3; j++) rq_free(&ops[j]);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* This process's private writable memory (VmData), in bytes; 0 if unknown. */
static size_t vm_data(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmData: %zu kB", &kb) == 1) break;
    if (f) fclose(f);
    return kb * 1024;
}

/* A grouped call whose fusion buffer the last rank cannot have: its
 * private memory capped (RLIMIT_DATA) and its files, memfds included,
 * too (RLIMIT_FSIZE), so neither fr_mem_alloc nor posix_memalign gives
 * the 16 MiB. Every rank's call fails with FR_ERR_NO_MEMORY (the others'
 * naming another rank), blocking and not, none waits for a fused
 * allreduce the last rank never starts, and the communicator goes on:
 * a blocking allreduce, then the grouped call with the caps lifted, give
 * the right sums. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

static void test_fusion_no_memory(void)
{
    enum { NB = 256, CNT = 16384 };   /* 256 buffers of 64 KiB: one batch */
#ifdef UNDER_ASAN
    /* (AddressSanitizer maps its threads' fake stacks lazily and dies when
     * the cap refuses one) */
    if (me == 0) printf("test_reqfault: the fusion buffer without memory: skipped under AddressSanitizer\n");
    return;
#endif
    setenv("FASTREDUCE_FUSION_BYTES", "64M", 1);
    fr_comm_t c = rq_make_comm(NULL, MPI_COMM_WORLD);
    unsetenv("FASTREDUCE_FUSION_BYTES");
    float *all = malloc((size_t)NB * CNT * sizeof(float));
    if (!tu_all(c != NULL && all != NULL)) {
        free(all);
        if (c) rq_destroy_comm(c, "fusion buffer");
        return;
    }
    void *bufs[NB];
    size_t counts[NB];
    const int last = me == np - 1;
    signal(SIGXFSZ, SIG_IGN);   /* (ftruncate past RLIMIT_FSIZE raises it) */
    for (int round = 0; round < 3; round++) {
        const int capped = round < 2, nb = round == 1;
        tu_begin("grouped %s with %s", nb ? "fr_iallreduce_group" : "fr_allreduce_group",
                 capped ? "no memory for the fusion buffer on the last rank" : "the caps lifted");
        for (int k = 0; k < NB; k++) {
            bufs[k] = all + (size_t)k * CNT;
            counts[k] = CNT;
            for (int j = 0; j < CNT; j++) all[(size_t)k * CNT + j] = (float)((me + 1) * (k % 5 + 1));
        }
        struct rlimit old_data, old_fsize;
        getrlimit(RLIMIT_DATA, &old_data);
        getrlimit(RLIMIT_FSIZE, &old_fsize);
        if (last && capped) {
            struct rlimit d = {vm_data() + (8u << 20), old_data.rlim_max}, f = {1u << 20, old_fsize.rlim_max};
            TU_CHECK(setrlimit(RLIMIT_DATA, &d) == 0 && setrlimit(RLIMIT_FSIZE, &f) == 0, "setrlimit failed");
        }
        fr_status_t st;
        if (nb) {
            fr_request_t r = FR_REQUEST_NULL;
            st = fr_iallreduce_group(NULL, bufs, counts, NB, FR_FLOAT32, FR_SUM, c, &r);
            if (st == FR_SUCCESS) st = fr_wait(&r);
        } else {
            st = fr_allreduce_group(NULL, bufs, counts, NB, FR_FLOAT32, FR_SUM, c);
        }
        if (last && capped) {
            setrlimit(RLIMIT_DATA, &old_data);
            setrlimit(RLIMIT_FSIZE, &old_fsize);
        }
        if (capped) {
            TU_CHECK(st == FR_ERR_NO_MEMORY, "the grouped call: %s (%s), want FR_ERR_NO_MEMORY", tu_status(st),
                     fr_last_error());
            TU_CHECK(last || contains(fr_last_error(), "another rank"), "the message does not name another rank: %s",
                     fr_last_error());
        } else {
            TU_CHECK(st == FR_SUCCESS, "the grouped call: %s (%s)", tu_status(st), fr_last_error());
            size_t bad = 0;
            for (int k = 0; k < NB; k++)
                for (int j = 0; j < CNT; j++)
                    bad += all[(size_t)k * CNT + j] != (float)(np * (np + 1) / 2 * (k % 5 + 1));
            TU_CHECK(bad == 0, "%zu elements wrong", bad);
        }
        int x = me + 1;
        st = fr_allreduce(FR_IN_PLACE, &x, 1, FR_INT32, FR_SUM, c);
        TU_CHECK(st == FR_SUCCESS && x == np * (np + 1) / 2, "a blocking allreduce after it: %s, %d",
                 tu_status(st), x);
    }
    signal(SIGXFSZ, SIG_DFL);
    free(all);
    rq_destroy_comm(c, "fusion buffer");
}

/* One call of test_scratch_no_memory's: @p a's scratch for @p count floats
 * is @p need bytes, which the last rank cannot have while @p capped. Every
 * rank's call fails alike with FR_ERR_NO_MEMORY, leaving the results
 * alone, or, uncapped, gives the right sums. */
static void scratch_call(fr_comm_t c, const fr_alg_t *a, float *in, float *out, size_t count, int capped, int nb)
{
    tu_begin("%s %s of %zu floats with %s", a->name, nb ? "fr_iallreduce" : "fr_allreduce", count,
             capped ? "no memory for its scratch on the last rank" : "the cap lifted");
    for (size_t k = 0; k < count; k++) {
        in[k] = (float)((me + 1) * (int)(k % 7 + 1));
        out[k] = -1.0f;
    }
    struct rlimit old;
    getrlimit(RLIMIT_DATA, &old);
    if (capped && me == np - 1) {
        struct rlimit d = {vm_data() + (4u << 20), old.rlim_max};
        TU_CHECK(setrlimit(RLIMIT_DATA, &d) == 0, "setrlimit failed");
    }
    fr_status_t st;
    if (nb) {
        fr_request_t r = FR_REQUEST_NULL;
        st = fr_iallreduce(in, out, count, FR_FLOAT32, FR_SUM, c, &r);
        if (st == FR_SUCCESS) st = fr_wait(&r);
    } else {
        st = fr_allreduce(in, out, count, FR_FLOAT32, FR_SUM, c);
    }
    if (capped && me == np - 1) setrlimit(RLIMIT_DATA, &old);
    size_t bad = 0;
    if (capped) {
        TU_CHECK(st == FR_ERR_NO_MEMORY, "%s (%s), want FR_ERR_NO_MEMORY", tu_status(st), fr_last_error());
        TU_CHECK(contains(fr_last_error(), me == np - 1 ? "scratch" : "another rank"),
                 "the message does not say why: %s", fr_last_error());
        for (size_t k = 0; k < count; k++) bad += out[k] != -1.0f;
        TU_CHECK(bad == 0, "%zu results written by a call that failed", bad);
    } else {
        TU_CHECK(st == FR_SUCCESS, "%s (%s)", tu_status(st), fr_last_error());
        for (size_t k = 0; k < count; k++) bad += out[k] != (float)(np * (np + 1) / 2 * (int)(k % 7 + 1));
        TU_CHECK(bad == 0, "%zu elements wrong", bad);
        TU_CHECK(!strcmp(fr_last_algorithm(), a->name), "the call ran %s, not %s", fr_last_algorithm(), a->name);
    }
}

/* An algorithm's scratch buffer that the last rank cannot allocate
 * (RLIMIT_DATA): each allreduce algorithm that takes more than the cap
 * leaves (fr_alg_t.scratch, chunks of 16M asked where it has chunks, so
 * the ring and the tree do too) runs a 32 MiB call, blocking and not.
 * Every rank's call fails, agreed before anything moves, none waits for a
 * rank that never starts, and the communicator goes on: a small allreduce,
 * then the call with the cap lifted, give the right sums. */
static void test_scratch_no_memory(void)
{
#ifdef UNDER_ASAN
    if (me == 0) printf("test_reqfault: the scratch without memory: skipped under AddressSanitizer\n");
    return;
#endif
    enum { CNT = 8 << 20 };
    /* (large blocks mapped and unmapped, always: glibc would otherwise raise
     * its threshold after the first freed scratch and serve the next from
     * heap it keeps, which the cap does not limit) */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 20);
    const fr_alg_t *algs[TU_MAX_FORCED];
    int n = tu_forced("test_reqfault", FR_COLL_ALLREDUCE, 0, algs);
    float *in = malloc((size_t)CNT * sizeof *in), *out = malloc((size_t)CNT * sizeof *out);
    if (!tu_all(in && out)) { free(in); free(out); return; }
    for (int i = 0; i < n && np > 1; i++) {
        const fr_alg_t *a = algs[i];
        char rule[160];
        snprintf(rule, sizeof rule, "allreduce host * * * %s%s%s", a->name,
                 fr_alg_param(a, FR_PARAM_CHUNK) ? " chunk=16M" : "", fr_alg_param(a, FR_PARAM_ACROSS) ? " across=rd" : "");
        setenv("FASTREDUCE_TUNE", rule, 1);
        fr_comm_t c = rq_make_comm(NULL, MPI_COMM_WORLD);
        unsetenv("FASTREDUCE_TUNE");
        if (!tu_all(c != NULL)) continue;
        /* (the call as the rule makes it; an algorithm that declines it, or
         * takes less scratch than the cap leaves, has nothing to show) */
        fr_call_t call = {.coll = FR_COLL_ALLREDUCE, .mem = FR_MEM_HOST, .count = CNT, .dtype = FR_FLOAT32,
                          .op = FR_SUM, .bytes = (size_t)CNT * sizeof(float), .chunk = 16u << 20,
                          .across = FR_ACROSS_RD};

        if (a->scratch && a->check(&call, c) == FR_SUCCESS && a->scratch(&call, c) >= (12u << 20)) {
            float x = (float)me;
            tu_begin("%s: a first call makes its transport", a->name);
            TU_CHECK(fr_allreduce(FR_IN_PLACE, &x, 1, FR_FLOAT32, FR_SUM, c) == FR_SUCCESS, "%s", fr_last_error());
            for (int round = 0; round < 3; round++) scratch_call(c, a, in, out, CNT, round < 2, round == 1);
            int y = me + 1;
            fr_status_t st = fr_allreduce(FR_IN_PLACE, &y, 1, FR_INT32, FR_SUM, c);
            TU_CHECK(st == FR_SUCCESS && y == np * (np + 1) / 2, "a small allreduce after it: %s, %d",
                     tu_status(st), y);
        }
        rq_destroy_comm(c, a->name);
    }
    free(in);
    free(out);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    tu_init("test_reqfault");
    np = tu.size;
    me = tu.rank;
    caller = rq_caller_mode();
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--timeout") && i + 1 < argc) tmo = atof(argv[++i]);
    if (me == 0)
        printf("test_reqfault np=%d: FASTREDUCE_PROGRESS=%s, thread level %s\n", np, caller ? "caller" : "thread",
               rq_level_name(provided));
    fr_comm_t c = rq_make_comm(NULL, MPI_COMM_WORLD);
    if (tu_all(c != NULL)) {
        test_null_and_stale(c);
        test_guessed_handles(c);
        test_waitall_stale(c);
        test_null_pointers(c);
        test_bad_args(c);
        rq_destroy_comm(c, "default, after the misuse");
    }
    test_destroy_pending();
    test_done_after_destroy();
    test_fusion_no_memory();
    test_scratch_no_memory();
    if (np > 1) {
        test_check_mismatch();
        test_skip(NULL, 0);
        test_skip("allreduce=ring", 1);
    }
    int rc = tu_finish();
    MPI_Finalize();
    return rc;
}

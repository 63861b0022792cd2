/* test_fault: what the library does when the ranks do not call alike.
 *
 * FASTREDUCE_CHECK=1: calls whose count, datatype, op, root or collective
 * differ between ranks fail on every rank with FR_ERR_MISMATCH, the message
 * naming the field, the values and the ranks holding them; no buffer
 * changes and the communicator stays usable.
 *
 * FASTREDUCE_TIMEOUT: for every host algorithm forced in turn, the last
 * rank (in a bcast, the root) skips a collective. Every other rank must come back with
 * FR_ERR_TIMED_OUT (or FR_ERR_UCX, when a peer that timed out first closed
 * its endpoints) within the timeout + 2 s, with a message naming the
 * collective, its number, the algorithm and the ranks it waited on (one of
 * them, over all ranks, the rank that skipped); later calls on that
 * communicator fail with FR_ERR_BAD_COMM saying it is unusable and leave
 * the buffers alone; fr_comm_destroy still works and does not wait for
 * anyone. The rank that skipped makes its call late (it cannot complete)
 * and destroys its communicator too.
 *
 * MPI requests left by timeouts: 17 communicators, more than one pass of
 * fr_mpi_left_reap frees, each keep one and are destroyed; once the
 * skipping rank's late calls complete them, every MPI duplicate is freed.
 *
 * Usage: test_fault [--timeout SECONDS] [--algo NAME]
 *   --timeout   FASTREDUCE_TIMEOUT of the skip tests (default 0.5)
 *   --algo      only that algorithm's skip tests
 */
#include <ctype.h>
#include "testutil.h"
#include "forced.h"

static int np, me;
static double tmo = 0.5;
static const char *only;   /* --algo NAME: only that algorithm's skip tests */


static int contains(const char *s, const char *sub) { return s && strstr(s, sub) != NULL; }

/* Whether the rank list after "waiting for " in @p msg ("rank 3", "ranks
 * 0-2,5", "a receive from rank 1, a send to rank 2") includes rank @p r. */
static int names_rank(const char *msg, int r)
{
    const char *p = msg ? strstr(msg, "waiting for ") : NULL;
    if (!p) return 0;
    const char *end = strstr(p, "; this communicator");
    for (p += 12; *p && (!end || p < end); p++) {
        if (!isdigit((unsigned char)*p) || isdigit((unsigned char)p[-1])) continue;
        char *q;
        long lo = strtol(p, &q, 10), hi = lo;
        if (*q == '-' && isdigit((unsigned char)q[1])) hi = strtol(q + 1, &q, 10);
        if (r >= lo && r <= hi) return 1;
    }
    return 0;
}

/* ---- FASTREDUCE_CHECK ----------------------------------------------------- */

#define N 1000
static int32_t ibuf[N], iref[N], obuf[N], oref[N];

static void fill(void)
{
    for (int i = 0; i < N; i++) {
        ibuf[i] = iref[i] = me * 100000 + i;
        obuf[i] = oref[i] = -1 - i;
    }
}

/* One mismatched call: @p st is what this rank got. */
static void expect_mismatch(const char *what, fr_status_t st, const char *field, const char *value_here)
{
    tu_begin("FASTREDUCE_CHECK: %s differs", what);
    TU_CHECK(st == FR_ERR_MISMATCH, "returned %s, expected FR_ERR_MISMATCH", tu_status(st));
    const char *e = fr_last_error();
    TU_CHECK(contains(e, field), "the message does not name '%s': %s", field, e);
    if (value_here) TU_CHECK(contains(e, value_here), "the message does not give '%s': %s", value_here, e);
    TU_CHECK(contains(e, "rank"), "the message names no rank: %s", e);
    TU_CHECK(memcmp(ibuf, iref, sizeof ibuf) == 0 && memcmp(obuf, oref, sizeof obuf) == 0,
             "a buffer changed although the call was refused");
}

static void test_check(const char *algo)
{
    setenv("FASTREDUCE_CHECK", "1", 1);
    fr_config_t cfg = FR_CONFIG_INIT;
    cfg.algo = algo;
    fr_comm_t c = NULL;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, &cfg, &c);
    unsetenv("FASTREDUCE_CHECK");
    tu_begin("FASTREDUCE_CHECK (algo %s): fr_comm_create", algo ? algo : "default");
    if (!TU_CHECK(st == FR_SUCCESS, "fr_comm_create: %s %s", tu_status(st), fr_last_error())) return;
    int last = np - 1;
    char here[64];

    fill();
    snprintf(here, sizeof here, "%d on rank %d", N - 1, last);
    st = fr_allreduce(ibuf, obuf, me == last ? N - 1 : N, FR_INT32, FR_SUM, c);
    expect_mismatch("count", st, "count", here);

    fill();
    st = fr_allreduce(FR_IN_PLACE, ibuf, N, me == 0 ? FR_FLOAT32 : FR_INT32, FR_MAX, c);
    expect_mismatch("datatype", st, "datatype", "float32 on rank 0");

    fill();
    st = fr_allreduce(FR_IN_PLACE, ibuf, N, FR_INT32, me == last ? FR_MIN : FR_MAX, c);
    snprintf(here, sizeof here, "min on rank %d", last);
    expect_mismatch("op", st, "op", here);

    fill();
    st = fr_bcast(ibuf, N, FR_INT32, me == 0 ? 0 : last, c);
    expect_mismatch("root", st, "root", "0 on rank 0");

    fill();
    st = me == 0 ? fr_bcast(ibuf, N, FR_INT32, 0, c) : fr_allreduce(FR_IN_PLACE, ibuf, N, FR_INT32, FR_SUM, c);
    expect_mismatch("collective", st, "collective", "bcast on rank 0");

    /* every rank agreed to refuse: the communicator goes on */
    tu_begin("FASTREDUCE_CHECK (algo %s): a matching allreduce after the refusals", algo ? algo : "default");
    fill();
    st = fr_allreduce(FR_IN_PLACE, ibuf, N, FR_INT32, FR_SUM, c);
    int ok = st == FR_SUCCESS;
    for (int i = 0; i < N && ok; i++)
        ok = ibuf[i] == (int32_t)(100000LL * np * (np - 1) / 2 + (long long)np * i);
    TU_CHECK(ok, "status %s, or a wrong sum", tu_status(st));
    tu_begin("FASTREDUCE_CHECK (algo %s): fr_comm_destroy", algo ? algo : "default");
    st = fr_comm_destroy(c);
    TU_CHECK(st == FR_SUCCESS, "fr_comm_destroy: %s", tu_status(st));
}

/* Only rank 0 sets FASTREDUCE_CHECK: its value holds on every rank, so a
 * mismatch is still reported everywhere (ranks checking differently would
 * call different MPI collectives). */
static void test_check_rank0_only(void)
{
    if (me == 0) setenv("FASTREDUCE_CHECK", "1", 1);
    fr_comm_t c = NULL;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &c);
    unsetenv("FASTREDUCE_CHECK");
    tu_begin("FASTREDUCE_CHECK set on rank 0 only: fr_comm_create");
    if (!TU_CHECK(st == FR_SUCCESS, "fr_comm_create: %s %s", tu_status(st), fr_last_error())) return;
    fill();
    st = fr_allreduce(ibuf, obuf, me == np - 1 ? N - 1 : N, FR_INT32, FR_SUM, c);
    expect_mismatch("count (FASTREDUCE_CHECK on rank 0 only)", st, "count", NULL);
    tu_begin("FASTREDUCE_CHECK set on rank 0 only: fr_comm_destroy");
    st = fr_comm_destroy(c);
    TU_CHECK(st == FR_SUCCESS, "fr_comm_destroy: %s", tu_status(st));
}

/* ---- FASTREDUCE_TIMEOUT: a rank skips a collective ------------------------- */

#define SKIP_COUNT (64 * 1024 + 3)   /* floats: past the small paths, chunked */

static float *big;

static void test_skip(int coll, const char *alg, int check)
{
    if (only && strcmp(only, alg)) return;
    const fr_alg_t *a = fr_algs[fr_alg_lookup(coll, alg)];
    char spec[80], tbuf[32];
    snprintf(spec, sizeof spec, "%s=%s%s", coll ? "bcast" : "allreduce", alg, check ? " with FASTREDUCE_CHECK" : "");
    snprintf(tbuf, sizeof tbuf, "%g", tmo);
    fr_config_t cfg = FR_CONFIG_INIT;
    char forced[64];
    snprintf(forced, sizeof forced, "%s=%s", coll ? "bcast" : "allreduce", alg);
    cfg.algo = forced;
    /* one made for several nodes gets two of equal size (or nodes of one
     * rank); one made for one node has it */
    if (a->traits & FR_ALG_NODES) cfg.node_size = np % 2 == 0 ? np / 2 : 1;
    setenv("FASTREDUCE_TIMEOUT", tbuf, 1);
    if (check) setenv("FASTREDUCE_CHECK", "1", 1);
    fr_comm_t c = NULL;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, &cfg, &c);
    unsetenv("FASTREDUCE_TIMEOUT");
    unsetenv("FASTREDUCE_CHECK");
    tu_begin("%s skipped by rank %d: fr_comm_create", spec, np - 1);
    if (!TU_CHECK(st == FR_SUCCESS, "fr_comm_create: %s %s", tu_status(st), fr_last_error())) return;
    /* A bcast's root may finish before the others have received (as MPI's
     * may), so in a bcast the root is the rank that skips. */
    const int skipper = np - 1, root = coll ? skipper : 0;
    const char *chosen = coll ? fr_bcast_algorithm(c, SKIP_COUNT, FR_FLOAT32, root)
                              : fr_allreduce_algorithm(c, SKIP_COUNT, FR_FLOAT32, FR_SUM);
    tu_begin("%s skipped by rank %d: the algorithm is forced", spec, skipper);
    TU_CHECK(chosen && !strcmp(chosen, alg), "the table chose %s", chosen ? chosen : "(null)");

    /* one good call first: the communicator works */
    for (int i = 0; i < SKIP_COUNT; i++) big[i] = (float)(me + i % 7);
    st = coll ? fr_bcast(big, SKIP_COUNT, FR_FLOAT32, root, c)
              : fr_allreduce(FR_IN_PLACE, big, SKIP_COUNT, FR_FLOAT32, FR_SUM, c);
    tu_begin("%s skipped by rank %d: a call before the skip", spec, skipper);
    TU_CHECK(st == FR_SUCCESS, "%s: %s", tu_status(st), fr_last_error());

    for (int i = 0; i < SKIP_COUNT; i++) big[i] = (float)(me + i % 5);
    char msg[1024] = "";
    int named = 0, waiter = me != skipper;
    double t = 0;
    if (waiter) {
        double t0 = MPI_Wtime();
        st = coll ? fr_bcast(big, SKIP_COUNT, FR_FLOAT32, root, c)
                  : fr_allreduce(FR_IN_PLACE, big, SKIP_COUNT, FR_FLOAT32, FR_SUM, c);
        t = MPI_Wtime() - t0;
        snprintf(msg, sizeof msg, "%s", fr_last_error());
    }
    /* (every rank begins every test, so that they are numbered alike) */
    tu_begin("%s skipped by rank %d: the others time out within the timeout + 2 s", spec, skipper);
    if (waiter) {
        /* (or UCX's error: a peer that timed out first closed its endpoints) */
        TU_CHECK(st == FR_ERR_TIMED_OUT || st == FR_ERR_UCX, "returned %s: %s", tu_status(st), msg);
        TU_CHECK(t <= tmo + 2.0, "returned after %.2f s (timeout %g s)", t, tmo);
    }
    /* (the spread, for the log: how near the bound a slow machine comes) */
    double lo = 0, hi = 0, mine_lo = waiter ? t : 1e9;
    MPI_Allreduce(&mine_lo, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&t, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (me == 0) printf("test_fault np=%d: %s skipped by rank %d: the others returned after %.2f to %.2f s\n", np, spec,
                        skipper, lo, hi);
    tu_begin("%s skipped by rank %d: the message names the call and the peers", spec, skipper);
    if (waiter) {
        char num[32];
        snprintf(num, sizeof num, "%s #2 ", coll ? "bcast" : "allreduce");
        TU_CHECK(contains(msg, num), "no '%s' in: %s", num, msg);
        TU_CHECK(contains(msg, alg), "no algorithm name in: %s", msg);
        TU_CHECK(contains(msg, "waiting for") && contains(msg, "rank"), "no peers in: %s", msg);
        TU_CHECK(contains(msg, "unusable"), "does not say the communicator is unusable: %s", msg);
        /* (the MPI library does not say whom it waits for) */
        named = (a->traits & FR_ALG_MPI) || check || names_rank(msg, skipper);
    }
    tu_begin("%s skipped by rank %d: later calls say the communicator is unusable", spec, skipper);
    if (waiter) {
        float small[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        st = fr_allreduce(FR_IN_PLACE, small, 8, FR_FLOAT32, FR_SUM, c);
        TU_CHECK(st == FR_ERR_BAD_COMM && contains(fr_last_error(), "unusable"), "allreduce: %s %s", tu_status(st),
                 fr_last_error());
        st = fr_bcast(small, 8, FR_FLOAT32, 0, c);
        TU_CHECK(st == FR_ERR_BAD_COMM && contains(fr_last_error(), "unusable"), "bcast: %s %s", tu_status(st),
                 fr_last_error());
        TU_CHECK(small[0] == 1 && small[7] == 8, "the buffer changed: %g .. %g", small[0], small[7]);
    }
    tu_begin("%s skipped by rank %d: some rank names the one that skipped", spec, skipper);
    int any = 0;
    MPI_Allreduce(&named, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    TU_CHECK(any, "no rank's message names rank %d (this rank's: %s)", skipper, msg);

    /* everyone else has given up: the skipper makes its call late. It comes
     * back: timed out, failed, or done where what it needed had been sent. */
    tu_begin("%s skipped by rank %d: its late call comes back", spec, skipper);
    if (!waiter) {
        st = coll ? fr_bcast(big, SKIP_COUNT, FR_FLOAT32, root, c)
                  : fr_allreduce(FR_IN_PLACE, big, SKIP_COUNT, FR_FLOAT32, FR_SUM, c);
        /* (over TCP, UCX may also find a peer's endpoint gone) */
        TU_CHECK(st == FR_ERR_TIMED_OUT || st == FR_SUCCESS || st == FR_ERR_UCX, "returned %s: %s", tu_status(st),
                 fr_last_error());
    }
    tu_begin("%s skipped by rank %d: fr_comm_destroy", spec, skipper);
    double t0 = MPI_Wtime();
    st = fr_comm_destroy(c);
    t = MPI_Wtime() - t0;
    /* (the skipper's, not broken when its late call succeeded, waits the timeout for the others' barrier) */
    TU_CHECK(st == FR_SUCCESS || (me == skipper && st == FR_ERR_TIMED_OUT), "returned %s: %s", tu_status(st),
             fr_last_error());
    TU_CHECK(t <= tmo + 2.0, "took %.2f s", t);
    TU_CHECK(fr_comm_size(c) == -1, "the handle is still live after destroy");
    MPI_Barrier(MPI_COMM_WORLD);
}

/* ---- MPI requests left by timeouts: their communicators are freed --------- */

/* An attribute that MPI_Comm_dup copies: counts the duplicates of the
 * communicator carrying it (fr_comm_create's) and their frees. */
static int dups_made, dups_freed;

static int count_dup(MPI_Comm c, int key, void *extra, void *in, void *out, int *flag)
{
    (void)c; (void)key; (void)extra; (void)in;
    *(void **)out = &dups_made;   /* (a copy's value; the original's is NULL) */
    *flag = 1;
    dups_made++;
    return MPI_SUCCESS;
}

static int count_free(MPI_Comm c, int key, void *val, void *extra)
{
    (void)c; (void)key; (void)extra;
    if (val) dups_freed++;
    return MPI_SUCCESS;
}

/* More communicators than fr_mpi_left_reap frees in one pass (16) each
 * keep an MPI request that a timeout left (forced "mpi", the last rank
 * skips the call) and are destroyed; the last rank then makes the calls,
 * so MPI completes every request, and the next creates and destroys must
 * free every one of the duplicated MPI communicators. Before, a reap that
 * found more than 16 done dropped the rest from its list unfreed. */
#define LEFT_COMMS 17

static void test_left_many(void)
{
    if (only && strcmp(only, "mpi")) return;
    MPI_Comm u;
    int key;
    MPI_Comm_dup(MPI_COMM_WORLD, &u);
    MPI_Comm_create_keyval(count_dup, count_free, &key, NULL);
    MPI_Comm_set_attr(u, key, NULL);
    const int skipper = np - 1, waiter = me != skipper;
    fr_comm_t c[LEFT_COMMS] = {0};
    fr_config_t cfg = FR_CONFIG_INIT;
    cfg.algo = "allreduce=mpi";
    setenv("FASTREDUCE_TIMEOUT", "0.2", 1);
    int made = 0, timed_out = 0;
    for (int k = 0; k < LEFT_COMMS; k++) {
        if (fr_comm_create(u, &cfg, &c[made]) != FR_SUCCESS) break;   /* (agreed: every rank stops) */
        if (waiter) {
            float x[4] = {1, 2, 3, 4};
            timed_out += fr_allreduce(FR_IN_PLACE, x, 4, FR_FLOAT32, FR_SUM, c[made]) == FR_ERR_TIMED_OUT;
            fr_comm_destroy(c[made]);
        }
        made++;
    }
    unsetenv("FASTREDUCE_TIMEOUT");
    tu_begin("%d communicators left an MPI request by a timeout: the others time out", LEFT_COMMS);
    TU_CHECK(made == LEFT_COMMS, "fr_comm_create failed after %d: %s", made, fr_last_error());
    if (waiter) TU_CHECK(timed_out == made, "%d of %d calls timed out", timed_out, made);
    MPI_Barrier(MPI_COMM_WORLD);
    tu_begin("%d communicators left an MPI request by a timeout: the late calls complete them", LEFT_COMMS);
    if (!waiter) {
        int ok = 0;
        for (int k = 0; k < made; k++) {
            float x[4] = {1, 2, 3, 4};
            ok += fr_allreduce(FR_IN_PLACE, x, 4, FR_FLOAT32, FR_SUM, c[k]) == FR_SUCCESS;
        }
        TU_CHECK(ok == made, "%d of %d late calls succeeded: %s", ok, made, fr_last_error());
        fr_comm_destroy_many(c, made);   /* (each barrier times out: the others skipped theirs) */
    }
    MPI_Barrier(MPI_COMM_WORLD);
    tu_begin("%d communicators left an MPI request by a timeout: every MPI duplicate is freed", LEFT_COMMS);
    /* (each create and destroy frees what MPI has completed since; a few
     * rounds, in case MPI completes the requests over several) */
    int all_freed = 0;
    for (int round = 0; round < 20 && !all_freed; round++) {
        fr_comm_t r = NULL;
        if (fr_comm_create(MPI_COMM_WORLD, NULL, &r) == FR_SUCCESS) fr_comm_destroy(r);
        int mine = !waiter || dups_freed == dups_made;
        MPI_Allreduce(&mine, &all_freed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    }
    if (waiter) TU_CHECK(dups_made == LEFT_COMMS && dups_freed == dups_made, "%d of the %d duplicates freed",
                         dups_freed, dups_made);
    MPI_Comm_free(&u);
    MPI_Comm_free_keyval(&key);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_fault");
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--timeout") && i + 1 < argc) tmo = atof(argv[++i]);
        else if (!strcmp(argv[i], "--algo") && i + 1 < argc) only = argv[++i];
    big = malloc(SKIP_COUNT * sizeof(float));
    if (np >= 2) {
        test_check(NULL);
        test_check("ring");
        test_check_rank0_only();
        test_left_many();
        /* every host algorithm of the registry */
        const fr_alg_t *algs[TU_MAX_FORCED];
        for (int coll = 0; coll < FR_COLL_COUNT; coll++)
            for (int a = 0, n = tu_forced("test_fault", coll, 0, algs); a < n; a++) test_skip(coll, algs[a]->name, 0);
        /* the skip found by FASTREDUCE_CHECK's own agreement (an MPI request left behind) */
        test_skip(0, "ring", 1);
        test_skip(1, "shm", 1);
    } else {
        /* one rank: nothing can differ or be skipped; the check still passes calls */
        setenv("FASTREDUCE_CHECK", "1", 1);
        setenv("FASTREDUCE_TIMEOUT", "0.5", 1);
        fr_comm_t c = NULL;
        tu_begin("one rank with FASTREDUCE_CHECK and _TIMEOUT: calls succeed");
        fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &c);
        fill();
        if (st == FR_SUCCESS) st = fr_allreduce(FR_IN_PLACE, ibuf, N, FR_INT32, FR_SUM, c);
        TU_CHECK(st == FR_SUCCESS && ibuf[5] == iref[5], "%s %s", tu_status(st), fr_last_error());
        if (c) fr_comm_destroy(c);
    }
    free(big);
    int rc = tu_finish();
    MPI_Finalize();
    return rc;
}

/* test_coll: correctness of fr_allreduce() and fr_bcast() for every
 * algorithm, forced in turn, at the rank count it is launched with.
 *
 * One fr_comm_t is created per algorithm (fr_config_t.algo), plus one with
 * no forcing (the default table). For every case the expected result is
 * computed on every rank from the formula of every rank's input, never with
 * MPI, and the inputs are chosen so that every order of summation is exact:
 * integers wrap, floats are small integers or products of powers of two
 * that stay inside the type's exact range. Each case checks the status, the
 * result, that the send buffer is untouched, that the guard bytes around the
 * buffers survive, and that a forced algorithm is the one reported (or, for
 * shm with several nodes, that it declined).
 *
 * Usage: test_coll [--quick] [--algo NAME] [--node-size N]
 *   --quick       skip the 1000003 and 8 Mi element counts (also FASTREDUCE_TEST_QUICK=1)
 *   --algo NAME   only that algorithm ("default" for the unforced table)
 *   --node-size N fake nodes of N ranks with fr_config_t.node_size
 */
#include <unistd.h>
#include "testutil.h"
#include "reference.h"
#include "forced.h"

static int np, me;
static int quick;
static int cfg_node_size;
static int nnodes;
static int equal_nodes = 1;   /* every node has as many ranks */

/* every host algorithm of the registry, each collective's in turn */
static const fr_alg_t *ar_algs[TU_MAX_FORCED], *bc_algs[TU_MAX_FORCED];

enum { COLL_AR = 0, COLL_BC = 1 };

typedef struct comm_ent {
    const char *algo;      /* forced algorithm, NULL for the default table */
    const fr_alg_t *alg;   /* its registry entry */
    int         coll;      /* COLL_AR or COLL_BC */
    fr_comm_t   comm;
    long        calls, ran, declined;
    char        fallback[64];
} comm_ent_t;

static comm_ent_t ar_comms[TU_MAX_FORCED + 1], bc_comms[TU_MAX_FORCED + 1];
static int n_arc, n_bcc;
static uint64_t sel_hash = 0xcbf29ce484222325ull;  /* every name reported, in order */

/* ---- checks -------------------------------------------------------------- */

/* Shapes where a forced algorithm must decline, by its traits: one made
 * for one node across nodes, one made for several nodes on one, one that
 * needs equal nodes on nodes of unequal sizes (shm; hier; hier allreduce). */
static int cannot_serve(const comm_ent_t *ce)
{
    unsigned t = ce->alg->traits;
    return ((t & FR_ALG_ONE_NODE) && nnodes > 1) || ((t & FR_ALG_NODES) && nnodes < 2) ||
           ((t & FR_ALG_EQUAL_NODES) && !equal_nodes);
}

static void note_choice(comm_ent_t *ce, const char *alg, size_t count)
{
    sel_hash ^= alg ? tu_hash_bytes(alg, strlen(alg)) : 1;
    sel_hash *= 0x100000001b3ull;
    if (!TU_CHECK(alg && *alg, "the algorithm query returned %s", alg ? "\"\"" : "NULL")) return;
    if (!ce->algo || count == 0) return;
    ce->calls++;
    int shm_multi = cannot_serve(ce);
    if (strcmp(alg, ce->algo) == 0) {
        ce->ran++;
        TU_CHECK(!shm_multi, "%s was chosen although the communicator has %d node(s)%s", ce->algo, nnodes,
                 equal_nodes ? "" : " of unequal sizes");
    } else if (!shm_multi) {
        ce->declined++;
        snprintf(ce->fallback, sizeof ce->fallback, "%s", alg);
    }
}

static void test_allreduce_one(comm_ent_t *ce, fr_dtype_t dt, fr_op_t op, size_t count, int inplace,
                               const unsigned char *input, const unsigned char *expect,
                               unsigned char *sbuf, unsigned char *rbuf)
{
    size_t nb = count * tu_dtype_sizes[dt];
    tu_begin("allreduce algo=%s dtype=%s op=%s count=%zu inplace=%d", ce->algo ? ce->algo : "default",
             tu_dtype_names[dt], tu_op_names[op], count, inplace);
    tu_guard_set(sbuf, nb);
    tu_guard_set(rbuf, nb);
    if (inplace) {
        memcpy(rbuf, input, nb);
    } else {
        memcpy(sbuf, input, nb);
        memset(rbuf, 0xA5 ^ me, nb);
    }
    const char *alg = fr_allreduce_algorithm(ce->comm, count, dt, op);
    note_choice(ce, alg, count);
    fr_status_t st = fr_allreduce(inplace ? FR_IN_PLACE : sbuf, rbuf, count, dt, op, ce->comm);
    if (TU_CHECK(st == FR_SUCCESS, "fr_allreduce returned %s (algorithm %s)", tu_status(st), alg ? alg : "?"))
        check_equal("result", rbuf, expect, count, dt);
    if (!inplace) {
        check_equal("sendbuf modified", sbuf, input, count, dt);
        check_guards("sendbuf", sbuf, nb);
    }
    check_guards("recvbuf", rbuf, nb);
}

static void test_allreduce_case(fr_dtype_t dt, fr_op_t op, size_t count)
{
    size_t nb = count * tu_dtype_sizes[dt];
    unsigned char *input = tu_alloc(nb), *expect = tu_alloc(nb), *sbuf = tu_alloc(nb), *rbuf = tu_alloc(nb);
    make_case(dt, op, count, tu_hash3(dt, op, count), np, me, input, expect);
    for (int c = 0; c < n_arc; c++)
        for (int inplace = 0; inplace < 2; inplace++)
            test_allreduce_one(&ar_comms[c], dt, op, count, inplace, input, expect, sbuf, rbuf);
    tu_free(input); tu_free(expect); tu_free(sbuf); tu_free(rbuf);
}

/* Call @p i of an allreduce stream on @p ce: @p count integers of @p dt
 * (small, so every sum is exact even in int8), different per call and rank,
 * summed in place or not, this rank @p late microseconds late; true when
 * the result is each rank's own sum of every rank's inputs. */
static int allreduce_checked(comm_ent_t *ce, unsigned char *sbuf, unsigned char *rbuf, unsigned char *expect,
                             int i, fr_dtype_t dt, size_t count, int inplace, unsigned late)
{
    size_t es = tu_dtype_sizes[dt];
    for (size_t e = 0; e < count; e++) {
        long long mine = 0, all = 0;
        for (int r = 0; r < np; r++) {
            long long v = (long long)(tu_hash3((uint64_t)i, e, (uint64_t)r) % 21) - 10;
            all += v;
            if (r == me) mine = v;
        }
        store_int(sbuf, e, dt, (uint64_t)mine);
        store_int(expect, e, dt, (uint64_t)all);
    }
    if (inplace) memcpy(rbuf, sbuf, count * es);
    else memset(rbuf, 0x5A ^ me, count * es);
    if (late) usleep(late);
    fr_status_t st = fr_allreduce(inplace ? FR_IN_PLACE : sbuf, rbuf, count, dt, FR_SUM, ce->comm);
    return st == FR_SUCCESS && !memcmp(rbuf, expect, count * es);
}

/* Many small allreduces in a row on each communicator, the type, the size
 * and in-place changing from call to call, a rank late now and then: shm's
 * ring of lines (data up to 56 bytes) and its two small slots (longer
 * data) take turns and are reused many times over, and a line or slot
 * overwritten too soon, or read as another round's, shows. Then larger
 * ones: each side of shm's limits for reducing whole (8 KiB, or 16 KiB
 * with more ranks than cores), of one chunk (moved within shm's buffers
 * from call to call below 512 KiB) and of several. Integer sums, exact,
 * against each rank's own sum of every rank's inputs. */
static void test_allreduce_stream(void)
{
    static const size_t sizes[] = { 4, 56, 57, 64, 104, 111, 112, 113, 120, 8, 240, 1000 };
    static const size_t big[] = { 300000, 8192, 70000, 8200, 262144, 16384, 1100000, 16400, 500000, 400000 };
    static const fr_dtype_t dts[] = { FR_INT8, FR_INT32, FR_INT64 };
    const int ncalls = 1500, nsz = (int)(sizeof sizes / sizeof sizes[0]), nbig = (int)(sizeof big / sizeof big[0]);
    unsigned char *sbuf = tu_alloc(1100000), *rbuf = tu_alloc(1100000), *expect = tu_alloc(1100000);
    for (int c = 0; c < n_arc; c++) {
        comm_ent_t *ce = &ar_comms[c];
        /* (not the MPI library's own: nothing of ours is reused there, and MPICH's
         * waiting ranks spin, which makes this slow where ranks outnumber cores) */
        if (ce->alg && (ce->alg->traits & FR_ALG_MPI)) continue;
        tu_begin("allreduce stream algo=%s: %d calls, types, sizes and in-place changing",
                 ce->algo ? ce->algo : "default", ncalls);
        int bad = -1;
        for (int i = 0; i < ncalls; i++) {   /* (every rank makes every call, even after a wrong one) */
            fr_dtype_t dt = dts[i % 3];
            size_t count = sizes[(i / 3) % nsz] / tu_dtype_sizes[dt];
            int late = i % 41 == 0 && me == (i / 41) % np;
            if (!allreduce_checked(ce, sbuf, rbuf, expect, i, dt, count, (i / 7) % 2, late ? 300 : 0) && bad < 0)
                bad = i;
        }
        TU_CHECK(bad < 0, "call %d (%s, %zu bytes, in place %d) gave a wrong result or failed", bad,
                 bad < 0 ? "" : tu_dtype_names[dts[bad % 3]], bad < 0 ? (size_t)0 : sizes[(bad / 3) % nsz],
                 bad < 0 ? 0 : (bad / 7) % 2);
        /* (only where the shared segment's buffers serve: the others' large
         * calls are tested by the counts of test_allreduce_case) */
        if (ce->alg && !(ce->alg->traits & FR_ALG_SHM)) continue;
        const int n = 3 * nbig;
        tu_begin("allreduce stream algo=%s: %d calls of 8 KB to 1.1 MB, in place or not", ce->algo ? ce->algo : "default",
                 n);
        bad = -1;
        for (int i = 0; i < n; i++) {
            int late = i % 5 == 0 && me == (i / 5) % np;
            if (!allreduce_checked(ce, sbuf, rbuf, expect, ncalls + i, FR_INT32, big[i % nbig] / 4,
                                   (i / nbig) % 2, late ? 500 : 0) && bad < 0)
                bad = i;
        }
        TU_CHECK(bad < 0, "call %d (%zu bytes) gave a wrong result or failed", bad,
                 bad < 0 ? (size_t)0 : big[bad % nbig]);
    }
    tu_free(sbuf); tu_free(rbuf); tu_free(expect);
}

/* Random values in [-1, 1), different on every rank, against a sum
 * accumulated in double: |got - ref| <= 8 * np * eps(type) * sum_r |x_r|.
 * Also checks that every rank got the same bits. */
static void test_random(fr_dtype_t dt, size_t count)
{
    size_t es = tu_dtype_sizes[dt], nb = count * es;
    unsigned char *input = tu_alloc(nb), *sbuf = tu_alloc(nb), *rbuf = tu_alloc(nb);
    double *ref = malloc(count * sizeof *ref), *sabs = malloc(count * sizeof *sabs);
    if (!ref || !sabs) MPI_Abort(MPI_COMM_WORLD, 2);
    const double eps = dt == FR_FLOAT32 ? ldexp(1.0, -24) : ldexp(1.0, -53);
    for (size_t i = 0; i < count; i++) {
        double s = 0, a = 0;
        for (int r = 0; r < np; r++) {
            double x = ldexp((double)(tu_hash3(0xC0FFEEull + (uint64_t)r, i, dt) >> 11), -52) - 1.0;
            if (dt == FR_FLOAT32) x = (float)x;
            if (r == me) store_flt(input, i, dt, x);
            s += x;
            a += fabs(x);
        }
        ref[i] = s;
        sabs[i] = a;
    }
    for (int c = 0; c < n_arc; c++) {
        comm_ent_t *ce = &ar_comms[c];
        for (int inplace = 0; inplace < 2; inplace++) {
            tu_begin("allreduce random algo=%s dtype=%s op=sum count=%zu inplace=%d",
                     ce->algo ? ce->algo : "default", tu_dtype_names[dt], count, inplace);
            tu_guard_set(sbuf, nb);
            tu_guard_set(rbuf, nb);
            if (inplace) memcpy(rbuf, input, nb);
            else { memcpy(sbuf, input, nb); memset(rbuf, 0x3C, nb); }
            const char *alg = fr_allreduce_algorithm(ce->comm, count, dt, FR_SUM);
            note_choice(ce, alg, count);
            fr_status_t st = fr_allreduce(inplace ? FR_IN_PLACE : sbuf, rbuf, count, dt, FR_SUM, ce->comm);
            if (TU_CHECK(st == FR_SUCCESS, "fr_allreduce returned %s", tu_status(st))) {
                size_t nbad = 0, first = count;
                double fg = 0, ft = 0;
                for (size_t i = 0; i < count; i++) {
                    double g;
                    if (dt == FR_FLOAT32) { float f; memcpy(&f, rbuf + 4 * i, 4); g = f; }
                    else memcpy(&g, rbuf + 8 * i, 8);
                    double tol = 8.0 * np * eps * sabs[i];
                    if (!(fabs(g - ref[i]) <= tol)) {
                        if (first == count) { first = i; fg = g; ft = tol; }
                        nbad++;
                    }
                }
                if (nbad)
                    tu_fail("result: first bad index %zu: got %.17g expected %.17g +- %.3g (%zu of %zu elements wrong)",
                            first, fg, ref[first], ft, nbad, count);
            }
            if (!inplace) {
                check_equal("sendbuf modified", sbuf, input, count, dt);
                check_guards("sendbuf", sbuf, nb);
            }
            check_guards("recvbuf", rbuf, nb);
            /* collective: the same bits everywhere (only if the call succeeded everywhere) */
            if (tu_all(st == FR_SUCCESS))
                TU_CHECK(tu_same_everywhere(tu_hash_bytes(rbuf, nb)), "ranks got different bits");
        }
    }
    tu_free(input); tu_free(sbuf); tu_free(rbuf);
    free(ref); free(sabs);
}

/* ---- broadcast ----------------------------------------------------------- */

static void test_bcast_case(fr_dtype_t dt, size_t count)
{
    size_t nb = count * tu_dtype_sizes[dt];
    unsigned char *expect = tu_alloc(nb), *buf = tu_alloc(nb);
    for (int root = 0; root < np; root++) {
        fill_pattern(expect, nb, tu_hash3(dt, count, (uint64_t)root + 1000));
        for (int c = 0; c < n_bcc; c++) {
            comm_ent_t *ce = &bc_comms[c];
            tu_begin("bcast algo=%s dtype=%s count=%zu root=%d", ce->algo ? ce->algo : "default",
                     tu_dtype_names[dt], count, root);
            tu_guard_set(buf, nb);
            if (me == root) memcpy(buf, expect, nb);
            else memset(buf, 0x5A ^ me, nb);
            const char *alg = fr_bcast_algorithm(ce->comm, count, dt, root);
            note_choice(ce, alg, count);
            fr_status_t st = fr_bcast(buf, count, dt, root, ce->comm);
            if (TU_CHECK(st == FR_SUCCESS, "fr_bcast returned %s (algorithm %s)", tu_status(st), alg ? alg : "?"))
                check_equal(me == root ? "root's buffer changed" : "result", buf, expect, count, dt);
            check_guards("buffer", buf, nb);
        }
    }
    tu_free(expect); tu_free(buf);
}

/* One bcast of @p nb bytes from @p root, a pattern of @p salt, after a
 * pause of @p late_us (0: none) on this rank: did this rank get the root's
 * bytes? */
static int bcast_checked(comm_ent_t *ce, unsigned char *buf, unsigned char *expect, size_t nb, int root,
                         uint64_t salt, unsigned late_us)
{
    fill_pattern(expect, nb, salt);
    if (me == root) memcpy(buf, expect, nb);
    else memset(buf, 0x5A ^ me, nb);
    if (late_us) usleep(late_us);
    return fr_bcast(buf, nb, FR_INT8, root, ce->comm) == FR_SUCCESS && !memcmp(buf, expect, nb);
}

/* Many bcasts in a row on one communicator, the root moving every call,
 * sizes mixed (a byte: the tiny ring; a cache line, 3001 bytes, 4 KiB, the
 * small ring's largest (16 KiB); chunks of the large ring), a
 * rank arriving late now and then:
 * enough calls that every slot of the small and large rings is reused
 * several times while its earlier readers may be behind (the tiny ring's
 * own streams follow). Each call's bytes depend on the call, so a slot read too early
 * or overwritten too soon shows. */
static void test_bcast_stream(void)
{
    static const size_t sizes[] = { 1, 8, 9, 56, 57, 700, 3001, 4096, 5000, 16384, 16385, 70000 };
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]), ncalls = 1500;
    unsigned char *expect = tu_alloc(70000), *buf = tu_alloc(70000);
    for (int c = 0; c < n_bcc; c++) {
        comm_ent_t *ce = &bc_comms[c];
        tu_begin("bcast stream algo=%s: %d calls, roots and sizes changing", ce->algo ? ce->algo : "default",
                 ncalls);
        int bad = -1;
        for (int i = 0; i < ncalls; i++) {   /* (every rank makes every call, even after a wrong one) */
            int root = (i + i / nsizes) % np;   /* (each size from every root in turn) */
            size_t nb = sizes[i % nsizes];
            if (!bcast_checked(ce, buf, expect, nb, root, tu_hash3(0xB5, (uint64_t)i, (uint64_t)root),
                               i % 37 == 0 && me == (i / 37) % np ? 300 : 0) && bad < 0)
                bad = i;
        }
        TU_CHECK(bad < 0, "call %d (root %d, %zu bytes) gave a wrong result or failed", bad,
                 bad < 0 ? 0 : (bad + bad / nsizes) % np, bad < 0 ? (size_t)0 : sizes[bad % nsizes]);
        /* large messages of one to nine chunks: under a rule with chunks over
         * 256K, the shm ring's slots a message takes turns in change with its
         * size (two for a message of a few 1 MiB chunks, all eight for one of
         * eight chunks or more), so each slot's last round is what frees it */
        {
            static const size_t big[] = { 300000, 1100000, 70000, 2600000, 9000000, 1100000, 600000 };
            const int nbig = (int)(sizeof big / sizeof big[0]), n = 4 * nbig;
            unsigned char *bexp = tu_alloc(9000000), *bbuf = tu_alloc(9000000);
            tu_begin("bcast stream algo=%s: %d calls of 70 KB to 9 MB, roots changing", ce->algo ? ce->algo : "default",
                     n);
            bad = -1;
            for (int i = 0; i < n; i++) {
                size_t nb = big[i % nbig];
                int root = (i / nbig + i) % np;
                if (!bcast_checked(ce, bbuf, bexp, nb, root, tu_hash3(0xB9, (uint64_t)i, (uint64_t)root),
                                   i % 5 == 0 && me == (i / 5) % np ? 500 : 0) && bad < 0)
                    bad = i;
            }
            TU_CHECK(bad < 0, "call %d (%zu bytes) gave a wrong result or failed", bad,
                     bad < 0 ? (size_t)0 : big[bad % nbig]);
            tu_free(bexp); tu_free(bbuf);
        }
        /* one root far ahead: the last rank starts late, so the root fills
         * every slot of a ring and must wait for it before reusing one:
         * the tiny ring (8 bytes a call, 512 slots), then the small ring
         * (100 bytes every other call, 256 slots); then the tiny ring with
         * the root moving every call (each root's view of the other ranks'
         * progress differs) */
        for (int phase = 0; phase < 3; phase++) {
            static const char *const what[3] = { "8 bytes from rank 0", "8 and 100 bytes from rank 0",
                                                 "8 bytes, the root moving" };
            const int n = phase == 1 ? 800 : 1200;
            tu_begin("bcast stream algo=%s: %d calls of %s, the last rank late", ce->algo ? ce->algo : "default",
                     n, what[phase]);
            bad = -1;
            if (me == np - 1 && np > 1) usleep(20000);
            for (int i = 0; i < n; i++) {
                size_t nb = phase == 1 && i % 2 == 0 ? 100 : 8;
                int root = phase == 2 ? i % np : 0;
                if (!bcast_checked(ce, buf, expect, nb, root, tu_hash3(0xB6 + phase, (uint64_t)i, 0),
                                   phase == 2 && i % 97 == 0 && me == (i / 97) % np ? 2000 : 0) && bad < 0)
                    bad = i;
            }
            TU_CHECK(bad < 0, "call %d gave a wrong result or failed", bad);
        }
    }
    tu_free(expect); tu_free(buf);
}

/* ---- setup --------------------------------------------------------------- */

static int create_comm(comm_ent_t *ce, const fr_alg_t *a, int coll)
{
    char spec[64];
    fr_config_t cfg = FR_CONFIG_INIT;
    const char *algo = a ? a->name : NULL;
    memset(ce, 0, sizeof *ce);
    ce->algo = algo;
    ce->alg = a;
    ce->coll = coll;
    if (a) cfg.algo = tu_force_spec(a, spec, sizeof spec);
    cfg.node_size = cfg_node_size;
    tu_begin("fr_comm_create algo=%s", algo ? algo : "default");
    fr_comm_t c = NULL;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, &cfg, &c);
    if (!TU_CHECK(st == FR_SUCCESS && c, "fr_comm_create returned %s", tu_status(st))) return 0;
    TU_CHECK(fr_comm_rank(c) == me && fr_comm_size(c) == np, "fr_comm_rank/size = %d/%d, expected %d/%d",
             fr_comm_rank(c), fr_comm_size(c), me, np);
    ce->comm = c;
    return 1;
}

static void report_forced(comm_ent_t *ce)
{
    if (!ce->algo) return;
    tu_begin("%s algo=%s ran when forced", ce->coll == COLL_AR ? "allreduce" : "bcast", ce->algo);
    int shm_multi = cannot_serve(ce);
    if (np >= 2 && !shm_multi)
        TU_CHECK(ce->ran > 0, "forced algorithm %s never ran (declined all %ld calls, fell back to %s)",
                 ce->algo, ce->calls, ce->fallback);
    if (me == 0 && ce->declined)
        printf("note: forced %s declined %ld of %ld calls (last fallback: %s)\n", ce->algo, ce->declined,
               ce->calls, ce->fallback);
}

static void usage(void)
{
    if (me == 0) fprintf(stderr, "usage: test_coll [--quick] [--algo NAME] [--node-size N]\n");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_coll");
    np = tu.size;
    me = tu.rank;
    const char *only = NULL;
    quick = tu_quick(argc, argv);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) continue;
        else if (!strcmp(argv[i], "--algo") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--node-size") && i + 1 < argc) cfg_node_size = atoi(argv[++i]);
        else { usage(); MPI_Finalize(); return 2; }
    }
    nnodes = tu_node_shape(cfg_node_size, &equal_nodes);
    double t0 = MPI_Wtime();

    int known = !only || !strcmp(only, "default");
    const int n_ar = tu_forced("test_coll", FR_COLL_ALLREDUCE, 0, ar_algs);
    const int n_bc = tu_forced("test_coll", FR_COLL_BCAST, 0, bc_algs);
    for (int a = 0; a < n_ar; a++)
        if (!only || !strcmp(only, ar_algs[a]->name)) { known = 1; if (create_comm(&ar_comms[n_arc], ar_algs[a], COLL_AR)) n_arc++; }
    for (int a = 0; a < n_bc; a++)
        if (!only || !strcmp(only, bc_algs[a]->name)) { known = 1; if (create_comm(&bc_comms[n_bcc], bc_algs[a], COLL_BC)) n_bcc++; }
    if (!only || !strcmp(only, "default")) {
        if (create_comm(&ar_comms[n_arc], NULL, COLL_AR)) {
            bc_comms[n_bcc] = ar_comms[n_arc];
            bc_comms[n_bcc].coll = COLL_BC;
            n_arc++;
            n_bcc++;
        }
    }
    if (!known) {
        if (me == 0) fprintf(stderr, "test_coll: unknown algorithm '%s'\n", only);
        MPI_Finalize();
        return 2;
    }
    /* a creation that failed on some rank leaves the comms unusable: stop */
    if (!tu_all(!tu_cur_failed() && tu.nfail_local == 0)) {
        int rc = tu_finish();
        MPI_Finalize();
        return rc ? rc : 1;
    }
    if (me == 0)
        printf("test_coll np=%d: nodes=%d quick=%d, %d allreduce and %d bcast configurations\n", np, nnodes,
               quick, n_arc, n_bcc);

    /* allreduce: every dtype x op at small and awkward counts */
    size_t small_counts[] = { 0, 1, 7, (size_t)np - 1, (size_t)np + 1, 1027 };
    const int nsmall = (int)(sizeof small_counts / sizeof small_counts[0]);
    if (n_arc) {
        for (int dt = 0; dt < FR_DTYPE_COUNT; dt++)
            for (int op = 0; op < FR_OP_COUNT; op++)
                for (int k = 0; k < nsmall; k++)
                    test_allreduce_case((fr_dtype_t)dt, (fr_op_t)op, small_counts[k]);
        if (!quick) {
            static const struct { fr_dtype_t dt; fr_op_t op; size_t count; } big[] = {
                { FR_FLOAT32, FR_SUM, 1000003 }, { FR_INT64, FR_MAX, 1000003 },
                { FR_UINT8, FR_PROD, 1000003 }, { FR_BFLOAT16, FR_AVG, 1000003 },
                { FR_FLOAT32, FR_SUM, 8u << 20 }, { FR_INT32, FR_SUM, 8u << 20 },
            };
            for (size_t b = 0; b < sizeof big / sizeof big[0]; b++)
                test_allreduce_case(big[b].dt, big[b].op, big[b].count);
        }
        test_allreduce_stream();
        test_random(FR_FLOAT32, quick ? 10007 : 200003);
        test_random(FR_FLOAT64, quick ? 10007 : 200003);
    }
    double t1 = MPI_Wtime();

    /* bcast: bytes matter, so a few element sizes, every root */
    if (n_bcc) {
        static const fr_dtype_t bdt[] = { FR_INT8, FR_FLOAT16, FR_INT32, FR_FLOAT32, FR_FLOAT64 };
        for (size_t d = 0; d < sizeof bdt / sizeof bdt[0]; d++)
            for (int k = 0; k < nsmall; k++)
                test_bcast_case(bdt[d], small_counts[k]);
        if (!quick) {
            test_bcast_case(FR_INT8, 1000003);
            test_bcast_case(FR_FLOAT64, 1000003);
            test_bcast_case(FR_INT8, 8u << 20);   /* 8 MiB */
        }
        test_bcast_stream();
    }
    double t2 = MPI_Wtime();

    for (int c = 0; c < n_arc; c++) report_forced(&ar_comms[c]);
    for (int c = 0; c < n_bcc; c++) report_forced(&bc_comms[c]);
    tu_begin("every rank reported the same algorithms");
    TU_CHECK(tu_same_everywhere(sel_hash), "the algorithm names reported differ between ranks");

    for (int c = 0; c < n_arc; c++) {
        tu_begin("fr_comm_destroy algo=%s", ar_comms[c].algo ? ar_comms[c].algo : "default");
        fr_status_t st = fr_comm_destroy(ar_comms[c].comm);
        TU_CHECK(st == FR_SUCCESS, "fr_comm_destroy returned %s", tu_status(st));
    }
    for (int c = 0; c < n_bcc; c++) {
        if (!bc_comms[c].algo) continue;  /* the default comm was destroyed above */
        tu_begin("fr_comm_destroy algo=%s", bc_comms[c].algo);
        fr_status_t st = fr_comm_destroy(bc_comms[c].comm);
        TU_CHECK(st == FR_SUCCESS, "fr_comm_destroy returned %s", tu_status(st));
    }
    if (me == 0)
        printf("test_coll np=%d: allreduce %.1f s, bcast %.1f s\n", np, t1 - t0, t2 - t1);
    int rc = tu_finish();
    MPI_Finalize();
    return rc;
}

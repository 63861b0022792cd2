/* test_zcopy: memory from fr_mem_alloc and the zero-copy calls on it.
 *
 *  1. The allocator on its own: zero bytes, zeroed pages, fr_mem_shared
 *     inside, across and outside a buffer, bad and repeated frees.
 *  2. Allreduce, every dtype x op, in place and not, counts 0, 7 and 70001
 *     (not a multiple of the ranks), with every rank's buffers shared, none,
 *     and one rank's receive buffer private; then float32 sum and int8 max
 *     at two sizes under every pattern of shared and private send and
 *     receive buffers that one rank can differ by. The result is checked
 *     against the formula of every rank's input (reference.h), the send
 *     buffer and the guard bytes around each buffer must survive, and
 *     fr_last_zero_copy() must say 1 exactly where every rank's buffers are
 *     shared and the message is large (64 KiB and more), 0 where any rank's
 *     are private or the message is small (under 4 KiB).
 *  3. Every host algorithm of the registry forced on shared buffers: the
 *     result holds; only shm goes zero-copy.
 *  4. Bcast from every root, root's buffer shared or not, others mixed.
 *  5. Floats whose sums round: a zero-copy result has the bits of the copy
 *     path's (each rank reduces the blocks the copy path gives it, in its
 *     order).
 *  6. Requests and grouped calls on shared buffers; buffers freed and
 *     reallocated between calls (also on one rank only, and with other
 *     descriptors in between, so peers must not use a stale mapping);
 *     memory allocated by one thread and used by another;
 *     FASTREDUCE_ZERO_COPY=0 on one rank; a rank that cannot map its
 *     peers' buffers (its open-file limit lowered, so /proc/PID/fd cannot
 *     be opened): the call still gives the right result, by the copy path.
 *
 * With FASTREDUCE_NODE_SIZE=N (faked nodes of N ranks) it tests hier
 * instead: its node stages go zero-copy on a node whose ranks' buffers are
 * all shared, whatever the other nodes do; results and bits as above.
 *
 * Usage: test_zcopy [--quick] [--no-forced]
 *   --no-forced  leave out 3. (the algorithms over UCX): for ranks in PID
 *                namespaces of their own, where MPICH's MPI_Finalize at
 *                times hung after our UCX had connected them over TCP
 */
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>
#include "testutil.h"
#include "reference.h"
#include "forced.h"
#include "internal.h"   /* fr_comm_zero_copy_min */

static int np, me, quick;
static fr_comm_t comm;
static int zc_on;   /* zero-copy can happen here: one node of 2+ ranks whose ranks open each other's memfds */

/* A test buffer: nb bytes at p with guards around, from fr_mem_alloc
 * (shared) or malloc. */
typedef struct {
    unsigned char *base, *p;
    size_t nb;
    int shared;
} buf_t;

static void buf_get(buf_t *b, size_t nb, int shared)
{
    b->nb = nb;
    b->shared = shared;
    if (shared) {
        void *m = NULL;
        fr_status_t st = fr_mem_alloc(nb + 2 * TU_GUARD, &m);
        if (st != FR_SUCCESS || !m) {
            tu_fail("fr_mem_alloc(%zu): %s", nb + 2 * TU_GUARD, fr_last_error());
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        b->base = m;
        b->p = b->base + TU_GUARD;
    } else {
        b->p = tu_alloc(nb);
        b->base = NULL;
    }
    tu_guard_set(b->p, nb);
}

static void buf_put(buf_t *b)
{
    if (b->shared) {
        fr_status_t st = fr_mem_free(b->base);
        TU_CHECK(st == FR_SUCCESS, "fr_mem_free: %s", tu_status(st));
    } else {
        tu_free(b->p);
    }
    memset(b, 0, sizeof *b);
}

/* Bit 0: this rank's send buffer is shared, bit 1: its receive buffer;
 * a pattern gives every rank's. */
typedef struct {
    const char *name;
    int (*of)(int rank, int arg);
    int arg;
} pattern_t;

static int all_shared(int r, int a) { (void)r; (void)a; return 3; }
static int none_shared(int r, int a) { (void)r; (void)a; return 0; }
static int one_differs(int r, int a) { return r == a / 4 ? a % 4 : 3; }   /* rank a/4 has bits a%4 */
static int alternate(int r, int a) { (void)a; return r % 2 ? 0 : 3; }

static int every_rank_shared(const pattern_t *pt, int inplace)
{
    for (int r = 0; r < np; r++) {
        int m = pt->of(r, pt->arg);
        if (inplace ? !(m & 2) : m != 3) return 0;
    }
    return 1;
}

/* Whether an allreduce of @p count on @p c goes zero-copy: every rank's
 * buffers shared, the size at the threshold or past it, and the table's
 * choice the shm algorithm (the only one that looks for shared buffers). */
static int expected_zc(fr_comm_t c, int all, size_t count, fr_dtype_t dt, fr_op_t op)
{
    if (!zc_on || !all || count * tu_dtype_sizes[dt] < fr_comm_zero_copy_min(c, FR_COLL_ALLREDUCE)) return 0;
    return !strcmp(fr_allreduce_algorithm(c, count, dt, op), "shm");
}

/* The zero-copy answer the call just made must give (@p want 1 or 0). */
static void check_zc(int want)
{
    int got = fr_last_zero_copy();
    TU_CHECK(got == want, "fr_last_zero_copy() is %d, want %d", got, want);
}

static void allreduce_case(fr_comm_t c, const char *algo, fr_dtype_t dt, fr_op_t op, size_t count, int inplace,
                           const pattern_t *pt, int must_zc)
{
    size_t nb = count * tu_dtype_sizes[dt];
    int mine = pt->of(me, pt->arg);
    tu_begin("allreduce %s dtype=%s op=%s count=%zu inplace=%d buffers=%s(%d)", algo, tu_dtype_names[dt],
             tu_op_names[op], count, inplace, pt->name, pt->arg);
    unsigned char *input = tu_alloc(nb), *expect = tu_alloc(nb);
    make_case(dt, op, count, tu_hash3(dt, op, count + 17u * (unsigned)inplace), np, me, input, expect);
    buf_t s = {0}, r;
    buf_get(&r, nb, (mine & 2) != 0);
    if (inplace) {
        memcpy(r.p, input, nb);
    } else {
        buf_get(&s, nb, mine & 1);
        memcpy(s.p, input, nb);
        memset(r.p, 0xA5 ^ me, nb);
    }
    fr_status_t st = fr_allreduce(inplace ? FR_IN_PLACE : s.p, r.p, count, dt, op, c);
    if (TU_CHECK(st == FR_SUCCESS, "fr_allreduce: %s (%s)", tu_status(st), fr_last_error())) {
        check_equal("result", r.p, expect, count, dt);
        check_zc(must_zc);
    }
    if (!inplace) {
        check_equal("sendbuf modified", s.p, input, count, dt);
        check_guards("sendbuf", s.p, nb);
        buf_put(&s);
    }
    check_guards("recvbuf", r.p, nb);
    buf_put(&r);
    tu_free(input);
    tu_free(expect);
}

static void bcast_case(fr_comm_t c, size_t nb, int root, int root_shared, int must_zc)
{
    tu_begin("bcast %zu bytes root=%d root's buffer %s", nb, root, root_shared ? "shared" : "private");
    unsigned char *want = tu_alloc(nb);
    fill_pattern(want, nb, tu_hash3(nb, (uint64_t)root, 77));
    buf_t b;
    buf_get(&b, nb, me == root ? root_shared : (me + (int)nb) % 2);
    if (me == root) memcpy(b.p, want, nb);
    else memset(b.p, 0x3C, nb);
    fr_status_t st = fr_bcast(b.p, nb, FR_INT8, root, c);
    if (TU_CHECK(st == FR_SUCCESS, "fr_bcast: %s (%s)", tu_status(st), fr_last_error())) {
        check_equal("data", b.p, want, nb, FR_INT8);
        check_zc(must_zc);
    }
    check_guards("buffer", b.p, nb);
    buf_put(&b);
    tu_free(want);
}

static void test_allocator(void)
{
    tu_begin("fr_mem_alloc: arguments, zeroed pages, fr_mem_shared, bad frees");
    void *p = (void *)1;
    TU_CHECK(fr_mem_alloc(0, &p) == FR_SUCCESS && p == NULL, "fr_mem_alloc(0) did not give NULL");
    TU_CHECK(fr_mem_alloc(8, NULL) == FR_ERR_NULL_POINTER, "fr_mem_alloc(8, NULL) was not refused");
    TU_CHECK(fr_mem_free(NULL) == FR_SUCCESS, "fr_mem_free(NULL) failed");
    TU_CHECK(fr_mem_alloc(SIZE_MAX - 10, &p) == FR_ERR_NO_MEMORY, "an impossible size was not refused");
    /* (past an off_t, below SIZE_MAX: a memfd cannot be made that long) */
    fr_status_t big = fr_mem_alloc((size_t)INT64_MAX + 4096, &p);
    TU_CHECK(big == FR_ERR_NO_MEMORY, "2^63 + 4096 bytes: %s, want FR_ERR_NO_MEMORY", tu_status(big));
    unsigned char *a = NULL;
    if (!TU_CHECK(fr_mem_alloc(10000, (void **)&a) == FR_SUCCESS && a, "fr_mem_alloc(10000): %s", fr_last_error()))
        return;
    TU_CHECK(((uintptr_t)a & 4095) == 0, "%p is not page-aligned", (void *)a);
    size_t nz = 0;
    for (size_t i = 0; i < 10000; i++) nz += a[i] != 0;
    TU_CHECK(nz == 0, "%zu bytes of a new allocation are not zero", nz);
    TU_CHECK(fr_mem_shared(a, 10000) && fr_mem_shared(a + 9999, 1) && fr_mem_shared(a + 100, 5000),
             "fr_mem_shared misses a range inside the allocation");
    TU_CHECK(!fr_mem_shared(a, 0) && !fr_mem_shared(a + 12288, 1) && !fr_mem_shared(a + 1, 12288) &&
             !fr_mem_shared(&nz, sizeof nz), "fr_mem_shared accepts a range outside the allocation");
    int x;
    TU_CHECK(fr_mem_free(&x) == FR_ERR_INVALID_ARG, "freeing a stack address was not refused");
    TU_CHECK(fr_mem_free(a + 64) == FR_ERR_INVALID_ARG && strstr(fr_last_error(), "inside"),
             "freeing an inner address was not refused with a message (%s)", fr_last_error());
    TU_CHECK(fr_mem_free(a) == FR_SUCCESS, "fr_mem_free: %s", fr_last_error());
    TU_CHECK(fr_mem_free(a) == FR_ERR_INVALID_ARG, "a second free was not refused");
    TU_CHECK(!fr_mem_shared(a, 1), "a freed buffer is still reported shared");
}

/* HugePages_Free of /proc/meminfo, -1 when unknown. */
static long huge_free(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "HugePages_Free: %ld", &v) == 1) break;
    if (f) fclose(f);
    return v;
}

/* Where the site reserved huge pages (run_mpi.sh reserves some as root):
 * a 4 MiB buffer takes two of them, or none with FASTREDUCE_HUGE_PAGES=0;
 * a buffer larger than the free pool still comes, of ordinary pages. Rank
 * 0 alone, so that no other rank takes pages meanwhile. */
static void test_huge_pages(void)
{
    long before = huge_free();
    MPI_Bcast(&before, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    if (before < 4) {
        if (me == 0) printf("test_zcopy: huge pages: %ld free, not tested\n", before);
        return;
    }
    tu_begin("fr_mem_alloc takes huge pages where some are free, and ordinary ones beyond");
    if (me != 0) {
        MPI_Barrier(MPI_COMM_WORLD);
        return;
    }
    void *a = NULL, *b = NULL, *c = NULL;
    TU_CHECK(fr_mem_alloc(4u << 20, &a) == FR_SUCCESS, "fr_mem_alloc 4 MiB: %s", fr_last_error());
    long used = before - huge_free();
    TU_CHECK(used == 2, "a 4 MiB buffer took %ld huge pages, want 2", used);
    setenv("FASTREDUCE_HUGE_PAGES", "0", 1);
    TU_CHECK(fr_mem_alloc(4u << 20, &b) == FR_SUCCESS, "fr_mem_alloc 4 MiB: %s", fr_last_error());
    unsetenv("FASTREDUCE_HUGE_PAGES");
    TU_CHECK(before - huge_free() == 2, "with FASTREDUCE_HUGE_PAGES=0 a buffer took huge pages");
    size_t big = (size_t)(huge_free() + 1) * (2u << 20);
    TU_CHECK(fr_mem_alloc(big, &c) == FR_SUCCESS, "fr_mem_alloc of more than the pool: %s", fr_last_error());
    TU_CHECK(before - huge_free() == 2, "a buffer larger than the pool took huge pages");
    memset(a, 1, 4u << 20);
    memset(c, 2, big);
    fr_mem_free(a);
    fr_mem_free(b);
    fr_mem_free(c);
    TU_CHECK(huge_free() == before, "%ld huge pages free after the frees, %ld before", huge_free(), before);
    printf("test_zcopy: huge pages: used (%ld free)\n", before);
    MPI_Barrier(MPI_COMM_WORLD);
}

static void test_allreduce_grid(void)
{
    const pattern_t full[] = { {"all-shared", all_shared, 0}, {"none-shared", none_shared, 0},
                               {"last-recv-private", one_differs, 4 * (np - 1) + 1} };
    const size_t counts[] = { 0, 7, 70001 };
    /* (from 4 KiB, or 64 KiB where the machine's ranks outnumber its cores) */
    const size_t zc_min = fr_comm_zero_copy_min(comm, FR_COLL_ALLREDUCE);
    tu_begin("the allreduce's zero-copy threshold");
    TU_CHECK(!zc_on || zc_min == 4096 || zc_min == 65536, "the allreduce's zero-copy threshold is %zu", zc_min);
    for (int dt = 0; dt < FR_DTYPE_COUNT; dt++)
        for (int op = 0; op < FR_OP_COUNT; op++)
            for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
                for (int inplace = 0; inplace < 2; inplace++)
                    for (size_t p = 0; p < sizeof full / sizeof full[0]; p++)
                        allreduce_case(comm, "default", (fr_dtype_t)dt, (fr_op_t)op, counts[k], inplace, &full[p],
                                       expected_zc(comm, every_rank_shared(&full[p], inplace), counts[k],
                                                   (fr_dtype_t)dt, (fr_op_t)op));
    /* every way one rank's buffers can differ from the others', and every other rank's */
    const size_t sizes[] = { 16411, quick ? 300007 : 2500007 };
    for (size_t k = 0; k < 2; k++)
        for (int inplace = 0; inplace < 2; inplace++) {
            int npat = 0;
            pattern_t pats[4 * 6 + 1];
            pats[npat++] = (pattern_t){"alternate", alternate, 0};
            for (int r = 0; r < np && r < 6; r++)
                for (int m = 0; m < 3; m++) pats[npat++] = (pattern_t){"one-rank-differs", one_differs, 4 * r + m};
            for (int p = 0; p < npat; p++) {
                allreduce_case(comm, "default", FR_FLOAT32, FR_SUM, sizes[k], inplace, &pats[p],
                               expected_zc(comm, every_rank_shared(&pats[p], inplace), sizes[k], FR_FLOAT32, FR_SUM));
                allreduce_case(comm, "default", FR_INT8, FR_MAX, sizes[k], inplace, &pats[p],
                               expected_zc(comm, every_rank_shared(&pats[p], inplace), sizes[k], FR_INT8, FR_MAX));
            }
        }
}

/* A communicator forcing @p a (NULL when it cannot be made). */
static fr_comm_t forcing(const fr_alg_t *a, char *spec, size_t len)
{
    fr_config_t cfg = FR_CONFIG_INIT;
    fr_comm_t c;
    cfg.algo = tu_force_spec(a, spec, len);
    tu_begin("fr_comm_create forcing %s", spec);
    if (!TU_CHECK(fr_comm_create(MPI_COMM_WORLD, &cfg, &c) == FR_SUCCESS, "%s", fr_last_error())) return NULL;
    return c;
}

static void test_forced(void)
{
    const fr_alg_t *algs[TU_MAX_FORCED];
    char spec[64];
    fr_comm_t c;
    int n = tu_forced("test_zcopy", FR_COLL_ALLREDUCE, 0, algs);
    pattern_t shared = {"all-shared", all_shared, 0}, mixed = {"last-send-private", one_differs, 4 * (np - 1) + 2};
    for (int i = 0; i < n; i++) {
        if (!(c = forcing(algs[i], spec, sizeof spec))) continue;
        /* (one that cannot serve one node falls back to the table's choice, shm) */
        for (int inplace = 0; inplace < 2; inplace++) {
            allreduce_case(c, spec, FR_FLOAT32, FR_SUM, 70001, inplace, &shared,
                           expected_zc(c, 1, 70001, FR_FLOAT32, FR_SUM));
            allreduce_case(c, spec, FR_INT32, FR_MIN, 70001, inplace, &mixed,
                           expected_zc(c, every_rank_shared(&mixed, inplace), 70001, FR_INT32, FR_MIN));
        }
        fr_comm_destroy(c);
    }
    n = tu_forced("test_zcopy", FR_COLL_BCAST, 0, algs);
    for (int i = 0; i < n; i++) {
        if (!(c = forcing(algs[i], spec, sizeof spec))) continue;
        int want = zc_on && !strcmp(fr_bcast_algorithm(c, 200003, FR_INT8, 0), "shm") &&
                   200003 >= fr_comm_zero_copy_min(c, FR_COLL_BCAST);
        for (int root = 0; root < np; root++) bcast_case(c, 200003, root, 1, want);
        fr_comm_destroy(c);
    }
}

static void test_bcast_grid(void)
{
    const size_t sizes[] = { 0, 5, 65536, 70001, quick ? 300007 : 4000037 };
    /* (from 32 KiB, or 128 KiB where the machine's ranks outnumber its
     * cores: the threshold fastreduce-info reports) */
    const size_t zc_min = fr_comm_zero_copy_min(comm, FR_COLL_BCAST);
    tu_begin("the bcast's zero-copy threshold");
    TU_CHECK(!zc_on || zc_min == 32768 || zc_min == 131072, "the bcast's zero-copy threshold is %zu", zc_min);
    for (int root = 0; root < np; root++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
            for (int sh = 0; sh < 2; sh++) {
                int want = sh && zc_on && sizes[k] >= zc_min;
                bcast_case(comm, sizes[k], root, sh, want);
            }
}

/* Floats whose sums round: a zero-copy result must have the copy path's
 * bits (the same result whatever memory a program uses), at sizes of the
 * one-shot path, of one chunk and of many. */
static void test_same_bits(void)
{
    const size_t counts[] = { 1500, 3001, 70001, 300007, quick ? 400009 : 2500007 };
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
        for (int dt = 0; dt < 2; dt++) {
            const size_t n = counts[k], es = dt ? 8 : 4;
            tu_begin("float%d sum of %zu rounding elements: zero-copy gives the copy path's bits", dt ? 64 : 32, n);
            buf_t sh_s, sh_r, pr_r;
            buf_get(&sh_s, n * es, 1);
            buf_get(&sh_r, n * es, 1);
            buf_get(&pr_r, n * es, 0);
            for (size_t i = 0; i < n; i++) {
                double v = (double)tu_hash3(i, (uint64_t)me, k) / 1e17 * (me % 2 ? -1.0 : 1.0) + 1.0 / (double)(me + 3);
                if (dt) memcpy(sh_s.p + 8 * i, &v, 8);
                else { float f = (float)v; memcpy(sh_s.p + 4 * i, &f, 4); }
            }
            fr_dtype_t t = dt ? FR_FLOAT64 : FR_FLOAT32;
            fr_status_t a = fr_allreduce(sh_s.p, sh_r.p, n, t, FR_SUM, comm);
            int zc = fr_last_zero_copy();
            fr_status_t b = fr_allreduce(sh_s.p, pr_r.p, n, t, FR_SUM, comm);
            int zc_private = fr_last_zero_copy();
            TU_CHECK(a == FR_SUCCESS && b == FR_SUCCESS, "%s, %s", tu_status(a), tu_status(b));
            TU_CHECK(!zc_private, "a call with a private receive buffer went zero-copy");
            int want = expected_zc(comm, 1, n, t, FR_SUM);
            TU_CHECK(zc == want, "fr_last_zero_copy() was %d for the shared buffers, want %d", zc, want);
            size_t nbad, i = tu_first_diff(sh_r.p, pr_r.p, n, es, &nbad);
            TU_CHECK(i == n, "%zu of %zu elements differ from the copy path's, the first at %zu", nbad, n, i);
            buf_put(&sh_s);
            buf_put(&sh_r);
            buf_put(&pr_r);
        }
}

/* Four requests in flight on shared buffers, each reported zero-copy to
 * the thread that completes it, then a grouped call mixing shared buffers
 * of several sizes. */
static void test_requests_group(void)
{
    enum { NREQ = 4 };
    const size_t count = 50021;
    tu_begin("%d fr_iallreduce in flight on shared buffers, completed in reverse", NREQ);
    buf_t b[NREQ];
    fr_request_t q[NREQ];
    float want = (float)(np * (np + 1) / 2);
    for (int k = 0; k < NREQ; k++) {
        buf_get(&b[k], count * 4, 1);
        float *f = (float *)b[k].p;
        for (size_t i = 0; i < count; i++) f[i] = (float)((me + 1) * (k + 1));
        if (fr_iallreduce(FR_IN_PLACE, f, count, FR_FLOAT32, FR_SUM, comm, &q[k]) != FR_SUCCESS)
            tu_fail("fr_iallreduce %d: %s", k, fr_last_error());
    }
    /* (a small blocking call: this thread's last collective is then not
     * zero-copy, until a wait completes a request that was) */
    int32_t one = 1;
    TU_CHECK(fr_allreduce(FR_IN_PLACE, &one, 1, FR_INT32, FR_SUM, comm) == FR_SUCCESS, "fr_allreduce: %s",
             fr_last_error());
    const int want_zc = expected_zc(comm, 1, count, FR_FLOAT32, FR_SUM);
    for (int k = NREQ - 1; k >= 0; k--) {
        TU_CHECK(fr_wait(&q[k]) == FR_SUCCESS, "fr_wait %d: %s", k, fr_last_error());
        TU_CHECK(fr_last_zero_copy() == want_zc, "request %d: fr_last_zero_copy() is %d after fr_wait, want %d", k,
                 fr_last_zero_copy(), want_zc);
        const float *f = (const float *)b[k].p;
        size_t bad = 0;
        for (size_t i = 0; i < count; i++) bad += f[i] != want * (float)(k + 1);
        TU_CHECK(!bad, "request %d: %zu elements wrong", k, bad);
        check_guards("request buffer", b[k].p, b[k].nb);
        buf_put(&b[k]);
    }

    tu_begin("fr_allreduce_group on shared and private buffers of uneven sizes");
    const size_t counts[] = { 3, 100000, 0, 7000, 30011 };
    enum { NG = 5 };
    buf_t sb[NG], rb[NG];
    const void *sp[NG];
    void *rp[NG];
    for (int k = 0; k < NG; k++) {
        buf_get(&sb[k], counts[k] * 4, (k + me) % 3 != 0);
        buf_get(&rb[k], counts[k] * 4, k % 2 == 0);
        int32_t *s = (int32_t *)sb[k].p;
        for (size_t i = 0; i < counts[k]; i++) s[i] = (int32_t)(i % 1000) * (me + 1) + k;
        sp[k] = sb[k].p;
        rp[k] = rb[k].p;
    }
    fr_status_t st = fr_allreduce_group(sp, rp, counts, NG, FR_INT32, FR_SUM, comm);
    TU_CHECK(st == FR_SUCCESS, "fr_allreduce_group: %s", fr_last_error());
    for (int k = 0; k < NG; k++) {
        const int32_t *r = (const int32_t *)rb[k].p;
        size_t bad = 0;
        for (size_t i = 0; i < counts[k]; i++)
            bad += r[i] != (int32_t)(i % 1000) * (np * (np + 1) / 2) + k * np;
        TU_CHECK(!bad, "buffer %d: %zu elements wrong", k, bad);
        check_guards("group send", sb[k].p, sb[k].nb);
        check_guards("group recv", rb[k].p, rb[k].nb);
        buf_put(&sb[k]);
        buf_put(&rb[k]);
    }
}

/* Allreduce of shared buffers that are freed and made again between
 * calls: on every rank, on rank 0 only, with other allocations in between
 * so that descriptors and addresses are reused. */
static void test_realloc(void)
{
    const size_t count = 40009;
    buf_t keep = {0}, extra[3];
    for (int round = 0; round < 6; round++) {
        int every = round % 2 == 0;
        tu_begin("allreduce after %s freed and reallocated its buffers (round %d)", every ? "every rank" : "rank 0",
                 round);
        if (every || me == 0) {
            if (keep.p) buf_put(&keep);
            /* (rank 1 shifts its descriptors and addresses) */
            int ne = me == 1 ? round % 3 + 1 : 0;
            for (int e = 0; e < ne; e++) buf_get(&extra[e], 4096 * (size_t)(e + 1), 1);
            buf_get(&keep, count * 4, 1);
            for (int e = 0; e < ne; e++) buf_put(&extra[e]);
        }
        int32_t *v = (int32_t *)keep.p;
        for (size_t i = 0; i < count; i++) v[i] = (int32_t)(i * 3 + (size_t)round) * (me + 1);
        fr_status_t st = fr_allreduce(FR_IN_PLACE, v, count, FR_INT32, FR_SUM, comm);
        size_t bad = 0;
        for (size_t i = 0; i < count && st == FR_SUCCESS; i++)
            bad += v[i] != (int32_t)(i * 3 + (size_t)round) * (np * (np + 1) / 2);
        TU_CHECK(st == FR_SUCCESS && !bad, "%s, %zu elements wrong", tu_status(st), bad);
        check_zc(expected_zc(comm, 1, count, FR_INT32, FR_SUM));
    }
    buf_put(&keep);
}

static void *alloc_thread(void *arg)
{
    buf_t *b = arg;
    buf_get(b, 300000 * 4, 1);
    return NULL;
}

typedef struct {
    buf_t *b;
    fr_status_t st;
} use_arg_t;

static void *use_thread(void *arg)
{
    use_arg_t *u = arg;
    u->st = fr_allreduce(FR_IN_PLACE, u->b->p, 300000, FR_FLOAT32, FR_MAX, comm);
    return NULL;
}

static void test_threads(int level)
{
    tu_begin("memory allocated by one thread, used in a collective by another (%s)",
             level >= MPI_THREAD_SERIALIZED ? "the call in a third thread" : "the call in the main thread");
    buf_t b;
    pthread_t t;
    pthread_create(&t, NULL, alloc_thread, &b);
    pthread_join(t, NULL);
    float *f = (float *)b.p;
    for (size_t i = 0; i < 300000; i++) f[i] = (float)((i + (size_t)me) % (size_t)np);
    use_arg_t u = {&b, FR_SUCCESS};
    if (level >= MPI_THREAD_SERIALIZED) {
        pthread_create(&t, NULL, use_thread, &u);
        pthread_join(t, NULL);
    } else {
        use_thread(&u);
    }
    size_t bad = 0;
    for (size_t i = 0; i < 300000; i++) bad += f[i] != (float)(np - 1);
    TU_CHECK(u.st == FR_SUCCESS && !bad, "%s, %zu elements wrong", tu_status(u.st), bad);
    check_guards("buffer", b.p, b.nb);
    buf_put(&b);
}

/* FASTREDUCE_ZERO_COPY=0 on the last rank only: every call takes the copy path. */
static void test_setting_off(void)
{
    tu_begin("FASTREDUCE_ZERO_COPY=0 on rank %d only", np - 1);
    if (me == np - 1) setenv("FASTREDUCE_ZERO_COPY", "0", 1);
    fr_comm_t c;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &c);
    unsetenv("FASTREDUCE_ZERO_COPY");
    if (!TU_CHECK(st == FR_SUCCESS, "fr_comm_create: %s", fr_last_error())) return;
    pattern_t shared = {"all-shared", all_shared, 0};
    allreduce_case(c, "zero-copy off on one rank", FR_FLOAT64, FR_SUM, 100003, 0, &shared, 0);
    /* (a reader with it off does not map the root's buffer either) */
    for (int root = 0; root < np; root++) bcast_case(c, 300001, root, 1, 0);
    fr_comm_destroy(c);
}

static void limit_files(int limit);

/* An int64 sum of @p n elements on new shared buffers of every rank, in
 * place or not, while the last rank cannot open files (so cannot map its
 * peers' buffers): whether the result is right (a failure recorded if not);
 * *zc: whether the call went zero-copy. */
static int unmappable_allreduce(fr_comm_t c, size_t n, int inplace, int *zc)
{
    buf_t s, r;
    buf_get(&s, n * 8, 1);
    buf_get(&r, n * 8, 1);
    int64_t *sv = (int64_t *)s.p, *rv = (int64_t *)r.p;
    for (size_t i = 0; i < n; i++) (inplace ? rv : sv)[i] = (int64_t)(i * 7 % 1001) * (me + 1) - me;
    MPI_Barrier(MPI_COMM_WORLD);
    limit_files(1);
    fr_status_t st = fr_allreduce(inplace ? FR_IN_PLACE : sv, rv, n, FR_INT64, FR_SUM, c);
    *zc = fr_last_zero_copy();
    limit_files(0);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += rv[i] != (int64_t)(i * 7 % 1001) * (np * (np + 1) / 2) - np * (np - 1) / 2;
    TU_CHECK(st == FR_SUCCESS && !bad, "%s (%s), %zu elements wrong", tu_status(st), fr_last_error(), bad);
    check_guards("recvbuf", r.p, r.nb);
    buf_put(&s);
    buf_put(&r);
    return st == FR_SUCCESS && !bad;
}

/* A bcast of @p nb bytes from @p root on a new shared buffer of every rank
 * while the last rank cannot open files: whether the data arrived (a
 * failure recorded if not); *zc: whether the call went zero-copy. */
static int unmappable_bcast(fr_comm_t c, size_t nb, int root, int *zc)
{
    unsigned char *want = tu_alloc(nb);
    fill_pattern(want, nb, 4242u + (unsigned)root);
    buf_t b;
    buf_get(&b, nb, 1);
    if (me == root) memcpy(b.p, want, nb);
    MPI_Barrier(MPI_COMM_WORLD);
    limit_files(1);
    fr_status_t st = fr_bcast(b.p, nb, FR_UINT8, root, c);
    *zc = fr_last_zero_copy();
    limit_files(0);
    int ok = TU_CHECK(st == FR_SUCCESS, "fr_bcast: %s (%s)", tu_status(st), fr_last_error());
    if (ok) check_equal("data", b.p, want, nb, FR_UINT8);
    buf_put(&b);
    tu_free(want);
    return ok;
}

/* Several nodes (faked with FASTREDUCE_NODE_SIZE): hier's node stages go
 * zero-copy on a node whose ranks' buffers are all shared, whatever the
 * other nodes do; results against the reference, and the bits of the
 * copy path on rounding floats. */
static int node_of(int r, int node_size) { return node_size > 0 ? r / node_size : 0; }
static int node_size_g;
static int node_shared(int r, int a)   /* a: the node whose last rank's buffers are private (-1: none) */
{
    int n = node_of(r, node_size_g);
    return n == a && (r + 1 == np || node_of(r + 1, node_size_g) != n) ? 0 : 3;
}

/* hier bcast from @p root: every buffer shared but the leader's of node
 * @p a (the root on its node, else the node's first rank; -1: none). A
 * node's stage goes zero-copy when its leader's buffer is shared. */
static void hier_bcast_case(fr_comm_t c, int node_size, size_t nb, int root, int a)
{
    int leader_of_me = node_of(root, node_size) == node_of(me, node_size) ? root : node_of(me, node_size) * node_size;
    int private_leader = a >= 0 && (node_of(root, node_size) == a ? root : a * node_size) == me;
    tu_begin("hier bcast %zu bytes from %d, node %d's leader private", nb, root, a);
    unsigned char *want = tu_alloc(nb);
    fill_pattern(want, nb, tu_hash3(nb, (uint64_t)root, (uint64_t)(a + 7)));
    buf_t b;
    buf_get(&b, nb, !private_leader);
    if (me == root) memcpy(b.p, want, nb);
    else memset(b.p, 0x3C, nb);
    fr_status_t st = fr_bcast(b.p, nb, FR_UINT8, root, c);
    int zc = fr_last_zero_copy();
    if (TU_CHECK(st == FR_SUCCESS, "fr_bcast: %s (%s)", tu_status(st), fr_last_error()))
        check_equal("data", b.p, want, nb, FR_UINT8);
    int hier = !strcmp(fr_bcast_algorithm(c, nb, FR_UINT8, root), "hier");
    int first = node_of(me, node_size) * node_size, here = np - first < node_size ? np - first : node_size;
    int want_zc = zc_on && hier && here > 1 && node_of(leader_of_me, node_size) != a && nb >= 65536;
    if (zc_on && hier && here > 1 && node_of(me, node_size) != a && nb >= 65536)
        TU_CHECK(zc == want_zc, "fr_last_zero_copy() is %d, want %d", zc, want_zc);
    if (node_of(me, node_size) == a) TU_CHECK(!zc, "zero-copy on the node whose leader's buffer is private");
    check_guards("buffer", b.p, nb);
    buf_put(&b);
    tu_free(want);
}

/* hier over chunks of 1 MiB (a rule's chunk=) and a last chunk of 1000
 * floats: the copy path pipelines the chunks, every slice by the ring,
 * while a slice that small alone would cross by recursive doubling. A node
 * zero-copy and a node on the copy path must still cross alike. */
static void test_hier_last_chunk(int node_size)
{
    fr_config_t cfg = FR_CONFIG_INIT;
    char rule[] = "allreduce host * * * hier chunk=1M";
    cfg.tune = rule;
    fr_comm_t c;
    tu_begin("fr_comm_create with the rule '%s', nodes of %d ranks", rule, node_size);
    if (!TU_CHECK(fr_comm_create(MPI_COMM_WORLD, &cfg, &c) == FR_SUCCESS, "%s", fr_last_error())) return;
    const size_t count = 2 * (1u << 20) / 4 + 1000;
    int hier = !strcmp(fr_allreduce_algorithm(c, count, FR_FLOAT32, FR_SUM), "hier");
    for (int a = -1; a < 2; a++) {
        pattern_t pt = {"node-shared", node_shared, a};
        for (int inplace = 0; inplace < 2; inplace++)
            allreduce_case(c, "hier chunk=1M", FR_FLOAT32, FR_SUM, count, inplace, &pt,
                           zc_on && hier && node_of(me, node_size) != a);
    }
    TU_CHECK(fr_comm_destroy(c) == FR_SUCCESS, "fr_comm_destroy: %s", fr_last_error());
}

static void test_hier(int node_size)
{
    node_size_g = node_size;
    char spec[] = "allreduce=hier,bcast=hier";
    fr_config_t cfg = FR_CONFIG_INIT;
    cfg.algo = spec;
    fr_comm_t c;
    tu_begin("fr_comm_create forcing hier over nodes of %d ranks", node_size);
    if (!TU_CHECK(fr_comm_create(MPI_COMM_WORLD, &cfg, &c) == FR_SUCCESS, "%s", fr_last_error())) return;
    const size_t counts[] = { 70001, quick ? 600007 : 2500007 };
    const size_t zc_min = fr_comm_zero_copy_min(c, FR_COLL_ALLREDUCE);
    for (int a = -1; a < 2; a++) {
        pattern_t pt = {"node-shared", node_shared, a};
        for (size_t k = 0; k < 2; k++)
            for (int inplace = 0; inplace < 2; inplace++) {
                /* zero-copy on this rank's node when all its ranks are shared (and
                 * hier serves: it declines nodes of unequal sizes) */
                int mine = node_of(me, node_size) != a &&
                           !strcmp(fr_allreduce_algorithm(c, counts[k], FR_FLOAT32, FR_SUM), "hier");
                allreduce_case(c, "hier", FR_FLOAT32, FR_SUM, counts[k], inplace, &pt,
                               zc_on && mine && counts[k] * 4 >= zc_min);
                allreduce_case(c, "hier", FR_INT8, FR_MAX, counts[k], inplace, &pt,
                               zc_on && mine && counts[k] >= zc_min);
            }
    }
    /* the last rank cannot map its peers' new buffers: its node takes the
     * copy path, the others zero-copy, and the results hold */
    for (int inplace = 0; inplace < 2 && zc_on; inplace++) {
        tu_begin("hier where rank %d cannot map its peers' buffers, inplace=%d", np - 1, inplace);
        int zc;
        unmappable_allreduce(c, counts[0], inplace, &zc);
        int last_node = node_of(me, node_size) == node_of(np - 1, node_size);
        TU_CHECK(!(last_node && zc), "zero-copy on the node of a rank that could not map");
    }
    for (int root = 0; root < np; root++)
        for (int a = -1; a < 2; a++) {
            hier_bcast_case(c, node_size, 300007, root, a);
            if (!quick) hier_bcast_case(c, node_size, 3000017, root, a);
        }
    hier_bcast_case(c, node_size, 1000, 0, -1);
    /* the last rank cannot map its leader's buffer: its node takes the copy path */
    for (int root = 0; root < np && zc_on; root += np - 1) {
        tu_begin("hier bcast from %d where rank %d cannot map its leader's buffer", root, np - 1);
        int zc;
        unmappable_bcast(c, 700001, root, &zc);
        /* (a root that is the last rank maps nothing: its node may go zero-copy) */
        TU_CHECK(!(zc && node_of(me, node_size) == node_of(np - 1, node_size) && root != np - 1),
                 "zero-copy on the node of a rank that could not map");
    }
    for (size_t k = 0; k < 2; k++) {
        const size_t n = counts[k];
        tu_begin("hier: float32 sum of %zu rounding elements, zero-copy gives the copy path's bits", n);
        buf_t s, r, p;
        buf_get(&s, n * 4, 1);
        buf_get(&r, n * 4, 1);
        buf_get(&p, n * 4, 0);
        for (size_t i = 0; i < n; i++) {
            float f = (float)((double)tu_hash3(i, (uint64_t)me, 9) / 1e17 + 1.0 / (double)(me + 3));
            memcpy(s.p + 4 * i, &f, 4);
        }
        fr_status_t e1 = fr_allreduce(s.p, r.p, n, FR_FLOAT32, FR_SUM, c);
        int zc = fr_last_zero_copy();
        fr_status_t e2 = fr_allreduce(s.p, p.p, n, FR_FLOAT32, FR_SUM, c);
        TU_CHECK(e1 == FR_SUCCESS && e2 == FR_SUCCESS, "%s, %s", tu_status(e1), tu_status(e2));
        int hier = !strcmp(fr_allreduce_algorithm(c, n, FR_FLOAT32, FR_SUM), "hier");
        TU_CHECK(!zc_on || !hier || zc, "the shared buffers' call did not go zero-copy");
        size_t nbad, i = tu_first_diff(r.p, p.p, n, 4, &nbad);
        TU_CHECK(i == n, "%zu of %zu elements differ from the copy path's, the first at %zu", nbad, n, i);
        buf_put(&s);
        buf_put(&r);
        buf_put(&p);
    }
    fr_comm_destroy(c);
}

/* Lower the last rank's open-file limit to the descriptors it has, so that
 * it cannot open its peers' memfds (limit: 1), or restore it (0). */
static void limit_files(int limit)
{
    static struct rlimit old;
    if (me != np - 1) return;
    if (!limit) {
        setrlimit(RLIMIT_NOFILE, &old);
        return;
    }
    getrlimit(RLIMIT_NOFILE, &old);
    int fd = dup(0);   /* the lowest free descriptor: a limit there refuses every open */
    if (fd < 0) return;
    close(fd);
    struct rlimit low = old;
    low.rlim_cur = (rlim_t)fd;
    setrlimit(RLIMIT_NOFILE, &low);
}

/* The last rank cannot open another file, so it cannot map its peers'
 * new buffers: the calls must still be right, by the copy path (the
 * buffers are made before the limit, and are new to the peers). */
static void test_map_failure(void)
{
    const size_t count = 200003;
    for (int inplace = 0; inplace < 2; inplace++) {
        tu_begin("allreduce where rank %d cannot map its peers' buffers, inplace=%d", np - 1, inplace);
        int zc;
        unmappable_allreduce(comm, count, inplace, &zc);
        TU_CHECK(np == 1 || !zc, "fr_last_zero_copy() is 1 although a rank could not map");
    }
    for (int root = 0; root < np - 1; root++) {
        tu_begin("bcast from %d where rank %d cannot map the root's buffer", root, np - 1);
        int zc;
        unmappable_bcast(comm, 500009, root, &zc);
        TU_CHECK(!zc, "fr_last_zero_copy() is 1 although a rank could not map");
    }
    pattern_t shared = {"all-shared", all_shared, 0};
    allreduce_case(comm, "after the limit is restored", FR_FLOAT32, FR_SUM, count, 0, &shared,
                   expected_zc(comm, 1, count, FR_FLOAT32, FR_SUM));
}

int main(int argc, char **argv)
{
    int level;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &level);
    tu_init("test_zcopy");
    np = tu.size;
    me = tu.rank;
    quick = tu_quick(argc, argv);
    int forced = 1;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--no-forced")) forced = 0;
    if (fr_comm_create(MPI_COMM_WORLD, NULL, &comm) != FR_SUCCESS) {
        tu_fail("fr_comm_create: %s", fr_last_error());
        int rc = tu_finish();
        MPI_Finalize();
        return rc ? rc : 1;
    }
    /* With several nodes (faked), hier's node stages alone. */
    const char *ns = getenv("FASTREDUCE_NODE_SIZE");
    int node_size = ns ? atoi(ns) : 0;
    if (node_size > 0 && node_size < np) {
        zc_on = node_size >= 2 && getenv("FR_TEST_NO_ZCOPY") == NULL;   /* (a rank a node shares nothing) */
        if (me == 0) printf("test_zcopy np=%d: nodes of %d ranks, hier\n", np, node_size);
        test_allocator();
        test_hier(node_size);
        test_hier_last_chunk(node_size);
        fr_comm_destroy(comm);
        int rc = tu_finish();
        MPI_Finalize();
        return rc;
    }
    /* Zero-copy needs a node of two ranks or more, which open each other's
     * memfds: a first large call on shared buffers says whether they do. */
    zc_on = 0;
    if (np > 1) {
        buf_t b;
        buf_get(&b, 1 << 20, 1);
        fr_allreduce(FR_IN_PLACE, b.p, (1 << 20) / 4, FR_INT32, FR_SUM, comm);
        int mine = fr_last_zero_copy(), all;
        MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        zc_on = all;
        buf_put(&b);
        if (me == 0) printf("test_zcopy np=%d: zero-copy %s here\n", np, zc_on ? "works" : "is not possible");
    }
    tu_begin("zero-copy works on one node of %d ranks", np);
    TU_CHECK(np == 1 || zc_on || getenv("FR_TEST_NO_ZCOPY"), "a large allreduce on shared buffers did not go "
             "zero-copy");
    test_allocator();
    test_huge_pages();
    test_allreduce_grid();
    test_bcast_grid();
    if (forced) test_forced();
    test_same_bits();
    test_requests_group();
    test_realloc();
    test_threads(level);
    test_setting_off();
    /* (where no call can go zero-copy there is no mapping to fail; and a
     * lowered file limit could refuse the MPI library's own late
     * connections, as MPICH's over TCP between PID namespaces) */
    if (zc_on) test_map_failure();
    fr_comm_destroy(comm);
    int rc = tu_finish();
    MPI_Finalize();
    return rc;
}

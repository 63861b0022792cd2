/* test_cma: the bcast whose other ranks copy a private root buffer straight
 * from the root's memory (cma, process_vm_readv).
 *
 *  1. Where it can happen (one node of 2+ ranks that may read each other,
 *     and a core each or FASTREDUCE_CMA=always), a 256 KiB bcast of private
 *     buffers goes by cma on every rank; with FR_TEST_NO_CMA=1 (FASTREDUCE_CMA=0
 *     on some rank, ranks in PID namespaces of their own) it must not.
 *  2. Every root, sizes on both sides of 64 KiB and 512 KiB and count 0, the
 *     root's buffer private or fr_mem_alloc's, the others mixed: the data is
 *     the root's, guard bytes hold, and fr_last_cma() is 1 exactly where the
 *     rule says: cma possible, the table chose shm, 64 KiB to 512 KiB, and the
 *     root's buffer private or too small to go zero-copy.
 *  3. Many bcasts in a row, the root rewriting the same buffer and moving
 *     every call: each reader gets that call's data.
 *  4. Requests: several fr_ibcast in flight from different roots.
 *  5. Two communicators used at once from two threads.
 *  6. A root buffer the kernel will not let other processes read (secret
 *     memory, memfd_secret, where the kernel has it): the readers' copies
 *     fail, and every rank takes the copy path, with the right data.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <unistd.h>
#include "testutil.h"
#include "internal.h"   /* fr_last_cma, fr_comm_zero_copy_min */

static int np, me, quick;
static fr_comm_t comm;
static int cma_on;   /* a bcast of the range goes by cma here (section 1 checks it) */

#define CMA_MIN ((size_t)65536)
#define CMA_MAX ((size_t)512 * 1024)

/* The root's data of call @p salt: a byte pattern no other call repeats. */
static void fill(unsigned char *p, size_t nb, uint64_t salt)
{
    for (size_t i = 0; i < nb; i += 8) {
        uint64_t v = tu_hash3(salt, i, 0xC3A);
        memcpy(p + i, &v, nb - i < 8 ? nb - i : 8);
    }
}

/* Whether a bcast of @p nb bytes from @p root goes by cma (@p shared: the
 * root's buffer is fr_mem_alloc's). */
static int expected_cma(fr_comm_t c, size_t nb, int root, int shared)
{
    if (!cma_on || nb < CMA_MIN || nb > CMA_MAX) return 0;
    if (strcmp(fr_bcast_algorithm(c, nb, FR_UINT8, root), "shm")) return 0;
    size_t zc_min = fr_comm_zero_copy_min(c, FR_COLL_BCAST);
    return !(shared && zc_min && nb >= zc_min);
}

/* A buffer of nb bytes with guards, from fr_mem_alloc (shared) or malloc. */
static unsigned char *get(size_t nb, int shared, void **base)
{
    unsigned char *p;
    *base = NULL;
    if (!shared) {
        p = tu_alloc(nb);
    } else {
        if (fr_mem_alloc(nb + 2 * TU_GUARD, base) != FR_SUCCESS) {
            tu_fail("fr_mem_alloc(%zu): %s", nb, fr_last_error());
            MPI_Abort(MPI_COMM_WORLD, 3);
        }
        p = (unsigned char *)*base + TU_GUARD;
    }
    tu_guard_set(p, nb);
    return p;
}

static void put(unsigned char *p, void *base)
{
    if (base) TU_CHECK(fr_mem_free(base) == FR_SUCCESS, "fr_mem_free: %s", fr_last_error());
    else tu_free(p);
}

static void check_data(const unsigned char *got, const unsigned char *want, size_t nb)
{
    size_t nbad, i = tu_first_diff(got, want, nb, 1, &nbad);
    TU_CHECK(i == nb, "%zu of %zu bytes differ from the root's, the first at %zu", nbad, nb, i);
    long where;
    TU_CHECK(tu_guard_ok(got, nb, &where), "a guard byte changed at offset %ld", where);
}

static void bcast_case(fr_comm_t c, size_t nb, int root, int root_shared)
{
    int shared = me == root ? root_shared : (me + (int)(nb % 7)) % 2;
    tu_begin("bcast %zu bytes from %d, root's buffer %s, this rank's %s", nb, root,
             root_shared ? "shared" : "private", shared ? "shared" : "private");
    unsigned char *want = tu_alloc(nb);
    fill(want, nb, tu_hash3(nb, (uint64_t)root, (uint64_t)root_shared));
    void *base;
    unsigned char *b = get(nb, shared, &base);
    if (me == root) memcpy(b, want, nb);
    else memset(b, 0x5A, nb);
    fr_status_t st = fr_bcast(b, nb, FR_UINT8, root, c);
    if (TU_CHECK(st == FR_SUCCESS, "fr_bcast: %s (%s)", tu_status(st), fr_last_error())) {
        check_data(b, want, nb);
        int want_cma = expected_cma(c, nb, root, root_shared), got = fr_last_cma();
        TU_CHECK(got == want_cma, "fr_last_cma() is %d, want %d", got, want_cma);
    }
    put(b, base);
    tu_free(want);
}

static void test_grid(void)
{
    const size_t sizes[] = { 0, 1, CMA_MIN - 1, CMA_MIN, CMA_MIN + 13, 300007, CMA_MAX, CMA_MAX + 1,
                             quick ? 1500001 : 4000037 };
    for (int root = 0; root < np; root++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
            for (int sh = 0; sh < 2; sh++) bcast_case(comm, sizes[k], root, sh);
}

/* The root rewrites one buffer for every call and moves each time. */
static void test_stream(void)
{
    const size_t nb = 200003;
    const int calls = quick ? 40 : 200;
    tu_begin("%d bcasts of %zu bytes in a row, one buffer, the root moving and rewriting it", calls, nb);
    unsigned char *b = tu_alloc(nb), *want = tu_alloc(nb);
    int bad = -1, ncma = 0;
    for (int i = 0; i < calls; i++) {
        int root = i % np;
        fill(want, nb, tu_hash3((uint64_t)i, 0x57, 0));
        if (me == root) memcpy(b, want, nb);
        if ((fr_bcast(b, nb, FR_UINT8, root, comm) != FR_SUCCESS || memcmp(b, want, nb)) && bad < 0) bad = i;
        ncma += fr_last_cma();
    }
    TU_CHECK(bad < 0, "call %d: %s", bad, fr_last_error());
    TU_CHECK(ncma == (cma_on ? calls : 0), "%d of %d calls went by cma, want %d", ncma, calls, cma_on ? calls : 0);
    tu_free(b);
    tu_free(want);
}

/* Several requests in flight, each from another root. */
static void test_requests(void)
{
    enum { NREQ = 6 };
    const size_t nb = 131101;
    tu_begin("%d fr_ibcast of %zu bytes in flight, roots moving", NREQ, nb);
    unsigned char *b[NREQ], *want[NREQ];
    fr_request_t rq[NREQ];
    int started = 0;
    for (int k = 0; k < NREQ; k++) {
        b[k] = tu_alloc(nb);
        tu_guard_set(b[k], nb);
        want[k] = tu_alloc(nb);
        fill(want[k], nb, tu_hash3((uint64_t)k, 0x1B, 0));
        if (me == k % np) memcpy(b[k], want[k], nb);
        else memset(b[k], 0, nb);
        fr_status_t st = fr_ibcast(b[k], nb, FR_UINT8, k % np, comm, &rq[k]);
        if (TU_CHECK(st == FR_SUCCESS, "fr_ibcast %d: %s", k, fr_last_error())) started++;
    }
    for (int k = 0; k < started; k++) {
        fr_status_t st = fr_wait(&rq[k]);
        if (TU_CHECK(st == FR_SUCCESS, "fr_wait %d: %s", k, fr_last_error())) {
            check_data(b[k], want[k], nb);
            int want_cma = expected_cma(comm, nb, k % np, 0), got = fr_last_cma();
            TU_CHECK(got == want_cma, "request %d: fr_last_cma() is %d after fr_wait, want %d", k, got, want_cma);
        }
    }
    for (int k = 0; k < NREQ; k++) {
        tu_free(b[k]);
        tu_free(want[k]);
    }
}

typedef struct {
    fr_comm_t c;
    uint64_t salt;
    int bad, ncma;
} thr_t;

static void *thread_bcasts(void *arg)
{
    thr_t *t = arg;
    const size_t nb = 262147;
    unsigned char *b = tu_alloc(nb), *want = tu_alloc(nb);
    t->bad = -1;
    t->ncma = 0;
    for (int i = 0; i < 30; i++) {
        int root = (i + (int)t->salt) % np;
        fill(want, nb, tu_hash3(t->salt, (uint64_t)i, 0x7));
        if (me == root) memcpy(b, want, nb);
        if ((fr_bcast(b, nb, FR_UINT8, root, t->c) != FR_SUCCESS || memcmp(b, want, nb)) && t->bad < 0) t->bad = i;
        t->ncma += fr_last_cma();
    }
    tu_free(b);
    tu_free(want);
    return NULL;
}

static void test_threads(int level)
{
    if (level < MPI_THREAD_MULTIPLE) return;
    tu_begin("two communicators, one thread each, bcasting at once");
    thr_t t[2] = {{.salt = 1}, {.salt = 2}};
    int made = 0;
    for (int k = 0; k < 2; k++) made += fr_comm_create(MPI_COMM_WORLD, NULL, &t[k].c) == FR_SUCCESS;
    if (!TU_CHECK(made == 2, "fr_comm_create: %s", fr_last_error())) return;
    pthread_t th[2];
    for (int k = 0; k < 2; k++) pthread_create(&th[k], NULL, thread_bcasts, &t[k]);
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    for (int k = 0; k < 2; k++) {
        TU_CHECK(t[k].bad < 0, "communicator %d: call %d failed or gave other data", k, t[k].bad);
        TU_CHECK(t[k].ncma == (cma_on ? 30 : 0), "communicator %d: %d of 30 calls went by cma, want %d", k,
                 t[k].ncma, cma_on ? 30 : 0);
        fr_comm_destroy(t[k].c);
    }
}

/* The root's buffer in secret memory, which no other process may read:
 * the readers' copies fail and the ranks take the copy path together. */
static void test_unreadable_root(void)
{
    const size_t nb = 200003, len = 256 * 1024;
    unsigned char *m = MAP_FAILED;
#ifdef SYS_memfd_secret
    if (me == 0) {
        int fd = (int)syscall(SYS_memfd_secret, 0);
        if (fd >= 0 && ftruncate(fd, (off_t)len) == 0)
            m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (fd >= 0) close(fd);
    }
#endif
    int have = m != MAP_FAILED;
    MPI_Bcast(&have, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!have) {
        if (me == 0) printf("test_cma: no secret memory here (memfd_secret); the unreadable root is not tried\n");
        return;
    }
    tu_begin("bcast of %zu bytes from a root buffer no other process may read", nb);
    unsigned char *want = tu_alloc(nb), *b = me == 0 ? m : tu_alloc(nb);
    fill(want, nb, 0x5EC);
    if (me == 0) memcpy(b, want, nb);
    else memset(b, 0, nb);
    fr_status_t st = fr_bcast(b, nb, FR_UINT8, 0, comm);
    if (TU_CHECK(st == FR_SUCCESS, "fr_bcast: %s (%s)", tu_status(st), fr_last_error())) {
        size_t nbad, i = tu_first_diff(b, want, nb, 1, &nbad);
        TU_CHECK(i == nb, "%zu of %zu bytes differ from the root's, the first at %zu", nbad, nb, i);
        TU_CHECK(fr_last_cma() == 0, "fr_last_cma() is 1 although the root's buffer could not be read");
    }
    if (me == 0) munmap(m, len);
    else tu_free(b);
    tu_free(want);
}

/* The cores the ranks may run on: the union of their affinity masks, as
 * the library counts them to tell whether the ranks outnumber the cores. */
static int cores_of_ranks(void)
{
    cpu_set_t mine, all;
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine) != 0) return (int)sysconf(_SC_NPROCESSORS_ONLN);
    MPI_Allreduce(&mine, &all, (int)sizeof mine, MPI_BYTE, MPI_BOR, MPI_COMM_WORLD);
    return CPU_COUNT(&all);
}

int main(int argc, char **argv)
{
    int level;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &level);
    tu_init("test_cma");
    np = tu.size;
    me = tu.rank;
    quick = tu_quick(argc, argv);
    if (fr_comm_create(MPI_COMM_WORLD, NULL, &comm) != FR_SUCCESS) {
        tu_fail("fr_comm_create: %s", fr_last_error());
        int rc = tu_finish();
        MPI_Finalize();
        return rc ? rc : 1;
    }
    /* cma needs a node of two ranks or more (with faked nodes the table
     * chooses hier, and expected_cma says no); a first bcast says whether
     * the ranks read each other here */
    size_t nb = 262144;
    unsigned char *b = tu_alloc(nb);
    memset(b, me, nb);
    fr_bcast(b, nb, FR_UINT8, 0, comm);
    int mine = fr_last_cma(), all;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    cma_on = all;
    tu_free(b);
    if (me == 0) printf("test_cma np=%d: cma %s here\n", np, cma_on ? "works" : "is not used");
    tu_begin("cma %s on one node of %d ranks", getenv("FR_TEST_NO_CMA") ? "is not used" : "works", np);
    const char *ns = getenv("FASTREDUCE_NODE_SIZE");
    int one_node = !ns || atoi(ns) <= 0 || atoi(ns) >= np;
    const char *mode = getenv("FASTREDUCE_CMA");
    int cores = cores_of_ranks();
    int want = np > 1 && one_node && !getenv("FR_TEST_NO_CMA") &&
               (np <= cores || (mode && !strcmp(mode, "always")));
    TU_CHECK(cma_on == want, "a 256 KiB bcast of private buffers went by cma: %d, want %d", cma_on, want);
    test_grid();
    test_stream();
    test_requests();
    test_threads(level);
    test_unreadable_root();
    fr_comm_destroy(comm);
    int rc = tu_finish();
    MPI_Finalize();
    return rc;
}

/* test_args: argument validation on a live communicator, and the MPI-style
 * FR_Allreduce() / FR_Bcast() wrappers.
 *
 * Every rejected call must return the status its header comment documents,
 * leave a non-empty fr_last_error(), and leave the buffers as they were.
 * The wrappers are compared with PMPI_Allreduce() / PMPI_Bcast() and with a
 * reference every rank computes itself, including what they must hand to
 * PMPI (derived datatypes, user-defined ops, inter-communicators), and the
 * fr_comm_t they cache on a communicator must go away with it.
 */
#include <dirent.h>
#include <limits.h>
#include <sys/resource.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "internal.h"   /* fr_comm_destroy_many */

static int np, me;
static fr_comm_t comm;

/* ---- rejected calls ------------------------------------------------------ */

#define NBUF 64  /* floats in the test buffers */

static unsigned char *sb, *rb;           /* send and receive buffers with guards */
static unsigned char sb_ref[NBUF * 8], rb_ref[NBUF * 8];

static void bufs_reset(void)
{
    for (int i = 0; i < NBUF * 8; i++) {
        sb_ref[i] = (unsigned char)(tu_mix((uint64_t)i * 2 + (uint64_t)me * 1000) & 0xff);
        rb_ref[i] = (unsigned char)(tu_mix((uint64_t)i * 2 + 1 + (uint64_t)me * 1000) & 0xff);
    }
    memcpy(sb, sb_ref, sizeof sb_ref);
    memcpy(rb, rb_ref, sizeof rb_ref);
    tu_guard_set(sb, sizeof sb_ref);
    tu_guard_set(rb, sizeof rb_ref);
}

static void bufs_unchanged(void)
{
    long where;
    TU_CHECK(memcmp(sb, sb_ref, sizeof sb_ref) == 0, "the send buffer was changed");
    TU_CHECK(memcmp(rb, rb_ref, sizeof rb_ref) == 0, "the receive buffer was changed");
    TU_CHECK(tu_guard_ok(sb, sizeof sb_ref, &where), "send guard changed at %ld", where);
    TU_CHECK(tu_guard_ok(rb, sizeof rb_ref, &where), "receive guard changed at %ld", where);
}

/* The call returned @p st; @p want is the documented status. */
static void expect_status(fr_status_t st, fr_status_t want)
{
    if (TU_CHECK(st == want, "returned %s, documented: %d (%s)", tu_status(st), (int)want, fr_strerror(want))) {
        if (want != FR_SUCCESS) {
            const char *e = fr_last_error();
            TU_CHECK(e && *e, "fr_last_error() is %s after the failure", e ? "empty" : "NULL");
        }
    }
}

#define REJECT(want, desc, call) do { \
    bufs_reset(); \
    tu_begin("%s", desc); \
    expect_status((call), (want)); \
    bufs_unchanged(); \
} while (0)

static void test_rejections(void)
{
    float *s = (float *)sb, *r = (float *)rb;
    const size_t n = 8;

    REJECT(FR_ERR_NULL_POINTER, "allreduce sendbuf NULL count 8", fr_allreduce(NULL, r, n, FR_FLOAT32, FR_SUM, comm));
    REJECT(FR_ERR_NULL_POINTER, "allreduce recvbuf NULL count 8", fr_allreduce(s, NULL, n, FR_FLOAT32, FR_SUM, comm));
    REJECT(FR_ERR_NULL_POINTER, "allreduce in place recvbuf NULL count 8",
           fr_allreduce(FR_IN_PLACE, NULL, n, FR_FLOAT32, FR_SUM, comm));
    REJECT(FR_ERR_NULL_POINTER, "allreduce both NULL count 1", fr_allreduce(NULL, NULL, 1, FR_INT8, FR_MAX, comm));
    REJECT(FR_ERR_NULL_POINTER, "bcast buffer NULL count 8", fr_bcast(NULL, n, FR_FLOAT32, 0, comm));

    /* NULL is fine with count 0; so is a real buffer (which must stay as it is) */
    REJECT(FR_SUCCESS, "allreduce NULL NULL count 0", fr_allreduce(NULL, NULL, 0, FR_FLOAT32, FR_SUM, comm));
    REJECT(FR_SUCCESS, "allreduce in place NULL count 0", fr_allreduce(FR_IN_PLACE, NULL, 0, FR_INT64, FR_PROD, comm));
    REJECT(FR_SUCCESS, "allreduce real buffers count 0", fr_allreduce(s, r, 0, FR_FLOAT64, FR_AVG, comm));
    REJECT(FR_SUCCESS, "bcast NULL count 0", fr_bcast(NULL, 0, FR_UINT8, 0, comm));
    REJECT(FR_SUCCESS, "bcast real buffer count 0", fr_bcast(r, 0, FR_FLOAT16, np - 1, comm));

    /* counts whose byte size overflows or cannot be addressed */
    REJECT(FR_ERR_COUNT, "allreduce count SIZE_MAX float32", fr_allreduce(s, r, SIZE_MAX, FR_FLOAT32, FR_SUM, comm));
    REJECT(FR_ERR_COUNT, "allreduce count SIZE_MAX/4+1 float32",
           fr_allreduce(s, r, SIZE_MAX / 4 + 1, FR_FLOAT32, FR_SUM, comm));
    REJECT(FR_ERR_COUNT, "allreduce count SIZE_MAX/8+1 float64",
           fr_allreduce(s, r, SIZE_MAX / 8 + 1, FR_FLOAT64, FR_MAX, comm));
    REJECT(FR_ERR_COUNT, "allreduce count SIZE_MAX/2+1 bfloat16",
           fr_allreduce(s, r, SIZE_MAX / 2 + 1, FR_BFLOAT16, FR_SUM, comm));
    REJECT(FR_ERR_COUNT, "allreduce count SIZE_MAX uint8", fr_allreduce(s, r, SIZE_MAX, FR_UINT8, FR_SUM, comm));
    REJECT(FR_ERR_COUNT, "allreduce in place count SIZE_MAX int32",
           fr_allreduce(FR_IN_PLACE, r, SIZE_MAX, FR_INT32, FR_MIN, comm));
    REJECT(FR_ERR_COUNT, "bcast count SIZE_MAX float32", fr_bcast(r, SIZE_MAX, FR_FLOAT32, 0, comm));
    REJECT(FR_ERR_COUNT, "bcast count SIZE_MAX/8+1 uint64", fr_bcast(r, SIZE_MAX / 8 + 1, FR_UINT64, 0, comm));
    REJECT(FR_ERR_COUNT, "bcast count SIZE_MAX int8", fr_bcast(r, SIZE_MAX, FR_INT8, 0, comm));

    /* unknown enum values */
    REJECT(FR_ERR_INVALID_ARG, "allreduce dtype 99", fr_allreduce(s, r, n, (fr_dtype_t)99, FR_SUM, comm));
    REJECT(FR_ERR_INVALID_ARG, "allreduce dtype FR_DTYPE_COUNT", fr_allreduce(s, r, n, FR_DTYPE_COUNT, FR_SUM, comm));
    REJECT(FR_ERR_INVALID_ARG, "allreduce dtype -1", fr_allreduce(s, r, n, (fr_dtype_t)-1, FR_SUM, comm));
    REJECT(FR_ERR_INVALID_ARG, "allreduce op 99", fr_allreduce(s, r, n, FR_FLOAT32, (fr_op_t)99, comm));
    REJECT(FR_ERR_INVALID_ARG, "allreduce op FR_OP_COUNT", fr_allreduce(s, r, n, FR_INT32, FR_OP_COUNT, comm));
    REJECT(FR_ERR_INVALID_ARG, "allreduce op -1", fr_allreduce(s, r, n, FR_FLOAT32, (fr_op_t)-1, comm));
    REJECT(FR_ERR_INVALID_ARG, "bcast dtype 99", fr_bcast(r, n, (fr_dtype_t)99, 0, comm));
    REJECT(FR_ERR_INVALID_ARG, "bcast dtype -1", fr_bcast(r, n, (fr_dtype_t)-1, 0, comm));

    /* roots outside the communicator */
    REJECT(FR_ERR_ROOT, "bcast root -1", fr_bcast(r, n, FR_FLOAT32, -1, comm));
    REJECT(FR_ERR_ROOT, "bcast root == size", fr_bcast(r, n, FR_FLOAT32, np, comm));
    REJECT(FR_ERR_ROOT, "bcast root INT_MAX", fr_bcast(r, n, FR_INT8, INT_MAX, comm));
    REJECT(FR_ERR_ROOT, "bcast root INT_MIN", fr_bcast(r, n, FR_INT8, INT_MIN, comm));

    /* NULL communicator */
    REJECT(FR_ERR_BAD_COMM, "allreduce comm NULL", fr_allreduce(s, r, n, FR_FLOAT32, FR_SUM, NULL));
    REJECT(FR_ERR_BAD_COMM, "allreduce comm NULL count 0", fr_allreduce(s, r, 0, FR_FLOAT32, FR_SUM, NULL));
    REJECT(FR_ERR_BAD_COMM, "bcast comm NULL", fr_bcast(r, n, FR_FLOAT32, 0, NULL));
    tu_begin("queries on a NULL comm");
    TU_CHECK(fr_comm_rank(NULL) == -1, "fr_comm_rank(NULL) = %d", fr_comm_rank(NULL));
    TU_CHECK(fr_comm_size(NULL) == -1, "fr_comm_size(NULL) = %d", fr_comm_size(NULL));
    TU_CHECK(fr_allreduce_algorithm(NULL, 8, FR_FLOAT32, FR_SUM) == NULL, "fr_allreduce_algorithm(NULL) is not NULL");
    TU_CHECK(fr_bcast_algorithm(NULL, 8, FR_FLOAT32, 0) == NULL, "fr_bcast_algorithm(NULL) is not NULL");
    size_t fb = 7, bm = 7;
    REJECT(FR_ERR_BAD_COMM, "fr_comm_fusion(NULL)", fr_comm_fusion(NULL, &fb, &bm));
    TU_CHECK(fb == 7 && bm == 7, "fr_comm_fusion(NULL) wrote %zu, %zu", fb, bm);
    REJECT(FR_SUCCESS, "fr_comm_destroy(NULL)", fr_comm_destroy(NULL));

    /* the *_stream entry points validate alike (a NULL stream is CUDA's default) */
    REJECT(FR_ERR_NULL_POINTER, "allreduce_stream sendbuf NULL count 8",
           fr_allreduce_stream(NULL, r, n, FR_FLOAT32, FR_SUM, comm, NULL));
    REJECT(FR_ERR_NULL_POINTER, "bcast_stream buffer NULL count 8", fr_bcast_stream(NULL, n, FR_FLOAT32, 0, comm, NULL));
    REJECT(FR_ERR_COUNT, "allreduce_stream count SIZE_MAX",
           fr_allreduce_stream(s, r, SIZE_MAX, FR_FLOAT32, FR_SUM, comm, NULL));
    REJECT(FR_ERR_COUNT, "bcast_stream count SIZE_MAX", fr_bcast_stream(r, SIZE_MAX, FR_INT8, 0, comm, NULL));
    REJECT(FR_ERR_INVALID_ARG, "allreduce_stream dtype 99",
           fr_allreduce_stream(s, r, n, (fr_dtype_t)99, FR_SUM, comm, NULL));
    REJECT(FR_ERR_INVALID_ARG, "allreduce_stream op 99",
           fr_allreduce_stream(s, r, n, FR_FLOAT32, (fr_op_t)99, comm, NULL));
    REJECT(FR_ERR_INVALID_ARG, "allreduce_stream overlapping buffers",
           fr_allreduce_stream(s, s + 1, n, FR_FLOAT32, FR_SUM, comm, NULL));
    REJECT(FR_ERR_ROOT, "bcast_stream root == size", fr_bcast_stream(r, n, FR_FLOAT32, np, comm, NULL));
    REJECT(FR_ERR_ROOT, "bcast_stream root -1", fr_bcast_stream(r, n, FR_FLOAT32, -1, comm, NULL));
    REJECT(FR_ERR_BAD_COMM, "allreduce_stream comm NULL", fr_allreduce_stream(s, r, n, FR_FLOAT32, FR_SUM, NULL, NULL));
    REJECT(FR_ERR_BAD_COMM, "bcast_stream comm NULL", fr_bcast_stream(r, n, FR_FLOAT32, 0, NULL, NULL));

    /* partly overlapping buffers; the same pointer is in place; adjacent is fine */
    REJECT(FR_ERR_INVALID_ARG, "allreduce recvbuf = sendbuf + 1 element",
           fr_allreduce(s, s + 1, n, FR_FLOAT32, FR_SUM, comm));
    REJECT(FR_ERR_INVALID_ARG, "allreduce sendbuf = recvbuf + 3 elements",
           fr_allreduce(r + 3, r, n, FR_FLOAT32, FR_SUM, comm));
    REJECT(FR_ERR_INVALID_ARG, "allreduce buffers overlap by one byte",
           fr_allreduce(s, (unsigned char *)s + n * 4 - 1, n, FR_FLOAT32, FR_SUM, comm));
    REJECT(FR_ERR_INVALID_ARG, "allreduce recvbuf inside sendbuf int8",
           fr_allreduce(sb, sb + 5, 16, FR_INT8, FR_MAX, comm));

    /* adjacent buffers: valid, and the result must be right */
    {
        tu_begin("allreduce adjacent buffers (no overlap)");
        int32_t *a = (int32_t *)sb;
        for (int i = 0; i < 8; i++) a[i] = me * 10 + i;
        fr_status_t st = fr_allreduce(a, a + 8, 8, FR_INT32, FR_SUM, comm);
        if (TU_CHECK(st == FR_SUCCESS, "returned %s", tu_status(st)))
            for (int i = 0; i < 8; i++) {
                int32_t want = 10 * np * (np - 1) / 2 + np * i;
                if (!TU_CHECK(a[8 + i] == want && a[i] == me * 10 + i, "element %d: got %d expected %d (input %d)",
                              i, a[8 + i], want, a[i]))
                    break;
            }
    }
    {
        tu_begin("allreduce sendbuf == recvbuf (in place)");
        int64_t *a = (int64_t *)rb;
        for (int i = 0; i < 8; i++) a[i] = (int64_t)(me + 1) << (i * 4);
        fr_status_t st = fr_allreduce(a, a, 8, FR_INT64, FR_SUM, comm);
        if (TU_CHECK(st == FR_SUCCESS, "returned %s", tu_status(st)))
            for (int i = 0; i < 8; i++) {
                int64_t want = ((int64_t)np * (np + 1) / 2) << (i * 4);
                if (!TU_CHECK(a[i] == want, "element %d: got %lld expected %lld", i, (long long)a[i], (long long)want))
                    break;
            }
    }

    /* the communicator still works after all the rejections */
    {
        tu_begin("allreduce after the rejected calls");
        float *a = (float *)sb;
        for (int i = 0; i < 8; i++) a[i] = (float)(me + i);
        fr_status_t st = fr_allreduce(FR_IN_PLACE, a, 8, FR_FLOAT32, FR_MAX, comm);
        if (TU_CHECK(st == FR_SUCCESS, "returned %s", tu_status(st)))
            for (int i = 0; i < 8; i++)
                if (!TU_CHECK(a[i] == (float)(np - 1 + i), "element %d: got %g expected %d", i, (double)a[i], np - 1 + i))
                    break;
    }
}

/* ---- fr_comm_create ------------------------------------------------------ */

static void test_create(void)
{
    fr_comm_t c = (fr_comm_t)(uintptr_t)0x10;  /* must be reset to NULL */
    tu_begin("fr_comm_create(MPI_COMM_NULL)");
    fr_status_t st = fr_comm_create(MPI_COMM_NULL, NULL, &c);
    expect_status(st, FR_ERR_BAD_COMM);
    TU_CHECK(c == NULL, "*out is %p after the failure, not NULL", (void *)c);

    tu_begin("fr_comm_create(out = NULL)");
    expect_status(fr_comm_create(MPI_COMM_WORLD, NULL, NULL), FR_ERR_NULL_POINTER);

    if (np >= 2) {
        /* an inter-communicator between the lower and the upper half */
        MPI_Comm half, inter;
        int lower = me < np / 2;
        MPI_Comm_split(MPI_COMM_WORLD, lower, me, &half);
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, lower ? np / 2 : 0, 77, &inter);
        c = (fr_comm_t)(uintptr_t)0x10;
        tu_begin("fr_comm_create(inter-communicator)");
        st = fr_comm_create(inter, NULL, &c);
        expect_status(st, FR_ERR_BAD_COMM);
        TU_CHECK(c == NULL, "*out is %p after the failure, not NULL", (void *)c);
        if (st == FR_SUCCESS && c) fr_comm_destroy(c);

        /* FR_Allreduce on it must go to PMPI: each side gets the other side's sum */
        tu_begin("FR_Allreduce on an inter-communicator");
        int v = me + 1, got = -1, want = 0;
        for (int r = 0; r < np; r++)
            if ((r < np / 2) != lower) want += r + 1;
        int rc = FR_Allreduce(&v, &got, 1, MPI_INT, MPI_SUM, inter);
        TU_CHECK(rc == MPI_SUCCESS && got == want, "rc %d, got %d expected %d", rc, got, want);

        tu_begin("FR_Bcast on an inter-communicator");
        int b = lower ? -1 : 4242;
        int root = lower ? 0 : (me == 0 + np / 2 ? MPI_ROOT : MPI_PROC_NULL);
        /* the upper half's first rank broadcasts to the lower half */
        rc = FR_Bcast(&b, 1, MPI_INT, root, inter);
        TU_CHECK(rc == MPI_SUCCESS && b == 4242, "rc %d, got %d expected 4242", rc, b);
        MPI_Comm_free(&inter);
        MPI_Comm_free(&half);
    }

    /* a destroyed handle is refused, not read */
    tu_begin("calls on a destroyed communicator");
    fr_comm_t d = NULL;
    st = fr_comm_create(MPI_COMM_WORLD, NULL, &d);
    expect_status(st, FR_SUCCESS);
    if (st == FR_SUCCESS) {
        expect_status(fr_comm_destroy(d), FR_SUCCESS);
        float x[4] = {1, 2, 3, 4};
        expect_status(fr_allreduce(FR_IN_PLACE, x, 4, FR_FLOAT32, FR_SUM, d), FR_ERR_BAD_COMM);
        TU_CHECK(x[0] == 1 && x[3] == 4, "the buffer changed: %g %g", x[0], x[3]);
        expect_status(fr_bcast(x, 4, FR_FLOAT32, 0, d), FR_ERR_BAD_COMM);
        expect_status(fr_comm_destroy(d), FR_ERR_BAD_COMM);
        TU_CHECK(fr_comm_size(d) == -1, "fr_comm_size of a destroyed handle is %d", fr_comm_size(d));
    }
}

/* A communicator made now works: an allreduce on it gives the right sums. */
static void check_new_comm(void)
{
    fr_comm_t c = NULL;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &c);
    int32_t a[3] = { me, 1, -me }, b[3];
    if (TU_CHECK(st == FR_SUCCESS, "fr_comm_create returned %s", tu_status(st))) {
        st = fr_allreduce(a, b, 3, FR_INT32, FR_SUM, c);
        TU_CHECK(st == FR_SUCCESS && b[0] == np * (np - 1) / 2 && b[1] == np && b[2] == -b[0],
                 "fr_allreduce returned %s, %d %d %d", tu_status(st), b[0], b[1], b[2]);
        fr_comm_destroy(c);
    }
}

/* A bad value of setting @p var (through the environment, or, with how
 * "config", FASTREDUCE_ALGO through fr_config_t.algo): a warning containing
 * @p bad (where @p warns), and a working communicator. */
/* FASTREDUCE_SHM_SIZE larger than the node can hold: fr_comm_create fails
 * on every rank with FR_ERR_NO_MEMORY and a detail naming the setting (one
 * rank alone shares no segment and succeeds); nothing is left allocated
 * that stops a normal communicator afterwards. Before, filling the segment
 * brought the kernel's OOM killer. */
static void test_oversized_shm(const char *size)
{
    const char *old = getenv("FASTREDUCE_SHM_SIZE");
    char *saved = old ? strdup(old) : NULL;
    setenv("FASTREDUCE_SHM_SIZE", size, 1);
    tu_begin("FASTREDUCE_SHM_SIZE=%s: fr_comm_create refuses it", size);
    fr_comm_t c = NULL;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &c);
    if (np == 1) {
        TU_CHECK(st == FR_SUCCESS && c, "one rank shares no segment, yet fr_comm_create returned %s",
                 tu_status(st));
    } else {
        TU_CHECK(st == FR_ERR_NO_MEMORY && !c, "returned %s", tu_status(st));
        TU_CHECK(strstr(fr_last_error(), "FASTREDUCE_SHM_SIZE") != NULL, "the detail does not name the "
                 "setting: %s", fr_last_error());
    }
    if (c) fr_comm_destroy(c);
    if (saved) setenv("FASTREDUCE_SHM_SIZE", saved, 1);
    else unsetenv("FASTREDUCE_SHM_SIZE");
    free(saved);
    tu_begin("FASTREDUCE_SHM_SIZE=%s: a communicator afterwards works", size);
    check_new_comm();
}

/* This process's private writable memory and stack (/proc/self/statm's
 * data), in bytes; 0 if unknown. */
static size_t data_bytes(void)
{
    unsigned long f[6] = {0};
    FILE *s = fopen("/proc/self/statm", "r");
    if (s && fscanf(s, "%lu %lu %lu %lu %lu %lu", f, f + 1, f + 2, f + 3, f + 4, f + 5) != 6) f[5] = 0;
    if (s) fclose(s);
    return f[5] * (size_t)sysconf(_SC_PAGESIZE);
}

#ifndef __has_feature
#define __has_feature(x) 0
#endif

/* Node grouping out of memory on one rank: rank 0 names its node with a
 * 16 MiB FASTREDUCE_HOSTID, so every rank must hold 16 MiB of gathered
 * names, and the last rank's private memory is capped (RLIMIT_DATA) 8 MiB
 * above what it uses. fr_comm_create fails on every rank with
 * FR_ERR_NO_MEMORY, the others naming another rank; before, the capped
 * rank returned and the others waited in the gather it skipped, forever.
 * A communicator afterwards works. */
static void test_node_names_no_memory(void)
{
#if defined(__SANITIZE_ADDRESS__) || __has_feature(address_sanitizer)
    /* (AddressSanitizer maps memory lazily and dies when the cap refuses it) */
    if (me == 0) printf("test_args: node grouping without memory: skipped under AddressSanitizer\n");
    return;
#endif
    if (np < 2) return;
    enum { NAME = 16 << 20 };
    const int last = me == np - 1;
    char *name = me == 0 ? malloc(NAME + 1) : NULL;
    if (name) {
        memset(name, 'n', NAME);
        name[NAME] = 0;
        setenv("FASTREDUCE_HOSTID", name, 1);
    }
    tu_begin("a 16 MiB FASTREDUCE_HOSTID, no memory for the names on rank %d: fr_comm_create fails", np - 1);
    TU_CHECK(me != 0 || name, "no memory for the name");
    struct rlimit old;
    getrlimit(RLIMIT_DATA, &old);
    if (last) {
        struct rlimit d = {data_bytes() + (8u << 20), old.rlim_max};
        TU_CHECK(setrlimit(RLIMIT_DATA, &d) == 0, "setrlimit failed");
    }
    fr_comm_t c = NULL;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &c);
    if (last) setrlimit(RLIMIT_DATA, &old);
    if (name) unsetenv("FASTREDUCE_HOSTID");
    free(name);
    TU_CHECK(st == FR_ERR_NO_MEMORY && !c, "returned %s: %s", tu_status(st), fr_last_error());
    TU_CHECK(last || strstr(fr_last_error(), "another rank"), "the detail does not name another rank: %s",
             fr_last_error());
    if (c) fr_comm_destroy(c);
    tu_begin("node grouping without memory on rank %d: a communicator afterwards works", np - 1);
    check_new_comm();
}

static void test_bad_setting(const char *how, const char *var, const char *spec, const char *bad, int warns)
{
    const char *old = getenv(var);
    char *saved = old ? strdup(old) : NULL;
    fr_config_t cfg = FR_CONFIG_INIT;
    if (!strcmp(how, "env")) setenv(var, spec, 1);
    else { unsetenv(var); cfg.algo = spec; }
    unsetenv("FASTREDUCE_DEBUG_FILE");

    tu_begin("bad setting via %s '%s': fr_comm_create", how, spec);
    tu_capture_t cap;
    tu_capture_begin(&cap);
    fr_comm_t c = NULL;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, &cfg, &c);
    char *text = tu_capture_end(&cap);
    TU_CHECK(st == FR_SUCCESS && c, "fr_comm_create returned %s", tu_status(st));
    int warned = strstr(text, bad) != NULL;
    free(text);
    int any = 0;
    MPI_Allreduce(&warned, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (warns) {
        tu_begin("bad setting via %s '%s': a warning names it", how, spec);
        TU_CHECK(any, "no rank printed a warning naming '%s'", bad);
    }

    if (tu_all(st == FR_SUCCESS && c)) {
        tu_begin("bad setting via %s '%s': allreduce still right", how, spec);
        int32_t a[5], want;
        for (int i = 0; i < 5; i++) a[i] = (me + 1) * (i + 1);
        st = fr_allreduce(FR_IN_PLACE, a, 5, FR_INT32, FR_SUM, c);
        if (TU_CHECK(st == FR_SUCCESS, "fr_allreduce returned %s", tu_status(st)))
            for (int i = 0; i < 5; i++) {
                want = np * (np + 1) / 2 * (i + 1);
                if (!TU_CHECK(a[i] == want, "element %d: got %d expected %d", i, a[i], want)) break;
            }
        tu_begin("bad setting via %s '%s': bcast still right", how, spec);
        double d[3] = { me == np - 1 ? 1.25 : 0, me == np - 1 ? -7 : 0, me == np - 1 ? 1e300 : 0 };
        st = fr_bcast(d, 3, FR_FLOAT64, np - 1, c);
        TU_CHECK(st == FR_SUCCESS && d[0] == 1.25 && d[1] == -7 && d[2] == 1e300,
                 "fr_bcast returned %s, got %g %g %g", tu_status(st), d[0], d[1], d[2]);
        tu_begin("bad setting via %s '%s': fr_comm_destroy", how, spec);
        st = fr_comm_destroy(c);
        TU_CHECK(st == FR_SUCCESS, "fr_comm_destroy returned %s", tu_status(st));
    }
    if (saved) { setenv(var, saved, 1); free(saved); }
    else unsetenv(var);
}

/* ---- FR_Allreduce / FR_Bcast against PMPI -------------------------------- */

/* Fill @p n elements of @p dt with small values whose sums are exact in
 * every order (and wrap the same way for unsigned char). */
static void fill_mpi(void *buf, MPI_Datatype dt, int n, int rank, int salt)
{
    for (int i = 0; i < n; i++) {
        uint64_t h = tu_hash3((uint64_t)salt, (uint64_t)rank, (uint64_t)i);
        int v = (int)(h % 201) - 100;
        if (dt == MPI_FLOAT) ((float *)buf)[i] = (float)v * 0.5f;
        else if (dt == MPI_DOUBLE) ((double *)buf)[i] = v * 0.25;
        else if (dt == MPI_INT) ((int *)buf)[i] = (int)(h >> 8);  /* full range: sums wrap */
        else if (dt == MPI_LONG) ((long *)buf)[i] = (long)(h % 2000001) - 1000000;
        else if (dt == MPI_UNSIGNED_CHAR) ((unsigned char *)buf)[i] = (unsigned char)h;
        else if (dt == MPI_INT64_T) ((int64_t *)buf)[i] = (int64_t)(h % 200001) - 100000;
        else if (dt == MPI_UINT32_T) ((uint32_t *)buf)[i] = (uint32_t)h;
        else if (dt == MPI_SHORT) ((short *)buf)[i] = (short)v;
        else if (dt == MPI_SIGNED_CHAR) ((signed char *)buf)[i] = (signed char)(v / 4);
        else if (dt == MPI_CHAR) ((char *)buf)[i] = (char)h;   /* full range: sums wrap */
    }
}

static int mpi_size_of(MPI_Datatype dt)
{
    int s = 0;
    MPI_Type_size(dt, &s);
    return s;
}

/* The reference, by formula: every rank's input regenerated and combined
 * here (integers wrap: computed in the unsigned type). */
#define REF_INT(T, UT) do { \
    T *o = out; const T *x = (const T *)tmp; \
    for (int i = 0; i < n; i++) { \
        if (r == 0) { o[i] = x[i]; continue; } \
        if (op == MPI_SUM) o[i] = (T)((UT)o[i] + (UT)x[i]); \
        else if (op == MPI_PROD) o[i] = (T)((UT)o[i] * (UT)x[i]); \
        else if (op == MPI_MIN) { if (x[i] < o[i]) o[i] = x[i]; } \
        else { if (x[i] > o[i]) o[i] = x[i]; } \
    } } while (0)
#define REF_FLT(T) do { \
    T *o = out; const T *x = (const T *)tmp; \
    for (int i = 0; i < n; i++) { \
        if (r == 0) { o[i] = x[i]; continue; } \
        if (op == MPI_SUM) o[i] += x[i]; \
        else if (op == MPI_PROD) o[i] *= x[i]; \
        else if (op == MPI_MIN) { if (x[i] < o[i]) o[i] = x[i]; } \
        else { if (x[i] > o[i]) o[i] = x[i]; } \
    } } while (0)

static void ref_op(void *out, MPI_Datatype dt, MPI_Op op, int n, int salt)
{
    int es = mpi_size_of(dt);
    unsigned char *tmp = malloc((size_t)n * (size_t)es + 1);
    for (int r = 0; r < np; r++) {
        fill_mpi(tmp, dt, n, r, salt);
        if (dt == MPI_FLOAT) REF_FLT(float);
        else if (dt == MPI_DOUBLE) REF_FLT(double);
        else if (dt == MPI_INT) REF_INT(int, unsigned);
        else if (dt == MPI_LONG) REF_INT(long, unsigned long);
        else if (dt == MPI_UNSIGNED_CHAR) REF_INT(unsigned char, unsigned);
        else if (dt == MPI_INT64_T) REF_INT(int64_t, uint64_t);
        else if (dt == MPI_UINT32_T) REF_INT(uint32_t, uint32_t);
        else if (dt == MPI_SHORT) REF_INT(short, unsigned);
        else if (dt == MPI_SIGNED_CHAR) REF_INT(signed char, unsigned);
        else if (dt == MPI_CHAR) REF_INT(char, unsigned);
    }
    free(tmp);
}

static void test_fr_allreduce_mpi(void)
{
    static const char *const tname[] = { "MPI_FLOAT", "MPI_DOUBLE", "MPI_INT", "MPI_LONG", "MPI_UNSIGNED_CHAR",
                                         "MPI_INT64_T", "MPI_UINT32_T", "MPI_SHORT", "MPI_SIGNED_CHAR",
                                         "MPI_CHAR" };
    MPI_Datatype dts[] = { MPI_FLOAT, MPI_DOUBLE, MPI_INT, MPI_LONG, MPI_UNSIGNED_CHAR, MPI_INT64_T,
                           MPI_UINT32_T, MPI_SHORT, MPI_SIGNED_CHAR, MPI_CHAR };
    MPI_Op ops[] = { MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX };
    const char *opn[] = { "MPI_SUM", "MPI_PROD", "MPI_MIN", "MPI_MAX" };
    int counts[] = { 0, 1, 5, 1000, 65537 };
    for (int t = 0; t < (int)(sizeof dts / sizeof dts[0]); t++) {
        int es = mpi_size_of(dts[t]);
        for (int o = 0; o < 4; o++) {
            /* integer products wrap the same in any order, and six of the
             * double values (8 significant bits each) multiply exactly;
             * float products would round differently in different orders */
            if (ops[o] == MPI_PROD && dts[t] == MPI_FLOAT) continue;
            for (int k = 0; k < 5; k++) {
                int n = counts[k];
                size_t nb = (size_t)n * (size_t)es;
                int salt = t * 100 + o * 10 + k;
                unsigned char *in = tu_alloc(nb), *out = tu_alloc(nb), *ref = tu_alloc(nb), *keep = tu_alloc(nb);
                fill_mpi(in, dts[t], n, me, salt);
                memcpy(keep, in, nb);
                /* the reference is the formula; PMPI_Allreduce is only compared with it */
                ref_op(ref, dts[t], ops[o], n, salt);
                {
                    unsigned char *p = tu_alloc(nb);
                    PMPI_Allreduce(in, p, n, dts[t], ops[o], MPI_COMM_WORLD);
                    size_t nbad, i = tu_first_diff(p, ref, (size_t)n, (size_t)es, &nbad);
                    if (nbad && me == 0)
                        printf("note: PMPI_Allreduce %s %s count=%d is wrong at %zu elements (first %zu):"
                               " a bug of the MPI library\n", tname[t], opn[o], n, nbad, i);
                    tu_free(p);
                }
                for (int inplace = 0; inplace < 2; inplace++) {
                    tu_begin("FR_Allreduce %s %s count=%d inplace=%d", tname[t], opn[o], n, inplace);
                    tu_guard_set(out, nb);
                    if (inplace) memcpy(out, in, nb);
                    else memset(out, 0x77, nb);
                    int rc = FR_Allreduce(inplace ? MPI_IN_PLACE : in, out, n, dts[t], ops[o], MPI_COMM_WORLD);
                    TU_CHECK(rc == MPI_SUCCESS, "returned %d", rc);
                    size_t nbad, i = tu_first_diff(out, ref, (size_t)n, (size_t)es, &nbad);
                    if (nbad) {
                        char g[16], e[16];
                        snprintf(g, sizeof g, "0x%02x", out[i * (size_t)es]);
                        snprintf(e, sizeof e, "0x%02x", ref[i * (size_t)es]);
                        tu_fail("differs from the reference at element %zu, first byte got %s expected %s (%zu of %d wrong)",
                                i, g, e, nbad, n);
                    }
                    TU_CHECK(memcmp(in, keep, nb) == 0, "sendbuf modified");
                    long where;
                    TU_CHECK(tu_guard_ok(out, nb, &where), "recvbuf guard changed at %ld", where);
                }
                tu_free(in); tu_free(out); tu_free(ref); tu_free(keep);
            }
        }
    }
}

/* A user op: element-wise XOR of pairs of ints (commutative, so any order). */
static void pair_xor(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int *a = in, *b = inout;
    (void)dt;
    for (int i = 0; i < 2 * *len; i++) b[i] ^= a[i];
}
static void int_xor(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    int *a = in, *b = inout;
    (void)dt;
    for (int i = 0; i < *len; i++) b[i] ^= a[i];
}

static void test_pmpi_paths(void)
{
    enum { N = 1001 };
    int in[2 * N], out[2 * N], want[2 * N];
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    MPI_Op pxor, ixor;
    MPI_Op_create(pair_xor, 1, &pxor);
    MPI_Op_create(int_xor, 1, &ixor);
    for (int i = 0; i < 2 * N; i++) {
        in[i] = (int)tu_hash3(3, (uint64_t)me, (uint64_t)i);
        want[i] = 0;
        for (int r = 0; r < np; r++) want[i] ^= (int)tu_hash3(3, (uint64_t)r, (uint64_t)i);
    }
    tu_begin("FR_Allreduce derived type (2 x MPI_INT) with a user op");
    memset(out, 0, sizeof out);
    int rc = FR_Allreduce(in, out, N, pair, pxor, MPI_COMM_WORLD);
    TU_CHECK(rc == MPI_SUCCESS && memcmp(out, want, sizeof out) == 0, "rc %d, result %s", rc,
             memcmp(out, want, sizeof out) ? "wrong" : "right");

    tu_begin("FR_Allreduce MPI_INT with a user op (XOR)");
    memset(out, 0, sizeof out);
    rc = FR_Allreduce(in, out, 2 * N, MPI_INT, ixor, MPI_COMM_WORLD);
    TU_CHECK(rc == MPI_SUCCESS && memcmp(out, want, sizeof out) == 0, "rc %d, result %s", rc,
             memcmp(out, want, sizeof out) ? "wrong" : "right");

    tu_begin("FR_Allreduce MPI_IN_PLACE with a user op");
    memcpy(out, in, sizeof out);
    rc = FR_Allreduce(MPI_IN_PLACE, out, N, pair, pxor, MPI_COMM_WORLD);
    TU_CHECK(rc == MPI_SUCCESS && memcmp(out, want, sizeof out) == 0, "rc %d, result %s", rc,
             memcmp(out, want, sizeof out) ? "wrong" : "right");

    /* MPI_BYTE from every root */
    for (int root = 0; root < np; root++) {
        unsigned char *b = tu_alloc(4099), *w = tu_alloc(4099);
        for (int i = 0; i < 4099; i++) w[i] = (unsigned char)tu_hash3(9, (uint64_t)root, (uint64_t)i);
        tu_begin("FR_Bcast MPI_BYTE count=4099 root=%d", root);
        tu_guard_set(b, 4099);
        if (me == root) memcpy(b, w, 4099);
        else memset(b, me, 4099);
        rc = FR_Bcast(b, 4099, MPI_BYTE, root, MPI_COMM_WORLD);
        long where;
        TU_CHECK(rc == MPI_SUCCESS && memcmp(b, w, 4099) == 0, "rc %d, result %s", rc,
                 memcmp(b, w, 4099) ? "wrong" : "right");
        TU_CHECK(tu_guard_ok(b, 4099, &where), "guard changed at %ld", where);
        tu_free(b); tu_free(w);
    }

    /* predefined types, every root */
    for (int root = 0; root < np; root++) {
        double d[7], dw[7];
        for (int i = 0; i < 7; i++) dw[i] = ldexp((double)(root * 7 + i) + 0.5, i * 40 - 100);
        for (int i = 0; i < 7; i++) d[i] = me == root ? dw[i] : -1;
        tu_begin("FR_Bcast MPI_DOUBLE count=7 root=%d", root);
        rc = FR_Bcast(d, 7, MPI_DOUBLE, root, MPI_COMM_WORLD);
        TU_CHECK(rc == MPI_SUCCESS && memcmp(d, dw, sizeof d) == 0, "rc %d, result %s", rc,
                 memcmp(d, dw, sizeof d) ? "wrong" : "right");
    }

    /* a derived type with gaps: the gaps must not be written */
    {
        MPI_Datatype vec;
        MPI_Type_vector(5, 2, 3, MPI_INT, &vec);  /* 5 blocks of 2 ints, stride 3 */
        MPI_Type_commit(&vec);
        int root = np - 1;
        int b[2 * 15], w[2 * 15];
        for (int i = 0; i < 30; i++) {
            int in_block = i < 28 && (i % 14) % 3 != 2;  /* extent 14 ints */
            b[i] = me == root ? 1000 + i : -me - 1;
            w[i] = in_block ? 1000 + i : (me == root ? 1000 + i : -me - 1);
        }
        tu_begin("FR_Bcast derived vector type (gaps untouched) root=%d", root);
        rc = FR_Bcast(b, 2, vec, root, MPI_COMM_WORLD);
        int bad = -1;
        for (int i = 0; i < 30 && bad < 0; i++) if (b[i] != w[i]) bad = i;
        TU_CHECK(rc == MPI_SUCCESS && bad < 0, "rc %d, first bad int %d: got %d expected %d", rc, bad,
                 bad >= 0 ? b[bad] : 0, bad >= 0 ? w[bad] : 0);
        MPI_Type_free(&vec);

        tu_begin("FR_Bcast derived contiguous type root=0");
        int c[2 * N];
        for (int i = 0; i < 2 * N; i++) c[i] = me == 0 ? in[i] ^ 0x5555 : 0;
        rc = FR_Bcast(c, N, pair, 0, MPI_COMM_WORLD);
        bad = -1;
        for (int i = 0; i < 2 * N && bad < 0; i++)
            if (c[i] != ((int)tu_hash3(3, 0, (uint64_t)i) ^ 0x5555)) bad = i;
        TU_CHECK(rc == MPI_SUCCESS && bad < 0, "rc %d, first bad int %d", rc, bad);
    }
    MPI_Op_free(&pxor);
    MPI_Op_free(&ixor);
    MPI_Type_free(&pair);
}

/* MPI_Bcast's datatypes: the ranks of one bcast may name different
 * datatypes of one type signature, and pair types have padding. Each is
 * checked against the root's values, and bytes outside the type map must
 * stay as they were. */
static void test_bcast_types(void)
{
    enum { N = 2000 };   /* ints: over the one-shot sizes, through the large ring too */
    int *b = malloc(sizeof(int) * 3 * N), *w = malloc(sizeof(int) * 3 * N);
    MPI_Datatype four, vec;
    MPI_Type_contiguous(4, MPI_INT, &four);
    MPI_Type_commit(&four);
    MPI_Type_vector(N, 1, 3, MPI_INT, &vec);   /* N ints, two-int gaps between */
    MPI_Type_commit(&vec);
    for (int root = 0; root < np; root++) {
        /* the root names MPI_INT x N, the others 4-int blocks, and the reverse */
        for (int way = 0; way < 2; way++) {
            int derived = (me == root) == (way == 1);
            for (int i = 0; i < N; i++) w[i] = (int)tu_hash3(21 + (uint64_t)way, (uint64_t)root, (uint64_t)i);
            for (int i = 0; i < N; i++) b[i] = me == root ? w[i] : -1;
            tu_begin("FR_Bcast root=%d %s, the others %s", root, way ? "4-int blocks" : "MPI_INT",
                     way ? "MPI_INT" : "4-int blocks");
            int rc = derived ? FR_Bcast(b, N / 4, four, root, MPI_COMM_WORLD)
                             : FR_Bcast(b, N, MPI_INT, root, MPI_COMM_WORLD);
            TU_CHECK(rc == MPI_SUCCESS && memcmp(b, w, sizeof(int) * N) == 0, "rc %d, result %s", rc,
                     memcmp(b, w, sizeof(int) * N) ? "wrong" : "right");
        }
        /* a strided type at the root, MPI_INT x N elsewhere: the ints come in the type map's order */
        for (int i = 0; i < 3 * N; i++) b[i] = me == root ? (i % 3 ? -7 : (int)tu_hash3(22, (uint64_t)root, (uint64_t)i / 3)) : -1;
        for (int i = 0; i < N; i++) w[i] = (int)tu_hash3(22, (uint64_t)root, (uint64_t)i);
        tu_begin("FR_Bcast root=%d a vector type, the others MPI_INT x %d", root, N);
        int rc = me == root ? FR_Bcast(b, 1, vec, root, MPI_COMM_WORLD) : FR_Bcast(b, N, MPI_INT, root, MPI_COMM_WORLD);
        int bad = -1;
        for (int i = 0; i < N && bad < 0 && me != root; i++) if (b[i] != w[i]) bad = i;
        TU_CHECK(rc == MPI_SUCCESS && bad < 0, "rc %d, first bad int %d", rc, bad);

        /* MPI_DOUBLE_INT: 12 bytes of data in a 16-byte extent */
        struct di { double d; int i; } v[7];
        unsigned char raw[sizeof v];
        memset(v, me == root ? 0x00 : 0xa5, sizeof v);
        for (int k = 0; k < 7; k++)
            if (me == root) { v[k].d = ldexp((double)(root * 7 + k) + 0.25, k * 30 - 90); v[k].i = -root * 100 - k; }
        memcpy(raw, v, sizeof v);   /* a receiver's padding, before */
        tu_begin("FR_Bcast MPI_DOUBLE_INT count=7 root=%d", root);
        rc = FR_Bcast(v, 7, MPI_DOUBLE_INT, root, MPI_COMM_WORLD);
        bad = -1;
        for (int k = 0; k < 7 && bad < 0; k++) {
            const unsigned char *pad = raw + k * sizeof v[0] + offsetof(struct di, i) + sizeof(int);
            int pad_kept = me == root || memcmp((const unsigned char *)&v[k] + offsetof(struct di, i) + sizeof(int),
                                                pad, sizeof v[0] - offsetof(struct di, i) - sizeof(int)) == 0;
            if (v[k].d != ldexp((double)(root * 7 + k) + 0.25, k * 30 - 90) || v[k].i != -root * 100 - k || !pad_kept)
                bad = k;
        }
        TU_CHECK(rc == MPI_SUCCESS && bad < 0, "rc %d, first bad element %d", rc, bad);
    }
    MPI_Type_free(&four);
    MPI_Type_free(&vec);
    free(b);
    free(w);
}

/* Two communicators destroyed together, listed in a different order on
 * odd ranks (as threads may have cached them): one barrier per
 * communicator in list order would hang. */
static void test_destroy_many(void)
{
    fr_comm_t v[2] = {NULL, NULL};
    tu_begin("fr_comm_destroy_many in rank-dependent order");
    fr_status_t a = fr_comm_create(MPI_COMM_WORLD, NULL, &v[0]), b = fr_comm_create(MPI_COMM_WORLD, NULL, &v[1]);
    TU_CHECK(a == FR_SUCCESS && b == FR_SUCCESS, "fr_comm_create: %s, %s", tu_status(a), tu_status(b));
    if (me % 2) {
        fr_comm_t t = v[0];
        v[0] = v[1];
        v[1] = t;
    }
    fr_status_t st = fr_comm_destroy_many(v, 2);
    TU_CHECK(st == FR_SUCCESS, "returned %s", tu_status(st));
}

static int errhandler_calls, errhandler_class;
static void count_errors(MPI_Comm *c, int *err, ...)
{
    (void)c;
    errhandler_calls++;
    MPI_Error_class(*err, &errhandler_class);
}

/* FR_Allreduce / FR_Bcast given bad arguments return MPI's class for them
 * and change nothing (on a duplicate whose error handler returns). */
static void test_fr_errors(void)
{
    MPI_Comm d;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN);
    float *s = (float *)sb, *r = (float *)rb;
    int rc, cls;
#define FR_REJECT(want, desc, call) do { \
    bufs_reset(); \
    tu_begin("%s", desc); \
    rc = (call); \
    MPI_Error_class(rc, &cls); \
    TU_CHECK(cls == (want), "returned class %d, expected %d (%s)", cls, (want), #want); \
    bufs_unchanged(); \
} while (0)
    FR_REJECT(MPI_ERR_BUFFER, "FR_Allreduce NULL buffers count 8", FR_Allreduce(NULL, NULL, 8, MPI_FLOAT, MPI_SUM, d));
    FR_REJECT(MPI_ERR_BUFFER, "FR_Bcast NULL buffer count 8", FR_Bcast(NULL, 8, MPI_FLOAT, 0, d));
    FR_REJECT(MPI_ERR_ROOT, "FR_Bcast root == size", FR_Bcast(r, 8, MPI_FLOAT, np, d));
    FR_REJECT(MPI_ERR_ROOT, "FR_Bcast root -1", FR_Bcast(r, 8, MPI_FLOAT, -1, d));
    FR_REJECT(MPI_ERR_ARG, "FR_Allreduce overlapping buffers", FR_Allreduce(s, s + 1, 8, MPI_FLOAT, MPI_SUM, d));
#undef FR_REJECT
    /* erroneous calls that MPI itself must report (fastreduce passes them
     * on); Open MPI 4.1 reports some on MPI_COMM_WORLD's error handler */
    MPI_Errhandler world;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &world);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    tu_begin("FR_Allreduce with MPI_IN_PLACE as recvbuf goes to MPI, which refuses it");
    bufs_reset();
    rc = FR_Allreduce(s, MPI_IN_PLACE, 8, MPI_FLOAT, MPI_SUM, d);
    TU_CHECK(rc != MPI_SUCCESS, "returned MPI_SUCCESS");
    bufs_unchanged();
    tu_begin("FR_Bcast of MPI_DATATYPE_NULL goes to MPI, which refuses it");
    rc = FR_Bcast(r, 8, MPI_DATATYPE_NULL, 0, d);
    TU_CHECK(rc != MPI_SUCCESS, "returned MPI_SUCCESS");
    bufs_unchanged();
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, world);
    MPI_Errhandler_free(&world);
    /* a served call's failure goes to the communicator's error handler */
    MPI_Errhandler eh;
    MPI_Comm_create_errhandler(count_errors, &eh);
    MPI_Comm_set_errhandler(d, eh);
    errhandler_calls = 0;
    tu_begin("FR_Bcast with a root out of range calls the error handler once");
    rc = FR_Bcast(r, 8, MPI_FLOAT, np, d);
    MPI_Error_class(rc, &cls);
    TU_CHECK(cls == MPI_ERR_ROOT && errhandler_calls == 1 && errhandler_class == MPI_ERR_ROOT,
             "class %d, handler called %d times (class %d)", cls, errhandler_calls, errhandler_class);
    MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN);
    MPI_Errhandler_free(&eh);
    tu_begin("FR_Allreduce on the same communicator after the rejected calls");
    int v = me + 1, sum = 0;
    rc = FR_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, d);
    TU_CHECK(rc == MPI_SUCCESS && sum == np * (np + 1) / 2, "rc %d, sum %d", rc, sum);
    MPI_Comm_free(&d);
}

static int count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    while (readdir(d)) n++;
    closedir(d);
    return n;
}

/* FR_Allreduce on dup'ed communicators, created and freed 100 times; on
 * MPI_COMM_SELF and on split halves. */
static void test_cached_comms(void)
{
    int fds10 = -1, fds100 = -1, okall = 1;
    char first_bad[200] = "";
    for (int it = 0; it < 100; it++) {
        MPI_Comm d;
        MPI_Comm_dup(MPI_COMM_WORLD, &d);
        long v[3] = { me + it, -me, (long)me * it }, got[3];
        long want[3] = { (long)np * (np - 1) / 2 + (long)np * it, -(long)np * (np - 1) / 2,
                         (long)it * np * (np - 1) / 2 };
        int rc = FR_Allreduce(v, got, 3, MPI_LONG, MPI_SUM, d);
        if ((rc != MPI_SUCCESS || memcmp(got, want, sizeof got)) && okall) {
            okall = 0;
            snprintf(first_bad, sizeof first_bad, "iteration %d: rc %d, got %ld %ld %ld expected %ld %ld %ld",
                     it, rc, got[0], got[1], got[2], want[0], want[1], want[2]);
        }
        float f = me == it % np ? (float)it : -1.0f;
        rc = FR_Bcast(&f, 1, MPI_FLOAT, it % np, d);
        if ((rc != MPI_SUCCESS || f != (float)it) && okall) {
            okall = 0;
            snprintf(first_bad, sizeof first_bad, "iteration %d: FR_Bcast rc %d got %g", it, rc, (double)f);
        }
        MPI_Comm_free(&d);
        if (it == 9) fds10 = count_fds();
        if (it == 99) fds100 = count_fds();
    }
    tu_begin("FR_Allreduce/FR_Bcast on 100 dup'ed and freed communicators");
    TU_CHECK(okall, "%s", first_bad);
    tu_begin("freeing the communicators frees the cached fr_comm_t (open files do not grow)");
    TU_CHECK(fds10 >= 0 && fds100 - fds10 <= 8, "open file descriptors: %d after 10 dup/free, %d after 100",
             fds10, fds100);

    tu_begin("FR_Allreduce on MPI_COMM_SELF");
    double x[4] = { 1.5, -2, 3, (double)me }, y[4];
    int rc = FR_Allreduce(x, y, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_SELF);
    TU_CHECK(rc == MPI_SUCCESS && memcmp(x, y, sizeof x) == 0, "rc %d, got %g %g %g %g", rc, y[0], y[1], y[2], y[3]);

    tu_begin("FR_Allreduce on split halves (odd / even ranks)");
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, me % 2, me, &half);
    int v = me, s = -1, want = 0;
    for (int r = me % 2; r < np; r += 2) want += r;
    rc = FR_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, half);
    TU_CHECK(rc == MPI_SUCCESS && s == want, "rc %d, got %d expected %d", rc, s, want);
    MPI_Comm_free(&half);

    tu_begin("FR_Allreduce MPI_COMM_WORLD again (cached comm still good)");
    int m = me * 3 - 1, mx = -99;
    rc = FR_Allreduce(&m, &mx, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    TU_CHECK(rc == MPI_SUCCESS && mx == (np - 1) * 3 - 1, "rc %d, got %d", rc, mx);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_args");
    np = tu.size;
    me = tu.rank;
    sb = tu_alloc(NBUF * 8);
    rb = tu_alloc(NBUF * 8);

    tu_begin("fr_comm_create(MPI_COMM_WORLD)");
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &comm);
    TU_CHECK(st == FR_SUCCESS && comm, "returned %s", tu_status(st));
    if (!tu_all(st == FR_SUCCESS && comm)) {
        int rc = tu_finish();
        MPI_Finalize();
        return rc ? rc : 1;
    }
    double t[7];
    t[0] = MPI_Wtime();
    test_rejections();
    t[1] = MPI_Wtime();
    test_create();
    t[2] = MPI_Wtime();
    test_bad_setting("env", "FASTREDUCE_ALGO", "no_such_algorithm", "no_such_algorithm", 1);
    test_bad_setting("config", "FASTREDUCE_ALGO", "allreduce=bogus_allreduce", "bogus_allreduce", 1);
    test_bad_setting("env", "FASTREDUCE_ALGO", "bcast=bogus_bcast,allreduce=ring", "bogus_bcast", 1);
    test_bad_setting("env", "FASTREDUCE_SHM_STREAM", "sometimes", "FASTREDUCE_SHM_STREAM=sometimes", 1);
    test_bad_setting("env", "FASTREDUCE_SHM_STREAM", "auto:", "FASTREDUCE_SHM_STREAM=auto: is not", 1);
    test_bad_setting("env", "FASTREDUCE_SHM_STREAM", "auto:-1", "FASTREDUCE_SHM_STREAM=auto:-1 is not", 1);
    test_bad_setting("env", "FASTREDUCE_SHM_STREAM", "auto:3x", "FASTREDUCE_SHM_STREAM=auto:3x is not", 1);
    test_bad_setting("env", "FASTREDUCE_SHM_STREAM", "auto:nan", "FASTREDUCE_SHM_STREAM=auto:nan is not", 1);
    test_oversized_shm("400G");
    test_oversized_shm("9000000T");
    test_node_names_no_memory();
    t[3] = MPI_Wtime();
    test_fr_allreduce_mpi();
    t[4] = MPI_Wtime();
    test_pmpi_paths();
    test_bcast_types();
    test_fr_errors();
    test_destroy_many();
    t[5] = MPI_Wtime();
    test_cached_comms();
    t[6] = MPI_Wtime();
    if (me == 0)
        printf("test_args np=%d: times: rejections %.1f s, create %.1f s, bad algo %.1f s, FR_Allreduce %.1f s,"
               " PMPI paths %.1f s, cached comms %.1f s\n", np, t[1] - t[0], t[2] - t[1], t[3] - t[2],
               t[4] - t[3], t[5] - t[4], t[6] - t[5]);

    tu_begin("fr_comm_destroy");
    st = fr_comm_destroy(comm);
    TU_CHECK(st == FR_SUCCESS, "returned %s", tu_status(st));
    /* A communicator still alive at MPI_Finalize may be destroyed after it:
     * its memory is freed and no MPI call is made (checked by exit status,
     * since the summary is already printed). */
    fr_comm_t late = NULL;
    fr_status_t late_st = fr_comm_create(MPI_COMM_WORLD, NULL, &late);
    TU_CHECK(late_st == FR_SUCCESS, "fr_comm_create for the after-finalize check: %s", tu_status(late_st));
    tu_free(sb);
    tu_free(rb);
    int rc = tu_finish();
    MPI_Finalize();
    /* after MPI_Finalize: calls on a communicator that outlived it are
     * refused and touch nothing; creating one is refused */
    float x[4] = {1, 2, 3, 4};
    fr_comm_t again = NULL;
    if (late && (fr_allreduce(FR_IN_PLACE, x, 4, FR_FLOAT32, FR_SUM, late) != FR_ERR_NOT_INITIALIZED ||
                 fr_bcast(x, 4, FR_FLOAT32, 0, late) != FR_ERR_NOT_INITIALIZED || x[0] != 1 || x[3] != 4)) {
        fprintf(stderr, "FAIL test_args: a call after MPI_Finalize was not refused: %s\n", fr_last_error());
        return 1;
    }
    if (fr_comm_create(MPI_COMM_WORLD, NULL, &again) != FR_ERR_NOT_INITIALIZED || again) {
        fprintf(stderr, "FAIL test_args: fr_comm_create after MPI_Finalize: %s\n", fr_last_error());
        return 1;
    }
    if (late && fr_comm_destroy(late) != FR_SUCCESS) {
        fprintf(stderr, "FAIL test_args: fr_comm_destroy after MPI_Finalize: %s\n", fr_last_error());
        return 1;
    }
    return rc;
}

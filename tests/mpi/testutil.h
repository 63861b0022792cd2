/* Helpers shared by the multi-rank tests (tests/mpi/test_*.c).
 *
 * Result accounting: every check belongs to a numbered test (tu_begin()).
 * Tests are numbered identically on every rank (the programs run the same
 * loops everywhere); a test fails if it failed on any rank. tu_finish()
 * combines the per-rank failure bitmaps with MPI_BOR, prints
 * "PROG np=N: X passed, Y failed" on rank 0 and returns the exit status.
 *
 * Also: a per-test watchdog (SIGALRM) that names the test a rank is stuck
 * in, a counter-based hash for reproducible data, and float16 / bfloat16
 * conversions written here, independently of the library's own.
 */
#ifndef FR_TESTUTIL_H
#define FR_TESTUTIL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <signal.h>
#include <unistd.h>
#include <sys/stat.h>
#include <mpi.h>
#include "fastreduce.h"

#define TU_GUARD 64            /* guard bytes before and after test buffers */
#define TU_GUARD_BYTE 0xCD
#define TU_MAX_FAIL_LINES 200  /* per rank; later failures are counted, not printed */

typedef struct tu_state {
    const char    *prog;
    int            rank, size;
    long           ntests;       /* tests begun on this rank */
    long           cur;          /* index of the current test, -1 before the first */
    unsigned char *failbits;     /* bit t set: test t failed on this rank */
    size_t         failcap;      /* bytes in failbits */
    long           nfail_local;  /* failed checks on this rank */
    long           nlines;       /* failure lines printed on this rank */
    unsigned       watchdog_s;   /* seconds per test, 0: off */
    char           desc[512];    /* the current test, for messages and the watchdog */
} tu_state_t;

#define TU_FN static __attribute__((unused))

static tu_state_t tu;

/* ---- watchdog ------------------------------------------------------------ */

TU_FN void tu_on_alarm(int sig)
{
    char msg[700];
    int n = snprintf(msg, sizeof msg, "TIMEOUT %s rank %d: no progress for %u s in test: %s\n",
                     tu.prog, tu.rank, tu.watchdog_s, tu.desc);
    if (n > 0) {
        ssize_t w = write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
        (void)w;
    }
    (void)sig;
    _exit(124);
}

/* Call after MPI_Init. FR_TEST_WATCHDOG=SECONDS (default 120, 0 = off)
 * bounds the time any single test may take. */
TU_FN void tu_init(const char *prog)
{
    memset(&tu, 0, sizeof tu);
    tu.prog = prog;
    tu.cur = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &tu.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &tu.size);
    const char *w = getenv("FR_TEST_WATCHDOG");
    tu.watchdog_s = w ? (unsigned)strtoul(w, NULL, 10) : 120u;
    snprintf(tu.desc, sizeof tu.desc, "(setup)");
    if (tu.watchdog_s) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = tu_on_alarm;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGALRM, &sa, NULL);
        alarm(tu.watchdog_s);
    }
}

/* Whether the launch asks for the quick set: --quick among the arguments,
 * or FASTREDUCE_TEST_QUICK set to anything but 0 (FASTREDUCE_TEST_QUICK=1
 * in make check). */
TU_FN int tu_quick(int argc, char **argv)
{
    const char *q = getenv("FASTREDUCE_TEST_QUICK");
    int quick = q && *q && strcmp(q, "0") != 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--quick")) quick = 1;
    return quick;
}

/* ---- accounting ---------------------------------------------------------- */

/* Start test number tu.ntests, described by the printf-style arguments.
 * TU_TRACE set in the environment prints each description to stderr as
 * the test starts (to find the one a launch hangs or aborts in). */
TU_FN void tu_begin(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
TU_FN void tu_begin(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tu.desc, sizeof tu.desc, fmt, ap);
    va_end(ap);
    tu.cur = tu.ntests++;
    size_t need = (size_t)tu.ntests / 8 + 1;
    if (need > tu.failcap) {
        size_t cap = tu.failcap ? tu.failcap * 2 : 256;
        while (cap < need) cap *= 2;
        unsigned char *nb = realloc(tu.failbits, cap);
        if (!nb) { fprintf(stderr, "%s: out of memory\n", tu.prog); MPI_Abort(MPI_COMM_WORLD, 2); }
        memset(nb + tu.failcap, 0, cap - tu.failcap);
        tu.failbits = nb;
        tu.failcap = cap;
    }
    if (tu.watchdog_s) alarm(tu.watchdog_s);
    if (getenv("TU_TRACE")) fprintf(stderr, "TRACE %s\n", tu.desc);
}

/* Record a failure of the current test and print one line about it. */
TU_FN void tu_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
TU_FN void tu_fail(const char *fmt, ...)
{
    if (tu.cur < 0) tu_begin("(outside any test)");
    tu.failbits[tu.cur / 8] |= (unsigned char)(1u << (tu.cur % 8));
    tu.nfail_local++;
    if (tu.nlines < TU_MAX_FAIL_LINES) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        fprintf(stdout, "FAIL %s np=%d rank=%d [%s]: %s\n", tu.prog, tu.size, tu.rank, tu.desc, msg);
        fflush(stdout);
    } else if (tu.nlines == TU_MAX_FAIL_LINES) {
        fprintf(stdout, "FAIL %s np=%d rank=%d: more failures, not printed\n", tu.prog, tu.size, tu.rank);
        fflush(stdout);
    }
    tu.nlines++;
}

/* Check @p cond; on false record a failure with the message. Returns cond. */
#define TU_CHECK(cond, ...) ((cond) ? 1 : (tu_fail(__VA_ARGS__), 0))

/* 1 if the current test has failed on this rank so far. */
TU_FN int tu_cur_failed(void)
{
    return tu.cur >= 0 && (tu.failbits[tu.cur / 8] >> (tu.cur % 8)) & 1;
}

/* Collective over MPI_COMM_WORLD: 1 if @p ok is true on every rank. */
TU_FN int tu_all(int ok)
{
    int in = ok ? 1 : 0, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return out;
}

/* Collective: combine the results, print the summary on rank 0, return the
 * process exit status (0 only if no test failed on any rank). */
TU_FN int tu_finish(void)
{
    alarm(0);
    long nt[2] = { tu.ntests, -tu.ntests }, ntr[2];
    MPI_Allreduce(nt, ntr, 2, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    long nmax = ntr[0], nmin = -ntr[1];
    size_t bytes = (size_t)nmax / 8 + 1;
    unsigned char *mine = calloc(bytes, 1), *all = calloc(bytes, 1);
    if (!mine || !all) MPI_Abort(MPI_COMM_WORLD, 2);
    if (tu.failbits) memcpy(mine, tu.failbits, bytes < tu.failcap ? bytes : tu.failcap);
    MPI_Allreduce(mine, all, (int)bytes, MPI_UNSIGNED_CHAR, MPI_BOR, MPI_COMM_WORLD);
    long failed = 0;
    for (long t = 0; t < nmax; t++) failed += (all[t / 8] >> (t % 8)) & 1;
    long lf = tu.nfail_local, gf = 0;
    MPI_Allreduce(&lf, &gf, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    int mismatch = nmin != nmax;
    if (mismatch) failed++;  /* ranks ran different test sequences: a failure in itself */
    long passed = nmax - failed;
    if (passed < 0) passed = 0;
    if (tu.rank == 0) {
        if (mismatch)
            printf("FAIL %s np=%d: ranks ran different numbers of tests (%ld..%ld)\n",
                   tu.prog, tu.size, nmin, nmax);
        printf("%s np=%d: %ld passed, %ld failed\n", tu.prog, tu.size, passed, failed);
        fflush(stdout);
    }
    free(mine);
    free(all);
    free(tu.failbits);
    tu.failbits = NULL;
    return (failed > 0 || gf > 0) ? 1 : 0;
}

/* ---- hashing and data ---------------------------------------------------- */

TU_FN inline uint64_t tu_mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

TU_FN inline uint64_t tu_hash3(uint64_t a, uint64_t b, uint64_t c)
{
    return tu_mix(tu_mix(tu_mix(a) ^ b) ^ c);
}

/* FNV-1a over bytes (for comparing results across ranks). */
TU_FN uint64_t tu_hash_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 0x100000001b3ull; }
    return h;
}

/* Collective: 1 if @p h is the same on every rank. */
TU_FN int tu_same_everywhere(uint64_t h)
{
    uint64_t lo = 0, hi = 0;
    MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return lo == hi;
}

/* Buffers with guard areas on both sides: tu_alloc(n) returns p with
 * TU_GUARD bytes before p and n + TU_GUARD bytes usable after p. */
TU_FN unsigned char *tu_alloc(size_t n)
{
    unsigned char *b = malloc(n + 2 * TU_GUARD);
    if (!b) { fprintf(stderr, "%s: cannot allocate %zu bytes\n", tu.prog, n); MPI_Abort(MPI_COMM_WORLD, 2); }
    return b + TU_GUARD;
}
TU_FN void tu_free(unsigned char *p) { if (p) free(p - TU_GUARD); }

/* Fill the guards around [p, p+n) (n may be less than the allocation). */
TU_FN void tu_guard_set(unsigned char *p, size_t n)
{
    memset(p - TU_GUARD, TU_GUARD_BYTE, TU_GUARD);
    memset(p + n, TU_GUARD_BYTE, TU_GUARD);
}
/* 1 if both guards of [p, p+n) are intact; else 0 with *where = offset of
 * the first changed byte from p (negative: before p). */
TU_FN int tu_guard_ok(const unsigned char *p, size_t n, long *where)
{
    for (long i = 0; i < TU_GUARD; i++) {
        if (p[-TU_GUARD + i] != TU_GUARD_BYTE) { *where = i - TU_GUARD; return 0; }
        if (p[n + (size_t)i] != TU_GUARD_BYTE) { *where = (long)n + i; return 0; }
    }
    return 1;
}

/* ---- datatypes (the test's own tables, independent of the library) ------- */

static const size_t tu_dtype_sizes[FR_DTYPE_COUNT] = { 1, 1, 4, 4, 8, 8, 2, 2, 4, 8 };
static const char *const tu_dtype_names[FR_DTYPE_COUNT] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "bfloat16", "float32", "float64"
};
static const char *const tu_op_names[FR_OP_COUNT] = { "sum", "prod", "min", "max", "avg" };

TU_FN inline int tu_is_float(fr_dtype_t t) { return t >= FR_FLOAT16; }
TU_FN inline int tu_is_signed(fr_dtype_t t) { return t == FR_INT8 || t == FR_INT32 || t == FR_INT64; }
TU_FN inline int tu_bits(fr_dtype_t t) { return (int)tu_dtype_sizes[t] * 8; }

/* Binary floating-point format with @p mbits stored mantissa bits and
 * @p ebits exponent bits: round @p x to nearest, ties to even, with
 * subnormals, overflow to infinity and a quiet NaN. */
TU_FN uint16_t tu_to_small_float(double x, int mbits, int ebits)
{
    const int emax = (1 << (ebits - 1)) - 1, emin = 1 - emax;
    const uint16_t expmask = (uint16_t)(((1u << ebits) - 1) << mbits);
    uint16_t sign = signbit(x) ? (uint16_t)(1u << (mbits + ebits)) : 0;
    if (isnan(x)) return (uint16_t)(sign | expmask | (1u << (mbits - 1)));
    double ax = fabs(x);
    if (isinf(ax)) return (uint16_t)(sign | expmask);
    if (ax == 0.0) return sign;
    int e2;
    (void)frexp(ax, &e2);
    int e = e2 - 1;                       /* 2^e <= ax < 2^(e+1) */
    if (e < emin) e = emin;               /* subnormal range: fixed quantum */
    double m = nearbyint(ldexp(ax, mbits - e));   /* ax in units of the quantum 2^(e-mbits), RNE */
    if (m >= ldexp(1.0, mbits + 1)) { m = ldexp(m, -1); e++; }  /* carried into the next binade */
    if (m < ldexp(1.0, mbits))            /* subnormal (only when e == emin) */
        return (uint16_t)(sign | (uint16_t)m);
    if (e > emax) return (uint16_t)(sign | expmask);
    return (uint16_t)(sign | (uint16_t)((unsigned)(e + emax) << mbits) |
                      (uint16_t)((uint64_t)m - ((uint64_t)1 << mbits)));
}

TU_FN double tu_from_small_float(uint16_t h, int mbits, int ebits)
{
    const int emax = (1 << (ebits - 1)) - 1;
    unsigned s = h >> (mbits + ebits), be = (h >> mbits) & ((1u << ebits) - 1);
    unsigned mant = h & ((1u << mbits) - 1);
    double v;
    if (be == (1u << ebits) - 1) v = mant ? NAN : INFINITY;
    else if (be == 0) v = ldexp((double)mant, 1 - emax - mbits);
    else v = ldexp((double)(mant | (1u << mbits)), (int)be - emax - mbits);
    return s ? -v : v;
}

TU_FN inline uint16_t tu_to_f16(double x) { return tu_to_small_float(x, 10, 5); }
TU_FN inline uint16_t tu_to_bf16(double x) { return tu_to_small_float(x, 7, 8); }
TU_FN inline double tu_from_f16(uint16_t h) { return tu_from_small_float(h, 10, 5); }
TU_FN inline double tu_from_bf16(uint16_t h) { return tu_from_small_float(h, 7, 8); }

/* Element @p i of @p buf as text ("-3 (0xfd)", "1.5 (0x3e00)"). */
TU_FN void tu_format_elem(char *out, size_t len, const void *buf, size_t i, fr_dtype_t t)
{
    const unsigned char *p = (const unsigned char *)buf + i * tu_dtype_sizes[t];
    switch (t) {
    case FR_INT8:   { int8_t v; memcpy(&v, p, 1); snprintf(out, len, "%d (0x%02x)", v, (unsigned)(uint8_t)v); break; }
    case FR_UINT8:  { uint8_t v; memcpy(&v, p, 1); snprintf(out, len, "%u", v); break; }
    case FR_INT32:  { int32_t v; memcpy(&v, p, 4); snprintf(out, len, "%d (0x%08x)", v, (unsigned)v); break; }
    case FR_UINT32: { uint32_t v; memcpy(&v, p, 4); snprintf(out, len, "%u", v); break; }
    case FR_INT64:  { int64_t v; memcpy(&v, p, 8); snprintf(out, len, "%lld (0x%016llx)", (long long)v, (unsigned long long)v); break; }
    case FR_UINT64: { uint64_t v; memcpy(&v, p, 8); snprintf(out, len, "%llu", (unsigned long long)v); break; }
    case FR_FLOAT16:  { uint16_t v; memcpy(&v, p, 2); snprintf(out, len, "%.9g (0x%04x)", tu_from_f16(v), v); break; }
    case FR_BFLOAT16: { uint16_t v; memcpy(&v, p, 2); snprintf(out, len, "%.9g (0x%04x)", tu_from_bf16(v), v); break; }
    case FR_FLOAT32: { float v; uint32_t u; memcpy(&v, p, 4); memcpy(&u, p, 4); snprintf(out, len, "%.9g (0x%08x)", (double)v, u); break; }
    case FR_FLOAT64: { double v; uint64_t u; memcpy(&v, p, 8); memcpy(&u, p, 8); snprintf(out, len, "%.17g (0x%016llx)", v, (unsigned long long)u); break; }
    default: snprintf(out, len, "?"); break;
    }
}

/* Returns the index of the first element of @p a that differs from @p b (or
 * count), with the number of differing elements in *nbad. */
TU_FN size_t tu_first_diff(const void *a, const void *b, size_t count, size_t esize, size_t *nbad)
{
    const unsigned char *x = a, *y = b;
    size_t first = count, n = 0;
    if (memcmp(a, b, count * esize) == 0) { *nbad = 0; return count; }
    for (size_t i = 0; i < count; i++)
        if (memcmp(x + i * esize, y + i * esize, esize) != 0) { if (first == count) first = i; n++; }
    *nbad = n;
    return first;
}

/* Text of a status and the detail message. */
TU_FN const char *tu_status(fr_status_t st)
{
    static char buf[600];
    const char *s = fr_strerror(st), *d = fr_last_error();
    snprintf(buf, sizeof buf, "%d (%s)%s%s", (int)st, s ? s : "NULL",
             st != FR_SUCCESS && d && *d ? ": " : "", st != FR_SUCCESS && d ? d : "");
    return buf;
}

/* Number of nodes the library should see: FASTREDUCE_NODE_SIZE (or
 * @p cfg_node_size when > 0) groups consecutive ranks; otherwise the real
 * shared-memory domains. Collective. */
/* The node split the library should see, worked out from the same inputs
 * (FASTREDUCE_NODE_SIZE or fr_config_t.node_size, FASTREDUCE_HOSTID, or the
 * host): the number of nodes, and in *equal whether all have as many ranks. */
TU_FN int tu_node_shape(int cfg_node_size, int *equal)
{
    int ns = cfg_node_size;
    if (ns <= 0) {
        const char *e = getenv("FASTREDUCE_NODE_SIZE");
        ns = e && *e ? atoi(e) : 0;
    }
    MPI_Bcast(&ns, 1, MPI_INT, 0, MPI_COMM_WORLD);   /* (rank 0's rules where the ranks' differ) */
    if (ns > 0) {
        if (equal) *equal = tu.size % ns == 0 || tu.size < ns;
        return (tu.size + ns - 1) / ns;
    }
    /* Nodes are the distinct names: FASTREDUCE_HOSTID where any rank sets it
     * (a rank without one is named by its host), else the host. */
    const char *hid = getenv("FASTREDUCE_HOSTID");
    int any = hid && *hid, anyall = 0;
    MPI_Allreduce(&any, &anyall, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    char mine[64] = {0}, *all = calloc((size_t)tu.size, 64);
    int len, distinct = 0, size0 = -1, eq = 1;
    if (any) snprintf(mine, sizeof mine, "%s", hid);
    else MPI_Get_processor_name(mine, &len);
    mine[63] = '\0';
    MPI_Allgather(mine, 64, MPI_CHAR, all, 64, MPI_CHAR, MPI_COMM_WORLD);
    for (int r = 0; r < tu.size; r++) {
        int seen = 0, count = 0;
        for (int q = 0; q < r && !seen; q++) seen = !strncmp(all + 64 * q, all + 64 * r, 64);
        if (seen) continue;
        distinct++;
        for (int q = r; q < tu.size; q++) count += !strncmp(all + 64 * q, all + 64 * r, 64);
        if (size0 < 0) size0 = count;
        else if (count != size0) eq = 0;
    }
    free(all);
    if (equal) *equal = eq;
    return distinct;
}

TU_FN int tu_expected_nnodes(int cfg_node_size) { return tu_node_shape(cfg_node_size, NULL); }

/* ---- capturing stderr (to check that a warning was printed) -------------- */

typedef struct tu_capture { int saved_fd; FILE *tmp; } tu_capture_t;

/* Redirect file descriptor 2 into a temporary file until tu_capture_end(). */
TU_FN void tu_capture_begin(tu_capture_t *c)
{
    fflush(stderr);
    c->tmp = tmpfile();
    c->saved_fd = c->tmp ? dup(2) : -1;
    if (c->saved_fd >= 0) dup2(fileno(c->tmp), 2);
}

/* Restore stderr; returns what was written (malloc'ed, "" if none), and
 * echoes it to the real stderr so that the log still shows it. */
TU_FN char *tu_capture_end(tu_capture_t *c)
{
    char *text = NULL;
    fflush(stderr);
    if (c->saved_fd >= 0) {
        dup2(c->saved_fd, 2);
        close(c->saved_fd);
        struct stat sb;
        long n = fstat(fileno(c->tmp), &sb) == 0 ? (long)sb.st_size : 0;
        text = calloc((size_t)n + 1, 1);
        if (text && n > 0) {
            rewind(c->tmp);
            size_t got = fread(text, 1, (size_t)n, c->tmp);
            text[got] = 0;
            fputs(text, stderr);
        }
    }
    if (c->tmp) fclose(c->tmp);
    return text ? text : calloc(1, 1);
}

#endif

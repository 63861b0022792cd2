/* soak: many calls in a row, looking for leaks and for results that go bad
 * over time.
 *
 * The run is a series of cycles. In each one a duplicate of MPI_COMM_WORLD
 * and a split of it (ranks in reverse order; at 4 ranks and more, two
 * interleaved halves) get an fr_comm_t each, the duplicate's algorithms
 * forced in turn through fr_config_t.algo; then the cycle's share of small
 * calls (allreduce and bcast, 1 to 4096 elements, several types and ops,
 * in place or not) and of large ones (--large-size bytes, 4 MiB by
 * default) runs on the world's fr_comm_t and on the two new ones, and both
 * are destroyed with their MPI communicators. Every result is checked
 * against a closed formula of the inputs (integer sums and maxima, floats
 * that are small integers), so checking is cheap.
 *
 * After each cycle, with only the world's fr_comm_t alive, every rank
 * measures its resident set (/proc/self/statm), its open descriptors
 * (/proc/self/fd), its memfd mappings of fastreduce segments
 * (/proc/self/maps) and the fastreduce-* segments of the job's processes
 * in /dev/shm. The first cycles are the warm-up (a tenth of them, at least
 * 2); from the checkpoint ending it to the last, the resident set may grow
 * by --rss-bound KiB at most and the other counts not at all.
 *
 * Usage: soak [--short] [--small N] [--large N] [--large-size BYTES]
 *             [--cycles C] [--rss-bound KIB] [--verbose] [--maps] [--malloc-default]
 *   defaults: 100000 small calls, 1000 large of 4 MiB, 50 cycles, 2048 KiB
 *   --short   5000 small, 50 large, 10 cycles (for make check)
 * Prints "soak np=N: X passed, Y failed" (X counts the checked calls and
 * the four leak checks; Y the largest number of failures on any rank) and
 * the figures; exit status 0 only when nothing failed.
 * FR_TEST_WATCHDOG=SECONDS (default 300, 0 = off) bounds each cycle.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <mpi.h>
#include "fastreduce.h"

static int wrank, wsize;
static long nfail, nchecked;
static int nlines;
static int verbose;
static int cur_cycle = -1;

/* The duplicate's algorithms, one pair per cycle in turn (NULL: the table).
 * hier is left out: it declines on one node, with a warning each time. */
static const char *const algos[] = {
    NULL,
    "allreduce=ring,bcast=pipeline",
    "allreduce=recursive_doubling,bcast=binomial",
    "allreduce=rabenseifner,bcast=scatter_allgather",
    "allreduce=tree,bcast=shm",
    "allreduce=shm,bcast=mpi",
    "allreduce=mpi,bcast=pipeline",
};
#define NALGOS (int)(sizeof algos / sizeof algos[0])

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    nfail++;
    if (nlines++ >= 20) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    printf("FAIL soak np=%d rank=%d cycle %d: %s\n", wsize, wrank, cur_cycle, msg);
    fflush(stdout);
}

static void on_alarm(int sig)
{
    static const char msg[] = "TIMEOUT soak: a cycle took longer than FR_TEST_WATCHDOG\n";
    ssize_t w = write(1, msg, sizeof msg - 1);
    (void)w; (void)sig;
    _exit(124);
}

/* ---- what the process holds ---------------------------------------------- */

typedef struct usage {
    long rss_kib;    /* resident set */
    long anon, shmem;  /* its anonymous and shared-memory parts */
    int  fds;        /* entries of /proc/self/fd */
    int  memfd;      /* mappings of a fastreduce memfd */
    int  shm;        /* /dev/shm/fastreduce-PID-* of the job's processes */
    int  shm_all;    /* every /dev/shm entry (other jobs too: shown, not checked) */
} usage_t;

static long *job_pids;

static long rss_kib(void)
{
    long size = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &size, &res) != 2) res = -1;
    fclose(f);
    return res < 0 ? -1 : res * (sysconf(_SC_PAGESIZE) / 1024);
}

static int count_dir(const char *path, int (*want)(const char *))
{
    DIR *d = opendir(path);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && (!want || want(e->d_name))) n++;
    closedir(d);
    return n;
}

static int ours(const char *name)
{
    long pid;
    if (sscanf(name, "fastreduce-%ld-", &pid) != 1) return 0;
    for (int r = 0; r < wsize; r++) if (job_pids[r] == pid) return 1;
    return 0;
}

static int memfd_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) n += strstr(line, "/memfd:fastreduce") != NULL;
    fclose(f);
    return n;
}

/* RssAnon and RssShmem of /proc/self/status (the shared segments count in
 * the resident set too). */
static void rss_parts(long *anon, long *shmem)
{
    *anon = *shmem = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        sscanf(line, "RssAnon: %ld", anon);
        sscanf(line, "RssShmem: %ld", shmem);
    }
    fclose(f);
}

static usage_t measure(void)
{
    usage_t u;
    u.rss_kib = rss_kib();
    rss_parts(&u.anon, &u.shmem);
    u.fds = count_dir("/proc/self/fd", NULL) - 1;   /* less opendir's own */
    u.memfd = memfd_maps();
    u.shm = count_dir("/dev/shm", ours);
    u.shm_all = count_dir("/dev/shm", NULL);
    return u;
}

/* --maps: rank 0 names the mappings whose resident size changed by 256 KiB
 * or more since the previous checkpoint (to tell a leak from the
 * allocator's ups and downs). */
typedef struct mapent { unsigned long lo, hi; long rss; char name[80]; } mapent_t;
static mapent_t *maps_prev, *maps_cur;
static int nmaps_prev, nmaps_cur, show_maps;

static int read_maps(mapent_t **out)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return 0;
    int n = 0, cap = 0;
    mapent_t *m = *out;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        long kb;
        char name[256] = "";
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %255s", &lo, &hi, name) >= 2 && strchr(line, '-') < strchr(line, ' ')) {
            if (n == cap) { cap = cap ? 2 * cap : 512; m = realloc(m, (size_t)cap * sizeof *m); }
            m[n] = (mapent_t){ .lo = lo, .hi = hi, .rss = 0 };
            snprintf(m[n].name, sizeof m[n].name, "%s", name[0] ? name : "[anon]");
            n++;
        } else if (n && sscanf(line, "Rss: %ld kB", &kb) == 1) {
            m[n - 1].rss = kb;
        }
    }
    fclose(f);
    *out = m;
    return n;
}

static void diff_maps(int cyc)
{
    nmaps_cur = read_maps(&maps_cur);
    for (int i = 0; i < nmaps_cur; i++) {
        long before = 0;
        for (int j = 0; j < nmaps_prev; j++)
            if (maps_prev[j].lo == maps_cur[i].lo) { before = maps_prev[j].rss; break; }
        if (labs(maps_cur[i].rss - before) >= 256)
            printf("soak maps: cycle %d: %lx-%lx (%lu KiB) %s: RSS %ld -> %ld KiB\n", cyc, maps_cur[i].lo,
                   maps_cur[i].hi, (maps_cur[i].hi - maps_cur[i].lo) / 1024, maps_cur[i].name, before,
                   maps_cur[i].rss);
    }
    for (int j = 0; j < nmaps_prev; j++) {
        int found = 0;
        for (int i = 0; i < nmaps_cur && !found; i++) found = maps_prev[j].lo == maps_cur[i].lo;
        if (!found && maps_prev[j].rss >= 256)
            printf("soak maps: cycle %d: %lx-%lx %s gone (RSS was %ld KiB)\n", cyc, maps_prev[j].lo, maps_prev[j].hi,
                   maps_prev[j].name, maps_prev[j].rss);
    }
    mapent_t *t = maps_prev; maps_prev = maps_cur; maps_cur = t;
    int tn = nmaps_prev; nmaps_prev = nmaps_cur; nmaps_cur = tn;
}

/* ---- the calls ---------------------------------------------------------- */

typedef struct tcomm {
    fr_comm_t c;
    int rank, size;
    const char *name;
} tcomm_t;

static int64_t *sbuf, *rbuf;        /* small calls: 4096 elements of 8 bytes each */
static int64_t *lbuf, *lsend;       /* large calls */
static size_t lcount;               /* elements of a large call */
static double t_small, t_large;     /* seconds inside the calls */
static long n_small_done, n_large_done;

static const size_t small_counts[] = { 1, 3, 16, 100, 1000, 4096, 7, 513 };
#define NSC (sizeof small_counts / sizeof small_counts[0])

static int status_ok(fr_status_t st, const tcomm_t *tc, const char *what, long i)
{
    if (st == FR_SUCCESS) return 1;
    fail("%s call %ld on %s: %s: %s", what, i, tc->name, fr_strerror(st), fr_last_error());
    return 0;
}

/* Small call number @p i on @p tc. */
static void small_call(const tcomm_t *tc, long i)
{
    const int r = tc->rank, n = tc->size;
    const size_t c = small_counts[(size_t)i % NSC];
    const int kind = (int)((i / 2) % 6), inplace = (int)(i % 2);
    const long tri = (long)n * (n + 1) / 2;
    fr_status_t st;
    double t0;
    long bad = -1;
    nchecked++;
    n_small_done++;
    switch (kind) {
    case 0: { /* int64 sum: (r+1)(j+i) -> (j+i) n(n+1)/2 */
        int64_t *in = inplace ? rbuf : sbuf;
        for (size_t j = 0; j < c; j++) in[j] = (int64_t)(r + 1) * (int64_t)(j + (size_t)i);
        t0 = MPI_Wtime();
        st = fr_allreduce(inplace ? FR_IN_PLACE : sbuf, rbuf, c, FR_INT64, FR_SUM, tc->c);
        t_small += MPI_Wtime() - t0;
        if (!status_ok(st, tc, "int64 sum", i)) return;
        for (size_t j = 0; j < c && bad < 0; j++) if (rbuf[j] != (int64_t)(j + (size_t)i) * tri) bad = (long)j;
        break;
    }
    case 1: { /* int32 sum: r+1+j+(i%1000) -> n(n+1)/2 + n(j+i%1000) */
        int32_t *in = inplace ? (int32_t *)rbuf : (int32_t *)sbuf, *out = (int32_t *)rbuf;
        for (size_t j = 0; j < c; j++) in[j] = r + 1 + (int32_t)j + (int32_t)(i % 1000);
        t0 = MPI_Wtime();
        st = fr_allreduce(inplace ? FR_IN_PLACE : sbuf, rbuf, c, FR_INT32, FR_SUM, tc->c);
        t_small += MPI_Wtime() - t0;
        if (!status_ok(st, tc, "int32 sum", i)) return;
        for (size_t j = 0; j < c && bad < 0; j++)
            if (out[j] != (int32_t)(tri + (long)n * ((long)j + i % 1000))) bad = (long)j;
        break;
    }
    case 2: { /* float64 sum of small integers: exact in any order */
        double *in = inplace ? (double *)rbuf : (double *)sbuf, *out = (double *)rbuf;
        for (size_t j = 0; j < c; j++) in[j] = (double)((r + 1) * (long)((j + (size_t)i) % 1024));
        t0 = MPI_Wtime();
        st = fr_allreduce(inplace ? FR_IN_PLACE : sbuf, rbuf, c, FR_FLOAT64, FR_SUM, tc->c);
        t_small += MPI_Wtime() - t0;
        if (!status_ok(st, tc, "float64 sum", i)) return;
        for (size_t j = 0; j < c && bad < 0; j++)
            if (out[j] != (double)(tri * (long)((j + (size_t)i) % 1024))) bad = (long)j;
        break;
    }
    case 3: { /* int64 max: r*1000003 + j + i -> (n-1)*1000003 + j + i */
        int64_t *in = inplace ? rbuf : sbuf;
        for (size_t j = 0; j < c; j++) in[j] = (int64_t)r * 1000003 + (int64_t)j + i;
        t0 = MPI_Wtime();
        st = fr_allreduce(inplace ? FR_IN_PLACE : sbuf, rbuf, c, FR_INT64, FR_MAX, tc->c);
        t_small += MPI_Wtime() - t0;
        if (!status_ok(st, tc, "int64 max", i)) return;
        for (size_t j = 0; j < c && bad < 0; j++)
            if (rbuf[j] != (int64_t)(n - 1) * 1000003 + (int64_t)j + i) bad = (long)j;
        break;
    }
    case 4: { /* int64 bcast from a rotating root */
        int root = (int)(i % n);
        for (size_t j = 0; j < c; j++) rbuf[j] = r == root ? (int64_t)i * 131 + (int64_t)j * 7 + root : -1;
        t0 = MPI_Wtime();
        st = fr_bcast(rbuf, c, FR_INT64, root, tc->c);
        t_small += MPI_Wtime() - t0;
        if (!status_ok(st, tc, "int64 bcast", i)) return;
        for (size_t j = 0; j < c && bad < 0; j++) if (rbuf[j] != (int64_t)i * 131 + (int64_t)j * 7 + root) bad = (long)j;
        break;
    }
    default: { /* bytes bcast of an odd length */
        int root = (int)((i / 3) % n);
        size_t nb = c * 8 - (size_t)(i % 7);
        unsigned char *b = (unsigned char *)rbuf;
        for (size_t j = 0; j < nb; j++) b[j] = r == root ? (unsigned char)(j * 13 + (size_t)i + (size_t)root) : 0xee;
        t0 = MPI_Wtime();
        st = fr_bcast(b, nb, FR_UINT8, root, tc->c);
        t_small += MPI_Wtime() - t0;
        if (!status_ok(st, tc, "uint8 bcast", i)) return;
        for (size_t j = 0; j < nb && bad < 0; j++)
            if (b[j] != (unsigned char)(j * 13 + (size_t)i + (size_t)root)) bad = (long)j;
        break;
    }
    }
    if (bad >= 0)
        fail("small call %ld (kind %d, %zu elements, %s) on %s (rank %d of %d): wrong element %ld",
             i, kind, c, inplace ? "in place" : "out of place", tc->name, r, n, bad);
}

/* Large call number @p k on @p tc: int64 sum or bcast of lcount elements. */
static void large_call(const tcomm_t *tc, long k)
{
    const int r = tc->rank, n = tc->size;
    const long tri = (long)n * (n + 1) / 2;
    fr_status_t st;
    double t0;
    long bad = -1;
    nchecked++;
    n_large_done++;
    if (k % 2 == 0) {
        int inplace = (int)((k / 2) % 2);
        int64_t *in = inplace ? lbuf : lsend;
        for (size_t j = 0; j < lcount; j++) in[j] = (int64_t)(r + 1) * (int64_t)(j ^ (size_t)k);
        t0 = MPI_Wtime();
        st = fr_allreduce(inplace ? FR_IN_PLACE : lsend, lbuf, lcount, FR_INT64, FR_SUM, tc->c);
        t_large += MPI_Wtime() - t0;
        if (!status_ok(st, tc, "large allreduce", k)) return;
        for (size_t j = 0; j < lcount && bad < 0; j++) if (lbuf[j] != (int64_t)(j ^ (size_t)k) * tri) bad = (long)j;
    } else {
        int root = (int)((k / 2) % n);
        for (size_t j = 0; j < lcount; j++) lbuf[j] = r == root ? (int64_t)(j * 3) + k + root : -1;
        t0 = MPI_Wtime();
        st = fr_bcast(lbuf, lcount, FR_INT64, root, tc->c);
        t_large += MPI_Wtime() - t0;
        if (!status_ok(st, tc, "large bcast", k)) return;
        for (size_t j = 0; j < lcount && bad < 0; j++) if (lbuf[j] != (int64_t)(j * 3) + k + root) bad = (long)j;
    }
    if (bad >= 0)
        fail("large call %ld (%s, %zu elements) on %s (rank %d of %d): wrong element %ld", k,
             k % 2 == 0 ? "allreduce" : "bcast", lcount, tc->name, r, n, bad);
}

/* ---- communicators ------------------------------------------------------ */

static MPI_Comm dup_mpi, split_mpi;

static void make_comms(int cycle, tcomm_t *dup, tcomm_t *split)
{
    fr_config_t cfg = FR_CONFIG_INIT;
    cfg.algo = algos[cycle % NALGOS];
    MPI_Comm_dup(MPI_COMM_WORLD, &dup_mpi);
    /* one comm in reverse order below 4 ranks, two interleaved halves from 4 */
    MPI_Comm_split(MPI_COMM_WORLD, wsize >= 4 ? wrank % 2 : 0, wsize - wrank, &split_mpi);
    fr_status_t st = fr_comm_create(dup_mpi, &cfg, &dup->c);
    if (st != FR_SUCCESS) fail("fr_comm_create(dup, algo %s): %s: %s", cfg.algo ? cfg.algo : "table",
                               fr_strerror(st), fr_last_error());
    st = fr_comm_create(split_mpi, NULL, &split->c);
    if (st != FR_SUCCESS) fail("fr_comm_create(split): %s: %s", fr_strerror(st), fr_last_error());
    dup->name = "dup";
    split->name = "split";
    dup->rank = fr_comm_rank(dup->c);
    dup->size = fr_comm_size(dup->c);
    split->rank = fr_comm_rank(split->c);
    split->size = fr_comm_size(split->c);
    int sr, ss;
    MPI_Comm_rank(split_mpi, &sr);
    MPI_Comm_size(split_mpi, &ss);
    if (dup->c && (dup->rank != wrank || dup->size != wsize))
        fail("dup: fr_comm_rank/size %d/%d, want %d/%d", dup->rank, dup->size, wrank, wsize);
    if (split->c && (split->rank != sr || split->size != ss))
        fail("split: fr_comm_rank/size %d/%d, want %d/%d", split->rank, split->size, sr, ss);
}

static void free_comms(tcomm_t *dup, tcomm_t *split)
{
    fr_status_t st = fr_comm_destroy(dup->c);
    if (st != FR_SUCCESS) fail("fr_comm_destroy(dup): %s", fr_strerror(st));
    st = fr_comm_destroy(split->c);
    if (st != FR_SUCCESS) fail("fr_comm_destroy(split): %s", fr_strerror(st));
    dup->c = split->c = NULL;
    MPI_Comm_free(&dup_mpi);
    MPI_Comm_free(&split_mpi);
}

/* ---- main --------------------------------------------------------------- */

static void usage(void)
{
    if (wrank == 0)
        fprintf(stderr, "usage: soak [--short] [--small N] [--large N] [--large-size BYTES] [--cycles C] "
                        "[--rss-bound KIB] [--verbose] [--maps] [--malloc-default]\n");
}

int main(int argc, char **argv)
{
    /* A fixed mmap threshold: glibc's moving one (raised to the size of each
     * large block freed) puts the next communicators' scratch buffers on the
     * heap, whose resident size then climbs in 2 MiB steps and stays up:
     * noise that would hide a leak, or fail a process that has none. With
     * it, a block of 256 KiB or more that is freed leaves the resident set,
     * and one that is leaked stays in it. --malloc-default keeps glibc's. */
    int malloc_default = 0;
    for (int a = 1; a < argc; a++) malloc_default |= !strcmp(argv[a], "--malloc-default");
    if (!malloc_default) mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    const long rss_init = rss_kib();
    long n_small = 100000, n_large = 1000, large_size = 4L << 20, rss_bound = 2048;
    int ncycles = 50;
    for (int a = 1; a < argc; a++) {
        const char *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (!strcmp(argv[a], "--short")) { n_small = 5000; n_large = 50; ncycles = 10; }
        else if (!strcmp(argv[a], "--verbose")) verbose = 1;
        else if (!strcmp(argv[a], "--maps")) show_maps = 1;
        else if (!strcmp(argv[a], "--malloc-default")) continue;
        else if (v && !strcmp(argv[a], "--small")) { n_small = atol(v); a++; }
        else if (v && !strcmp(argv[a], "--large")) { n_large = atol(v); a++; }
        else if (v && !strcmp(argv[a], "--large-size")) { large_size = atol(v); a++; }
        else if (v && !strcmp(argv[a], "--cycles")) { ncycles = atoi(v); a++; }
        else if (v && !strcmp(argv[a], "--rss-bound")) { rss_bound = atol(v); a++; }
        else { usage(); MPI_Finalize(); return 2; }
    }
    if (n_small < 0 || n_large < 0 || large_size < 8 || ncycles < 3 || rss_bound < 0) {
        usage(); MPI_Finalize(); return 2;
    }
    const char *w = getenv("FR_TEST_WATCHDOG");
    unsigned watchdog = w ? (unsigned)strtoul(w, NULL, 10) : 300u;
    if (watchdog) signal(SIGALRM, on_alarm);
    const int warm = ncycles / 10 > 2 ? ncycles / 10 : 2;

    job_pids = calloc((size_t)wsize, sizeof *job_pids);
    long me = (long)getpid();
    MPI_Allgather(&me, 1, MPI_LONG, job_pids, 1, MPI_LONG, MPI_COMM_WORLD);
    lcount = (size_t)large_size / 8;
    sbuf = calloc(4096, 8);
    rbuf = calloc(4096, 8);
    lbuf = calloc(lcount, 8);
    lsend = calloc(lcount, 8);
    if (!job_pids || !sbuf || !rbuf || !lbuf || !lsend) {
        fprintf(stderr, "soak: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* touch the buffers now: their pages are not growth */
    memset(lbuf, 0, lcount * 8);
    memset(lsend, 0, lcount * 8);

    usage_t u_start = measure();
    tcomm_t world = { .name = "world" };
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &world.c);
    if (st != FR_SUCCESS) {
        printf("FAIL soak np=%d rank=%d: fr_comm_create(MPI_COMM_WORLD): %s: %s\n", wsize, wrank,
               fr_strerror(st), fr_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    world.rank = wrank;
    world.size = wsize;
    if (show_maps && wrank == 0) nmaps_prev = read_maps(&maps_prev);
    usage_t u_created = measure(), u_warm = u_created, u_now = u_created;
    long rss_peak = u_created.rss_kib;
    if (wrank == 0) {
        printf("soak np=%d: %ld small calls, %ld large of %ld bytes, %d cycles of comm create/destroy "
               "(warm-up %d), RSS bound %ld KiB\n", wsize, n_small, n_large, large_size, ncycles, warm, rss_bound);
        printf("soak np=%d: rank 0 RSS %ld KiB after MPI_Init, %ld KiB with buffers, %ld KiB with the world's "
               "fr_comm_t; %d fds, %d memfd maps\n", wsize, rss_init, u_start.rss_kib, u_created.rss_kib,
               u_created.fds, u_created.memfd);
        fflush(stdout);
    }

    double t_begin = MPI_Wtime(), t_warm = t_begin, t_cd = 0;
    long small_at_warm = 0, large_at_warm = 0;
    double ts_warm = 0, tl_warm = 0;
    long i_small = 0, i_large = 0;
    for (int cyc = 0; cyc < ncycles; cyc++) {
        cur_cycle = cyc;
        if (watchdog) alarm(watchdog);
        tcomm_t dup = {0}, split = {0};
        double t0 = MPI_Wtime();
        make_comms(cyc, &dup, &split);
        t_cd += MPI_Wtime() - t0;
        const tcomm_t *pick[4] = { &world, &world, &dup, &split };
        long s_end = n_small * (cyc + 1) / ncycles, l_end = n_large * (cyc + 1) / ncycles;
        long s_n = s_end - i_small, l_n = l_end - i_large;
        long every = l_n > 0 ? s_n / l_n + 1 : s_n + 1, s_in = 0;
        while (i_small < s_end || i_large < l_end) {
            if (i_small < s_end) {
                const tcomm_t *tc = pick[i_small % 4];
                if (tc->c) small_call(tc, i_small);
                i_small++;
                s_in++;
            }
            if (i_large < l_end && (s_in % every == 0 || i_small >= s_end)) {
                static const int lpick[3] = { 0, 2, 3 };   /* world, dup, split */
                const tcomm_t *tc = pick[lpick[i_large % 3]];
                if (tc->c) large_call(tc, i_large);
                i_large++;
            }
        }
        t0 = MPI_Wtime();
        free_comms(&dup, &split);
        t_cd += MPI_Wtime() - t0;
        u_now = measure();
        if (show_maps && wrank == 0) diff_maps(cyc);
        if (u_now.rss_kib > rss_peak) rss_peak = u_now.rss_kib;
        if (cyc == warm - 1) {
            u_warm = u_now;
            t_warm = MPI_Wtime();
            small_at_warm = n_small_done;
            large_at_warm = n_large_done;
            ts_warm = t_small;
            tl_warm = t_large;
        }
        long rmax = 0;
        MPI_Reduce(&u_now.rss_kib, &rmax, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
        if (wrank == 0 && (verbose || cyc == warm - 1 || cyc == ncycles - 1 || (cyc + 1) % (ncycles / 10 ? ncycles / 10 : 1) == 0)) {
            printf("soak np=%d: cycle %3d%s: %7ld small %5ld large calls; rank 0 RSS %ld KiB (max over ranks %ld), "
                   "%d fds, %d memfd maps, %d fastreduce /dev/shm entries (%d entries in all)\n", wsize, cyc,
                   cyc == warm - 1 ? " (end of warm-up)" : "", n_small_done, n_large_done, u_now.rss_kib, rmax,
                   u_now.fds, u_now.memfd, u_now.shm, u_now.shm_all);
            fflush(stdout);
        }
    }
    if (watchdog) alarm(watchdog);
    cur_cycle = -1;
    double t_end = MPI_Wtime();

    /* the leak checks, against the end of the warm-up */
    long grow = u_now.rss_kib - u_warm.rss_kib;
    if (grow > rss_bound)
        fail("RSS grew by %ld KiB after the warm-up (%ld -> %ld KiB), more than %ld KiB", grow, u_warm.rss_kib,
             u_now.rss_kib, rss_bound);
    if (u_now.fds > u_warm.fds) fail("open descriptors grew after the warm-up: %d -> %d", u_warm.fds, u_now.fds);
    if (u_now.memfd > u_warm.memfd)
        fail("fastreduce memfd mappings grew after the warm-up: %d -> %d", u_warm.memfd, u_now.memfd);
    if (u_now.shm > u_warm.shm)
        fail("fastreduce /dev/shm entries grew after the warm-up: %d -> %d", u_warm.shm, u_now.shm);
    if (u_now.fds > u_created.fds) fail("open descriptors: %d with the world's comm, %d at the end", u_created.fds, u_now.fds);
    nchecked += 4;

    st = fr_comm_destroy(world.c);
    if (st != FR_SUCCESS) fail("fr_comm_destroy(world): %s", fr_strerror(st));
    usage_t u_final = measure();

    long loc[3] = { nfail, grow, u_now.rss_kib }, mx[3];
    MPI_Allreduce(loc, mx, 3, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    long checked_min = 0;
    MPI_Reduce(&nchecked, &checked_min, 1, MPI_LONG, MPI_MIN, 0, MPI_COMM_WORLD);
    long failed = mx[0];
    if (wrank == 0) {
        double tot = t_end - t_begin, steady = t_end - t_warm;
        long ns = n_small_done - small_at_warm, nl = n_large_done - large_at_warm;
        printf("soak np=%d: RSS rank 0: %ld KiB after MPI_Init, %ld KiB with the world's comm, %ld KiB after the "
               "warm-up, %ld KiB at the end (%+ld KiB; the most on any rank %+ld KiB, bound %ld), peak %ld KiB, "
               "%ld KiB after destroying the world's comm\n", wsize, rss_init, u_created.rss_kib, u_warm.rss_kib,
               u_now.rss_kib, grow, mx[1], rss_bound, rss_peak, u_final.rss_kib);
        printf("soak np=%d: rank 0 RssAnon/RssShmem KiB: %ld/%ld with the world's comm, %ld/%ld after the warm-up, "
               "%ld/%ld at the end\n", wsize, u_created.anon, u_created.shmem, u_warm.anon, u_warm.shmem, u_now.anon,
               u_now.shmem);
        printf("soak np=%d: fds %d -> %d -> %d (start, warm-up, end; %d with no comm), memfd maps %d -> %d, "
               "fastreduce /dev/shm entries %d -> %d\n", wsize, u_created.fds, u_warm.fds, u_now.fds, u_final.fds,
               u_warm.memfd, u_now.memfd, u_warm.shm, u_now.shm);
        printf("soak np=%d: %.2f s in all (%.2f s creating and destroying %d x 2 comms); small calls %.0f/s "
               "(%.2f us each inside the call, %.0f/s steady after warm-up), large calls %.1f/s (%.2f ms each, "
               "%.2f GB/s of buffer)\n", wsize, tot, t_cd, ncycles,
               tot > 0 ? (double)n_small_done / tot : 0, n_small_done ? t_small / (double)n_small_done * 1e6 : 0,
               steady > 0 && t_small > ts_warm ? (double)ns / (t_small - ts_warm) : 0,
               t_large > 0 ? (double)n_large_done / t_large : 0, n_large_done ? t_large / (double)n_large_done * 1e3 : 0,
               t_large > 0 ? (double)n_large_done * (double)lcount * 8 / t_large / 1e9 : 0);
        (void)nl; (void)tl_warm;
        printf("soak np=%d: %ld passed, %ld failed\n", wsize, checked_min - failed, failed);
        fflush(stdout);
    }
    alarm(0);
    free(maps_prev); free(maps_cur);
    free(sbuf); free(rbuf); free(lbuf); free(lsend); free(job_pids);
    MPI_Finalize();
    return failed ? 1 : 0;
}

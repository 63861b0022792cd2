/* linkcut: the MPI program of tests/netns/run.sh.
 *
 * Default mode, the link-cut scenario: a loop of large fr_allreduce() calls
 * (float32 sum) that runs until a call fails or --seconds pass. The script
 * takes one namespace's veth down while it runs; the library, with
 * FASTREDUCE_TIMEOUT=T set, must then return FR_ERR_TIMED_OUT, with a detail
 * message (fr_last_error) naming the peers it waited on, within T + 10 s of
 * the cut (a PASS needs a non-empty detail; one that names no "rank" or
 * "peer" gets a note). Each rank prints, and writes to $FR_LINKCUT_DIR/rank<R>.txt, one
 * verdict line:
 *     linkcut rank R host H: PASS|FAIL <what happened>
 * followed by a "detail:" line when a call failed. A watchdog thread writes
 * a FAIL verdict and ends the rank when a call has not returned T + 10 s
 * after the cut (the library has no bound on its waits), since such a rank
 * would never get to say so. After a failure the rank does not call
 * MPI_Finalize (its peers are unreachable); it lingers until its peers have
 * had time to reach their own verdicts, then exits 0 on PASS and 1 on FAIL.
 *
 * --probe mode, run before the cut on a healthy network: every rank reports
 * its host name and the ranks of its MPI_Comm_split_type(SHARED) group,
 * rank 0 checks that the shared-memory groups are the hosts, then
 * --iters allreduces run and every rank reports how many bytes its
 * namespace's veth ($FR_NETNS_DEV, /sys/class/net/DEV/statistics) sent
 * during them; rank 0 prints "probe: nodes=N hosts=H OK|MISMATCH".
 *
 * Usage: linkcut [--probe] [--count N] [--algo NAME] [--seconds S] [--iters N]
 * Environment:
 *   FASTREDUCE_TIMEOUT   the library's bound on a wait, seconds (read here only
 *                        for the verdict's deadline; 5 when unset)
 *   FR_LINKCUT_STAMP     a file the script writes when it cuts the link:
 *                        seconds since the epoch (date +%s.%N)
 *   FR_LINKCUT_DIR       where the verdict files and the "running" mark go
 *   FR_NETNS_DEV         the veth inside the namespace (fr0)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
#include <mpi.h>
#include "fastreduce.h"

static int me, np;
static char host[MPI_MAX_PROCESSOR_NAME];
static double timeout_s = 5;
static const char *stamp_path, *dir;
static _Atomic double call_start;  /* wall time the call in flight began, 0 when none */
static _Atomic long iteration;
static atomic_flag verdict_given = ATOMIC_FLAG_INIT;

static double now(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

/* The wall time of the cut from $FR_LINKCUT_STAMP, 0 when not cut yet. */
static double cut_time(void)
{
    if (!stamp_path) return 0;
    FILE *f = fopen(stamp_path, "r");
    if (!f) return 0;
    double t = 0;
    if (fscanf(f, "%lf", &t) != 1) t = 0;
    fclose(f);
    return t;
}

/* Print (and file) this rank's verdict once; later calls do nothing. */
static int verdict(int pass, const char *detail, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int verdict(int pass, const char *detail, const char *fmt, ...)
{
    if (atomic_flag_test_and_set(&verdict_given)) return 0;
    char what[1024], line[3000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    int n = snprintf(line, sizeof line, "linkcut rank %d host %s: %s %s\n", me, host, pass ? "PASS" : "FAIL", what);
    if (detail && n > 0 && (size_t)n < sizeof line)
        snprintf(line + n, sizeof line - (size_t)n, "linkcut rank %d detail: %s\n", me, *detail ? detail : "(empty)");
    fputs(line, stdout);
    fflush(stdout);
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/rank%d.txt", dir, me);
        FILE *f = fopen(path, "w");
        if (f) { fputs(line, f); fclose(f); }
    }
    return 1;
}

/* After a verdict: give the other ranks until cut + timeout + 12 s to reach theirs. */
static void linger_and_exit(int code)
{
    double cut = cut_time(), until = (cut > 0 ? cut : now()) + timeout_s + 12;
    while (now() < until) usleep(200000);
    _exit(code);
}

static void *watchdog(void *arg)
{
    (void)arg;
    for (;;) {
        usleep(250000);
        double cut = cut_time(), start = atomic_load(&call_start);
        if (cut <= 0 || start <= 0) continue;
        double since = start > cut ? start : cut;
        if (now() - since > timeout_s + 10) {
            if (verdict(0, NULL, "iteration %ld: fr_allreduce has not returned %.1f s after the link cut "
                        "(FASTREDUCE_TIMEOUT=%g)", atomic_load(&iteration), now() - cut, timeout_s))
                linger_and_exit(1);
            return NULL;
        }
    }
}

static long long dev_bytes(const char *dev, const char *what)
{
    char path[512];
    snprintf(path, sizeof path, "/sys/class/net/%s/statistics/%s", dev, what);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long long v = -1;
    if (fscanf(f, "%lld", &v) != 1) v = -1;
    fclose(f);
    return v;
}

static int probe(fr_comm_t comm, const float *src, float *buf, size_t count, long iters, const char *algo)
{
    /* nodes by MPI_Comm_split_type against nodes by host name */
    MPI_Comm shared;
    int lead, ssize;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &shared);
    MPI_Comm_size(shared, &ssize);
    MPI_Allreduce(&me, &lead, 1, MPI_INT, MPI_MIN, shared);
    MPI_Comm_free(&shared);
    int *leads = malloc(sizeof(int) * (size_t)np);
    char *hosts = calloc((size_t)np, MPI_MAX_PROCESSOR_NAME);
    MPI_Gather(&lead, 1, MPI_INT, leads, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Gather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
    int ok = 1;
    if (me == 0) {
        int nodes = 0, nhosts = 0;
        for (int r = 0; r < np; r++) {
            int newhost = 1;
            for (int q = 0; q < r; q++) {
                int samehost = !strcmp(hosts + (size_t)q * MPI_MAX_PROCESSOR_NAME, hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME);
                if (samehost) newhost = 0;
                if (samehost != (leads[q] == leads[r])) ok = 0;
            }
            nodes += leads[r] == r;
            nhosts += newhost;
            printf("probe rank %d: host %s, shared-memory group led by rank %d\n", r,
                   hosts + (size_t)r * MPI_MAX_PROCESSOR_NAME, leads[r]);
        }
        printf("probe: nodes=%d hosts=%d %s (MPI_Comm_split_type SHARED against host names)\n", nodes, nhosts,
               ok ? "OK" : "MISMATCH");
        printf("probe: fr_allreduce_algorithm for %zu floats: %s\n", count,
               fr_allreduce_algorithm(comm, count, FR_FLOAT32, FR_SUM));
    }
    free(leads);
    free(hosts);

    /* bytes the namespace's veth sends during the allreduces (only ours move) */
    const char *dev = getenv("FR_NETNS_DEV");
    if (!dev || !*dev) dev = "fr0";
    MPI_Barrier(MPI_COMM_WORLD);
    long long tx0 = dev_bytes(dev, "tx_bytes");
    double t0 = MPI_Wtime();
    int bad = 0;
    for (long i = 0; i < iters && !bad; i++) {
        fr_status_t st = fr_allreduce(src, buf, count, FR_FLOAT32, FR_SUM, comm);
        if (st != FR_SUCCESS) {
            printf("probe rank %d: fr_allreduce: %s: %s\n", me, fr_strerror(st), fr_last_error());
            bad = 1;
        } else if (buf[0] != (float)np * (np + 1) / 2 || buf[count - 1] != buf[0]) {
            printf("probe rank %d: wrong result %g (expected %g)\n", me, buf[0], (double)np * (np + 1) / 2);
            bad = 1;
        }
    }
    double dt = MPI_Wtime() - t0;
    MPI_Barrier(MPI_COMM_WORLD);
    long long tx1 = dev_bytes(dev, "tx_bytes");
    printf("probe rank %d host %s: %ld allreduces of %zu bytes (%s) in %.2f s, %s tx_bytes +%lld\n", me, host,
           iters, count * sizeof(float), algo ? algo : "default", dt, dev, tx0 >= 0 && tx1 >= 0 ? tx1 - tx0 : -1LL);
    /* our allreduces must have crossed the veth: at least one message's size per call */
    long long delta = tx0 >= 0 && tx1 >= 0 ? tx1 - tx0 : -1, *deltas = malloc(sizeof(long long) * (size_t)np);
    MPI_Gather(&delta, 1, MPI_LONG_LONG, deltas, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    if (me == 0) {
        long long least = deltas[0];
        for (int r = 1; r < np; r++) if (deltas[r] < least) least = deltas[r];
        int crossed = least >= (long long)(0.9 * (double)iters * (double)(count * sizeof(float)));
        printf("probe: veth traffic %s: least %s tx_bytes of a rank's namespace +%lld, %ld x %zu bytes allreduced\n",
               crossed ? "OK" : "LOW", dev, least, iters, count * sizeof(float));
        if (!crossed) ok = 0;
    }
    free(deltas);
    int allok = 0, mine = ok && !bad;
    MPI_Allreduce(&mine, &allok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return allok;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    int len;
    MPI_Get_processor_name(host, &len);
    size_t count = 4u << 20;  /* 16 MiB of float32 */
    double seconds = 120;
    long iters = 4;
    int probe_mode = 0;
    const char *algo = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--probe")) probe_mode = 1;
        else if (!strcmp(argv[i], "--count") && i + 1 < argc) count = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--algo") && i + 1 < argc) algo = argv[++i];
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atol(argv[++i]);
        else {
            if (me == 0) fprintf(stderr, "usage: linkcut [--probe] [--count N] [--algo NAME] [--seconds S] [--iters N]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (count == 0) count = 1;
    const char *t = getenv("FASTREDUCE_TIMEOUT");
    if (t && *t && atof(t) > 0) timeout_s = atof(t);
    stamp_path = getenv("FR_LINKCUT_STAMP");
    dir = getenv("FR_LINKCUT_DIR");
    if (stamp_path && !*stamp_path) stamp_path = NULL;
    if (dir && !*dir) dir = NULL;

    float *buf = malloc(count * sizeof(float)), *src = malloc(count * sizeof(float));
    if (src) for (size_t k = 0; k < count; k++) src[k] = (float)(me + 1);
    fr_config_t cfg = FR_CONFIG_INIT;
    cfg.algo = algo;
    fr_comm_t comm = NULL;
    fr_status_t st = buf && src ? fr_comm_create(MPI_COMM_WORLD, &cfg, &comm) : FR_ERR_NO_MEMORY;
    if (st != FR_SUCCESS) {
        printf("linkcut rank %d host %s: FAIL fr_comm_create: %s: %s\n", me, host, fr_strerror(st), fr_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    if (probe_mode) {
        int ok = probe(comm, src, buf, count, iters, algo);
        fr_comm_destroy(comm);
        free(buf);
        free(src);
        MPI_Finalize();
        return ok ? 0 : 1;
    }

    if (me == 0)
        printf("linkcut: %d ranks, allreduce of %zu bytes (%s), FASTREDUCE_TIMEOUT=%s, up to %.0f s\n", np,
               count * sizeof(float), algo ? algo : "default", t && *t ? t : "(unset)", seconds);
    fflush(stdout);
    pthread_t wd;
    pthread_create(&wd, NULL, watchdog, NULL);
    double t_begin = now(), t_report = t_begin;
    long i;
    for (i = 0; now() - t_begin < seconds; i++) {
        atomic_store(&iteration, i);
        double t0 = now();
        atomic_store(&call_start, t0);
        st = fr_allreduce(src, buf, count, FR_FLOAT32, FR_SUM, comm);
        double t1 = now();
        atomic_store(&call_start, 0.0);
        if (st != FR_SUCCESS) {
            double cut = cut_time();
            char when[200];
            if (cut > 0)
                snprintf(when, sizeof when, "%.1f s after the link cut, the call took %.1f s", t1 - cut, t1 - t0);
            else
                snprintf(when, sizeof when, "before any link cut, the call took %.1f s", t1 - t0);
            double deadline = timeout_s + 10;
            int in_time = cut > 0 ? t1 - cut <= deadline : t1 - t0 <= deadline;
            const char *detail = fr_last_error();
            int named = strcasestr(detail, "rank") || strcasestr(detail, "peer");
            int pass = st == FR_ERR_TIMED_OUT && cut > 0 && in_time && *detail;
            const char *why = st != FR_ERR_TIMED_OUT ? " (expected FR_ERR_TIMED_OUT)"
                              : cut <= 0 ? " (but no link was cut)"
                              : !in_time ? " (later than FASTREDUCE_TIMEOUT + 10 s)"
                              : !*detail ? " (but fr_last_error() is empty: it should name the peers waited on)"
                              : !named ? " (note: the detail names no rank or peer)" : "";
            if (verdict(pass, detail, "iteration %ld: fr_allreduce returned %s, %s%s", i, fr_strerror(st),
                        when, why))
                linger_and_exit(pass ? 0 : 1);
            linger_and_exit(1);  /* the watchdog gave its verdict first */
        }
        for (size_t k = 0; k < count; k += 1024)
            if (buf[k] != (float)np * (np + 1) / 2) {
                if (verdict(0, NULL, "iteration %ld: wrong result %g at %zu (expected %g)", i, buf[k], k,
                            (double)np * (np + 1) / 2))
                    linger_and_exit(1);
            }
        if (i == 0 && me == 0 && dir) {
            char path[4096];
            snprintf(path, sizeof path, "%s/running", dir);
            FILE *f = fopen(path, "w");
            if (f) fclose(f);
        }
        if (me == 0 && t1 - t_report >= 2) {
            printf("linkcut: %ld allreduces done, the last in %.3f s\n", i + 1, t1 - t0);
            fflush(stdout);
            t_report = t1;
        }
    }
    /* no call failed in the time given */
    double cut = cut_time();
    int given = verdict(0, NULL, "%ld allreduces in %.0f s and none failed%s", i, now() - t_begin,
                        cut > 0 ? " although the link was cut" : " (the link was never cut)");
    if (given && cut > 0) linger_and_exit(1);
    fr_comm_destroy(comm);
    free(buf);
    free(src);
    MPI_Finalize();
    return 1;
}

/* observe_job: a job whose collectives are known in advance, for the
 * observability tests (tests/observe/run.sh): a real Prometheus server
 * scrapes its ranks, and its timeline is merged and read back.
 *
 * For every host algorithm in the registry, forced in turn on a
 * communicator of its own (fr_config_t.algo), each rank makes --calls
 * blocking calls of that algorithm's collective (counts 1 to 4096 floats,
 * uneven; bcast roots in turn) and checks every result against a closed
 * formula; then --calls non-blocking allreduces on a communicator of the
 * table's choice. With --late R --every K --sleep-ms S, rank R sleeps S ms
 * before every K-th call. With --failures, calls that fail on purpose
 * (failures() below). The communicators are destroyed, then
 * --expect FILE (rank 0) gets what was made, one line per kind:
 *   COLLECTIVE ALGORITHM CALLS BYTES
 * (the algorithm as fr_last_algorithm() named it: the forced one, or the
 * table's where the forced one declined), and the failures of all ranks:
 *   failure COLLECTIVE STATUS CALLS
 * (STATUS as the metrics name it), and a call that only one rank made:
 *   extra RANK COLLECTIVE ALGORITHM CALLS BYTES
 * (rank 1's late call, where it found what it needed); with --hold FILE every rank waits (at most 120 s) until FILE
 * exists, so that the metrics' endpoints stay up to be scraped.
 *
 * Before all that, for the tests of the observations' edges:
 *   --fds N        N more descriptors open (the soft limit raised to fit)
 *   --split-first  a first communicator of the ranks of one parity, one call
 *   --spans        spans named with UTF-8 cut at the name's limit and with
 *                  bytes that are not UTF-8, then --threads N threads one
 *                  after another, of 3 "work" spans each
 *   --fork         a new communicator (its clock's event the last written),
 *                  then at once a child forked that calls exit(0)
 *   --kill         a communicator made, 1 s asleep, then SIGKILL
 * (--spans on a communicator made for it: the timeline starts with the
 * process's first communicator)
 *
 * Prints "observe_job np=N: X passed, Y failed".
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "forced.h"
#include "testutil.h"

#define MAX_KINDS 40

typedef struct { const char *coll, *alg; long calls; double bytes; } kind_t;

static kind_t kinds[MAX_KINDS];
static int nkinds;
static int late = -1, every = 10, sleep_ms = 20;
static char late_ok[32];   /* the algorithm of rank 1's late call (failures()) where it succeeded, else "" */

static void count(const char *coll, const char *alg, size_t bytes)
{
    int i;
    for (i = 0; i < nkinds; i++)
        if (!strcmp(kinds[i].coll, coll) && !strcmp(kinds[i].alg, alg)) break;
    if (i == nkinds && nkinds < MAX_KINDS) kinds[nkinds++] = (kind_t){coll, alg, 0, 0};
    if (i < nkinds) {
        kinds[i].calls++;
        kinds[i].bytes += (double)bytes;
    }
}

/* The late rank's delay before call @p k of a series. */
static void maybe_late(long k)
{
    if (tu.rank == late && k % every == 0) usleep((useconds_t)sleep_ms * 1000);
}

static size_t count_of(long k) { return (size_t)(1 + (k * 613) % 4096); }

static void blocking(const fr_alg_t *a, long calls)
{
    char spec[64];
    fr_config_t cfg = FR_CONFIG_INIT;
    cfg.algo = tu_force_spec(a, spec, sizeof spec);
    fr_comm_t c;
    tu_begin("%s forced: %ld calls", a->name, calls);
    if (!TU_CHECK(fr_comm_create(MPI_COMM_WORLD, &cfg, &c) == FR_SUCCESS, "fr_comm_create: %s", fr_last_error()))
        return;
    float *buf = malloc(4096 * sizeof *buf);
    for (long k = 1; k <= calls && buf; k++) {
        size_t n = count_of(k);
        maybe_late(k);
        fr_status_t st;
        int root = (int)(k % tu.size);
        for (size_t i = 0; i < n; i++) buf[i] = (float)(tu.rank + 1 + (long)(i % 7));
        if (a->coll == FR_COLL_ALLREDUCE) st = fr_allreduce(FR_IN_PLACE, buf, n, FR_FLOAT32, FR_SUM, c);
        else st = fr_bcast(buf, n, FR_FLOAT32, root, c);
        if (!TU_CHECK(st == FR_SUCCESS, "call %ld: %s", k, fr_last_error())) break;
        int bad = 0;
        for (size_t i = 0; i < n && !bad; i++) {
            long want = a->coll == FR_COLL_ALLREDUCE ? (long)tu.size * (tu.size + 1) / 2 + (long)tu.size * (long)(i % 7)
                                                     : root + 1 + (long)(i % 7);
            bad = buf[i] != (float)want;
        }
        TU_CHECK(!bad, "call %ld: wrong result", k);
        /* (an algorithm that declines a call, as hier does on one node, leaves it to the table) */
        count(fr_coll_name(a->coll), fr_last_algorithm(), n * sizeof(float));
    }
    free(buf);
    TU_CHECK(fr_comm_destroy(c) == FR_SUCCESS, "fr_comm_destroy: %s", fr_last_error());
}

static void nonblocking(long calls)
{
    fr_comm_t c;
    tu_begin("fr_iallreduce: %ld calls", calls);
    if (!TU_CHECK(fr_comm_create(MPI_COMM_WORLD, NULL, &c) == FR_SUCCESS, "fr_comm_create: %s", fr_last_error()))
        return;
    float *buf = calloc(4096, sizeof *buf);
    for (long k = 1; k <= calls && buf; k++) {
        size_t n = count_of(k);
        maybe_late(k);
        for (size_t i = 0; i < n; i++) buf[i] = 1.0f;
        fr_request_t r;
        fr_status_t st = fr_iallreduce(FR_IN_PLACE, buf, n, FR_FLOAT32, FR_SUM, c, &r);
        if (st == FR_SUCCESS) st = fr_wait(&r);
        if (!TU_CHECK(st == FR_SUCCESS, "request %ld: %s", k, fr_last_error())) break;
        TU_CHECK(buf[0] == (float)tu.size && buf[n - 1] == (float)tu.size, "request %ld: wrong result", k);
        count("allreduce", fr_last_algorithm(), n * sizeof(float));
    }
    free(buf);
    TU_CHECK(fr_comm_destroy(c) == FR_SUCCESS, "fr_comm_destroy: %s", fr_last_error());
}

/* Calls that fail on purpose: three whose counts differ between the
 * ranks (FASTREDUCE_CHECK: FR_ERR_MISMATCH on every rank), and one that
 * rank 1 makes only after the others gave up (FASTREDUCE_TIMEOUT=1). The
 * failures of each status, summed over the ranks, into @p mism and @p tmo. */
static void failures(long *mism, long *tmo)
{
    fr_comm_t c;
    float buf[64] = {0};
    long mine[2] = {0, 0};
    tu_begin("failures: mismatched counts, a rank that calls late");
    setenv("FASTREDUCE_CHECK", "1", 1);
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &c);
    unsetenv("FASTREDUCE_CHECK");
    if (TU_CHECK(st == FR_SUCCESS, "fr_comm_create: %s", fr_last_error())) {
        for (int k = 0; k < 3; k++) {
            st = fr_allreduce(FR_IN_PLACE, buf, tu.rank == 0 ? 8 : 9, FR_FLOAT32, FR_SUM, c);
            mine[0] += TU_CHECK(st == FR_ERR_MISMATCH, "mismatch %d: %s", k, fr_strerror(st));
        }
        TU_CHECK(fr_comm_destroy(c) == FR_SUCCESS, "fr_comm_destroy: %s", fr_last_error());
    }
    setenv("FASTREDUCE_TIMEOUT", "1", 1);
    st = fr_comm_create(MPI_COMM_WORLD, NULL, &c);
    unsetenv("FASTREDUCE_TIMEOUT");
    if (TU_CHECK(st == FR_SUCCESS, "fr_comm_create: %s", fr_last_error())) {
        if (tu.rank != 1) {
            st = fr_allreduce(FR_IN_PLACE, buf, 64, FR_FLOAT32, FR_SUM, c);
            mine[1] += TU_CHECK(st == FR_ERR_TIMED_OUT, "the call rank 1 makes late: %s", fr_strerror(st));
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (tu.rank == 1) {
            /* (the others are gone from the call: it times out, or finds what it needed) */
            st = fr_allreduce(FR_IN_PLACE, buf, 64, FR_FLOAT32, FR_SUM, c);
            mine[1] += st == FR_ERR_TIMED_OUT;
            if (st == FR_SUCCESS) snprintf(late_ok, sizeof late_ok, "%s", fr_last_algorithm());
        }
        /* (rank 0 writes what rank 1's late call did) */
        if (tu.rank == 1) MPI_Send(late_ok, sizeof late_ok, MPI_CHAR, 0, 7, MPI_COMM_WORLD);
        if (tu.rank == 0) MPI_Recv(late_ok, sizeof late_ok, MPI_CHAR, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        fr_comm_destroy(c);   /* (broken under a timeout: no barrier) */
    }
    long all[2];
    MPI_Allreduce(mine, all, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    *mism = all[0];
    *tmo = all[1];
}

/* @p n more open descriptors, so that the library's own come past 1024. */
static void open_fds(int n)
{
    struct rlimit rl;
    tu_begin("%d descriptors open", n);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n + 256) {
        rl.rlim_cur = rl.rlim_max < (rlim_t)n + 256 ? rl.rlim_max : (rlim_t)n + 256;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    int ok = 0;
    for (int i = 0; i < n; i++) ok += open("/dev/null", O_RDONLY) >= 0;
    TU_CHECK(ok == n, "%d of %d opened", ok, n);
}

/* A first communicator of only some ranks: those of the rank's parity. */
static void split_first(void)
{
    MPI_Comm sub;
    fr_comm_t c;
    float x = 1;
    tu_begin("a first communicator of the ranks of one parity");
    MPI_Comm_split(MPI_COMM_WORLD, tu.rank % 2, tu.rank, &sub);
    if (TU_CHECK(fr_comm_create(sub, NULL, &c) == FR_SUCCESS, "fr_comm_create: %s", fr_last_error())) {
        TU_CHECK(fr_allreduce(FR_IN_PLACE, &x, 1, FR_FLOAT32, FR_SUM, c) == FR_SUCCESS, "%s", fr_last_error());
        TU_CHECK(fr_comm_destroy(c) == FR_SUCCESS, "fr_comm_destroy: %s", fr_last_error());
    }
    MPI_Comm_free(&sub);
}

static void *work_spans(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++) {
        fr_span_begin("work");
        fr_span_end();
    }
    return NULL;
}

/* Spans whose names the timeline must cut or mend, then @p threads threads. */
static void spans(int threads)
{
    fr_comm_t c;
    tu_begin("spans of odd names, %d threads", threads);
    if (!TU_CHECK(fr_comm_create(MPI_COMM_WORLD, NULL, &c) == FR_SUCCESS, "fr_comm_create: %s", fr_last_error()))
        return;
    /* 46 bytes and a 3-byte character: a cut at 47 bytes would split it */
    fr_span_begin("0123456789012345678901234567890123456789012345\xe2\x82\xac");
    fr_span_end();
    fr_span_begin("bad \xff\xfe bytes \xc3\xa9");
    fr_span_end();
    for (int i = 0; i < threads; i++) {
        pthread_t t;
        if (!TU_CHECK(pthread_create(&t, NULL, work_spans, NULL) == 0, "thread %d", i)) break;
        pthread_join(t, NULL);
    }
    TU_CHECK(fr_comm_destroy(c) == FR_SUCCESS, "fr_comm_destroy: %s", fr_last_error());
}

/* A child forked just after a communicator was made, which exits. */
static void fork_exit(void)
{
    fr_comm_t c;
    tu_begin("a forked child that calls exit()");
    if (!TU_CHECK(fr_comm_create(MPI_COMM_WORLD, NULL, &c) == FR_SUCCESS, "fr_comm_create: %s", fr_last_error()))
        return;
    pid_t p = fork();
    if (p == 0) exit(0);
    int status = -1;
    TU_CHECK(p > 0 && waitpid(p, &status, 0) == p && WIFEXITED(status), "fork: child %d, status %d", (int)p, status);
    TU_CHECK(fr_comm_destroy(c) == FR_SUCCESS, "fr_comm_destroy: %s", fr_last_error());
}

/* A rank killed a second after its communicator was made. */
static void kill_self(void)
{
    fr_comm_t c;
    if (fr_comm_create(MPI_COMM_WORLD, NULL, &c) != FR_SUCCESS) return;
    sleep(1);
    raise(SIGKILL);
}

int main(int argc, char **argv)
{
    const char *expect = NULL, *hold = NULL;
    long calls = 50;
    int fail = 0, fds = 0;
    int split = 0;
    int odd_spans = 0;
    int threads = 0;
    int forks = 0;
    int kills = 0;
    long mism = 0, tmo = 0;
    for (int i = 1; i < argc; i++) {
        int *flag = !strcmp(argv[i], "--failures") ? &fail : NULL;
        if (!strcmp(argv[i], "--split-first")) flag = &split;
        if (!strcmp(argv[i], "--spans")) flag = &odd_spans;
        if (!strcmp(argv[i], "--fork")) flag = &forks;
        if (!strcmp(argv[i], "--kill")) flag = &kills;
        if (flag) {
            *flag = 1;
            continue;
        }
        if (i + 1 == argc) break;
        if (!strcmp(argv[i], "--fds")) fds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--calls")) calls = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--late")) late = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--every")) every = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--sleep-ms")) sleep_ms = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--expect")) expect = argv[i + 1];
        else if (!strcmp(argv[i], "--hold")) hold = argv[i + 1];
        i++;
    }
    if (every < 1) every = 1;
    MPI_Init(&argc, &argv);
    tu_init("observe_job");
    if (fds > 0) open_fds(fds);
    if (split) split_first();
    if (kills) kill_self();
    if (odd_spans) spans(threads);
    if (forks) fork_exit();
    const fr_alg_t *algs[TU_MAX_FORCED];
    for (int coll = FR_COLL_ALLREDUCE; coll <= FR_COLL_BCAST; coll++) {
        int n = tu_forced("observe_job", (fr_coll_t)coll, 0, algs);
        for (int i = 0; i < n; i++) blocking(algs[i], calls);
    }
    nonblocking(calls);
    if (fail && tu.size > 1) failures(&mism, &tmo);
    if (expect && tu.rank == 0) {
        FILE *f = fopen(expect, "w");
        for (int i = 0; f && i < nkinds; i++)
            fprintf(f, "%s %s %ld %.0f\n", kinds[i].coll, kinds[i].alg, kinds[i].calls, kinds[i].bytes);
        if (f && fail && tu.size > 1)
            fprintf(f, "failure allreduce mismatch %ld\nfailure allreduce timed_out %ld\n", mism, tmo);
        if (f && late_ok[0]) fprintf(f, "extra 1 allreduce %s 1 %zu\n", late_ok, 64 * sizeof(float));
        if (!f || fclose(f)) fprintf(stderr, "observe_job: cannot write %s\n", expect);
    }
    if (hold) {
        /* (each rank's endpoint is served by the library's thread meanwhile) */
        for (int t = 0; t < 1200 && access(hold, F_OK); t++) usleep(100000);
    }
    int rc = tu_finish();
    MPI_Finalize();
    return rc;
}

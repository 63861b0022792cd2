/* test_threads: libfastreduce under MPI_THREAD_MULTIPLE, one communicator
 * per thread (see docs/reliability.md, "Thread safety").
 *
 * The main thread duplicates MPI_COMM_WORLD once per thread, in the same
 * order on every rank; then T threads run at once, each only on its own
 * duplicate:
 *  1. fr_comm_create of a persistent fr_comm_t (the default table), all
 *     threads creating at the same time;
 *  2. R rounds: create an fr_comm_t forcing an allreduce and a bcast
 *     algorithm (fr_config_t.algo; every thread starts at another pair),
 *     run C allreduces and bcasts on it and on the persistent one, checking
 *     every result against a closed formula, destroy it. So creation and
 *     destruction in one thread overlap with calls and creation in others;
 *  3. a failing call (a bad root) whose fr_last_error() must be this
 *     thread's own message while the other threads keep succeeding;
 *  4. FR_Allreduce / FR_Bcast (the fr_comm_t cached on the MPI
 *     communicator) on a further duplicate of its own, freed by the thread
 *     with MPI_Comm_free, which destroys the cached fr_comm_t.
 * Skipped (exit 77) when MPI does not provide MPI_THREAD_MULTIPLE.
 *
 * Usage: test_threads [--threads T] [--rounds R] [--calls C]
 *   defaults: 4 threads, 4 rounds, 60 calls of each kind per round
 * FR_TEST_WATCHDOG=SECONDS (default 300, 0 = off) bounds the run.
 */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <mpi.h>
#include "fastreduce.h"
#include "forced.h"

static int wrank, wsize, nthreads = 4, nrounds = 4, ncalls = 60;
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

/* The host algorithms of the registry forced in turn, but those made for
 * several nodes (hier): the test runs on one node and checks that the
 * forced algorithm is the one chosen, and those decline every call there. */
static const fr_alg_t *ar_algs[TU_MAX_FORCED], *bc_algs[TU_MAX_FORCED];
static int n_ar, n_bc;
/* element counts: one element to past the shm and pipeline chunk sizes */
static const size_t counts[] = { 1, 7, 100, 1000, 4096, 65536, 300000 };
#define NCOUNTS (int)(sizeof counts / sizeof counts[0])
#define MAXCOUNT 300000

typedef struct thr {
    int       id;
    pthread_t tid;
    MPI_Comm  mpi, mpi2;       /* its duplicates of MPI_COMM_WORLD */
    long      checks, fails;
    int       lines;
    int64_t  *a, *b;
} thr_t;

static void tfail(thr_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tfail(thr_t *t, const char *fmt, ...)
{
    t->fails++;
    if (t->lines++ >= 10) return;
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&print_lock);
    printf("FAIL test_threads np=%d rank=%d thread=%d: %s\n", wsize, wrank, t->id, msg);
    fflush(stdout);
    pthread_mutex_unlock(&print_lock);
}

static void on_alarm(int sig)
{
    static const char msg[] = "TIMEOUT test_threads: the run took longer than FR_TEST_WATCHDOG\n";
    ssize_t w = write(1, msg, sizeof msg - 1);
    (void)w; (void)sig;
    _exit(124);
}

/* One allreduce (int64 sum, in place on odd calls) and one bcast on @p c,
 * call number @p k of the thread: the values depend on the thread and on
 * k, so that a result crossing between threads or calls is caught. */
static void calls(thr_t *t, fr_comm_t c, const char *what, long k)
{
    const int n = wsize, r = wrank;
    const size_t cnt = counts[k % NCOUNTS];
    const int64_t tag = (int64_t)t->id * 1000003 + k;
    const int64_t tri = (int64_t)n * (n + 1) / 2;
    int64_t *a = t->a, *b = t->b;
    int inplace = (int)(k & 1);
    int64_t *in = inplace ? b : a;
    for (size_t j = 0; j < cnt; j++) in[j] = (int64_t)(r + 1) * ((int64_t)j + tag);
    fr_status_t st = fr_allreduce(inplace ? FR_IN_PLACE : a, b, cnt, FR_INT64, FR_SUM, c);
    t->checks++;
    if (st != FR_SUCCESS) {
        tfail(t, "%s: allreduce of %zu: %s: %s", what, cnt, fr_strerror(st), fr_last_error());
    } else {
        for (size_t j = 0; j < cnt; j++)
            if (b[j] != ((int64_t)j + tag) * tri) {
                tfail(t, "%s: allreduce of %zu (call %ld): element %zu is %lld, want %lld", what, cnt, k, j,
                      (long long)b[j], (long long)(((int64_t)j + tag) * tri));
                break;
            }
    }
    int root = (int)((k + t->id) % n);
    for (size_t j = 0; j < cnt; j++) b[j] = r == root ? tag * 7 + (int64_t)j : -1;
    st = fr_bcast(b, cnt, FR_INT64, root, c);
    t->checks++;
    if (st != FR_SUCCESS) {
        tfail(t, "%s: bcast of %zu from %d: %s: %s", what, cnt, root, fr_strerror(st), fr_last_error());
    } else {
        for (size_t j = 0; j < cnt; j++)
            if (b[j] != tag * 7 + (int64_t)j) {
                tfail(t, "%s: bcast of %zu from %d (call %ld): element %zu is %lld", what, cnt, root, k, j,
                      (long long)b[j]);
                break;
            }
    }
}

static void *run(void *arg)
{
    thr_t *t = arg;
    fr_comm_t mine = NULL;
    /* 1. concurrent creation */
    fr_status_t st = fr_comm_create(t->mpi, NULL, &mine);
    t->checks++;
    if (st != FR_SUCCESS) { tfail(t, "fr_comm_create: %s: %s", fr_strerror(st), fr_last_error()); return NULL; }
    if (fr_comm_rank(mine) != wrank || fr_comm_size(mine) != wsize)
        tfail(t, "fr_comm_rank/size %d/%d, want %d/%d", fr_comm_rank(mine), fr_comm_size(mine), wrank, wsize);

    /* 2. rounds of forced algorithms, created and destroyed while the others run */
    long k = 0;
    for (int round = 0; round < nrounds; round++) {
        char algo[96];
        const char *ar = ar_algs[(t->id + round) % n_ar]->name, *bc = bc_algs[(t->id + round) % n_bc]->name;
        snprintf(algo, sizeof algo, "allreduce=%s,bcast=%s", ar, bc);
        fr_config_t cfg = FR_CONFIG_INIT;
        cfg.algo = algo;
        fr_comm_t forced = NULL;
        st = fr_comm_create(t->mpi, &cfg, &forced);
        t->checks++;
        if (st != FR_SUCCESS) {
            tfail(t, "round %d: fr_comm_create(%s): %s: %s", round, algo, fr_strerror(st), fr_last_error());
            continue;
        }
        /* the forced choice is this communicator's, not another thread's */
        const char *got = fr_allreduce_algorithm(forced, 1000, FR_INT64, FR_SUM);
        const char *gotb = fr_bcast_algorithm(forced, 1000, FR_INT64, 0);
        t->checks++;
        if (!got || !gotb || strcmp(got, ar) || strcmp(gotb, bc))
            tfail(t, "round %d: %s: the communicator says allreduce %s, bcast %s", round, algo, got ? got : "NULL",
                  gotb ? gotb : "NULL");
        for (int i = 0; i < ncalls; i++, k++) {
            calls(t, forced, algo, k);
            if (i % 4 == 0) calls(t, mine, "persistent", k);
        }
        st = fr_comm_destroy(forced);
        t->checks++;
        if (st != FR_SUCCESS) tfail(t, "round %d: fr_comm_destroy: %s", round, fr_strerror(st));
    }

    /* 3. the error detail is per thread */
    st = fr_bcast(t->a, 1, FR_INT64, wsize + t->id, mine);
    char want[64];
    snprintf(want, sizeof want, "root %d ", wsize + t->id);
    t->checks++;
    if (st != FR_ERR_ROOT || !strstr(fr_last_error(), want))
        tfail(t, "a bad root gave %s with detail '%s' (want FR_ERR_ROOT naming %s)", fr_strerror(st), fr_last_error(),
              want);
    calls(t, mine, "persistent after an error", k++);
    t->checks++;
    if (!strstr(fr_last_error(), want))   /* a success leaves the detail alone; another thread never sets it */
        tfail(t, "the detail changed to '%s' after successful calls", fr_last_error());
    st = fr_comm_destroy(mine);
    t->checks++;
    if (st != FR_SUCCESS) tfail(t, "fr_comm_destroy: %s", fr_strerror(st));

    /* 4. the MPI-signature API: its cache on an MPI communicator of this thread's */
    for (int i = 0; i < 6; i++) {
        size_t cnt = counts[i % NCOUNTS];
        int64_t tag = (int64_t)t->id * 1000003 + 77 * i;
        for (size_t j = 0; j < cnt; j++) t->a[j] = (int64_t)(wrank + 1) * ((int64_t)j + tag);
        int rc = FR_Allreduce(t->a, t->b, (int)cnt, MPI_INT64_T, MPI_SUM, t->mpi2);
        t->checks++;
        if (rc != MPI_SUCCESS) { tfail(t, "FR_Allreduce: MPI error %d", rc); continue; }
        for (size_t j = 0; j < cnt; j++)
            if (t->b[j] != ((int64_t)j + tag) * ((int64_t)wsize * (wsize + 1) / 2)) {
                tfail(t, "FR_Allreduce of %zu: element %zu wrong", cnt, j);
                break;
            }
        int root = (i + t->id) % wsize;
        for (size_t j = 0; j < cnt; j++) t->b[j] = wrank == root ? tag + (int64_t)j : -1;
        rc = FR_Bcast(t->b, (int)cnt, MPI_INT64_T, root, t->mpi2);
        t->checks++;
        if (rc != MPI_SUCCESS) { tfail(t, "FR_Bcast: MPI error %d", rc); continue; }
        for (size_t j = 0; j < cnt; j++)
            if (t->b[j] != tag + (int64_t)j) { tfail(t, "FR_Bcast of %zu: element %zu wrong", cnt, j); break; }
    }
    MPI_Comm_free(&t->mpi2);   /* destroys the cached fr_comm_t, while other threads do the same */
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    n_ar = tu_forced("test_threads", FR_COLL_ALLREDUCE, FR_ALG_NODES, ar_algs);
    n_bc = tu_forced("test_threads", FR_COLL_BCAST, FR_ALG_NODES, bc_algs);
    for (int a = 1; a < argc; a++) {
        const char *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (v && !strcmp(argv[a], "--threads")) { nthreads = atoi(v); a++; }
        else if (v && !strcmp(argv[a], "--rounds")) { nrounds = atoi(v); a++; }
        else if (v && !strcmp(argv[a], "--calls")) { ncalls = atoi(v); a++; }
        else {
            if (wrank == 0) fprintf(stderr, "usage: test_threads [--threads T] [--rounds R] [--calls C]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (nthreads < 1 || nthreads > 64 || nrounds < 0 || ncalls < 0) {
        MPI_Finalize();
        return 2;
    }
    if (provided < MPI_THREAD_MULTIPLE) {
        if (wrank == 0) printf("test_threads np=%d: SKIP: MPI provides thread level %d, not MPI_THREAD_MULTIPLE\n",
                               wsize, provided);
        MPI_Finalize();
        return 77;
    }
    const char *w = getenv("FR_TEST_WATCHDOG");
    unsigned watchdog = w ? (unsigned)strtoul(w, NULL, 10) : 300u;
    if (watchdog) { signal(SIGALRM, on_alarm); alarm(watchdog); }

    thr_t *t = calloc((size_t)nthreads, sizeof *t);
    for (int i = 0; i < nthreads; i++) {
        t[i].id = i;
        MPI_Comm_dup(MPI_COMM_WORLD, &t[i].mpi);
        MPI_Comm_dup(MPI_COMM_WORLD, &t[i].mpi2);
        t[i].a = malloc(MAXCOUNT * sizeof(int64_t));
        t[i].b = malloc(MAXCOUNT * sizeof(int64_t));
        if (!t[i].a || !t[i].b) MPI_Abort(MPI_COMM_WORLD, 2);
    }
    double t0 = MPI_Wtime();
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&t[i].tid, NULL, run, &t[i]) != 0) {
            fprintf(stderr, "test_threads: pthread_create failed\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    long checks = 0, fails = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(t[i].tid, NULL);
        checks += t[i].checks;
        fails += t[i].fails;
        MPI_Comm_free(&t[i].mpi);
        if (t[i].mpi2 != MPI_COMM_NULL) MPI_Comm_free(&t[i].mpi2);
        free(t[i].a);
        free(t[i].b);
    }
    double dt = MPI_Wtime() - t0;
    long in[2] = { fails, -checks }, out[2];
    MPI_Allreduce(in, out, 2, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    long maxfail = out[0], minchecks = -out[1];
    if (wrank == 0) {
        printf("test_threads np=%d: %d threads, %d rounds of %d calls each, %.2f s\n", wsize, nthreads, nrounds, ncalls,
               dt);
        printf("test_threads np=%d: %ld passed, %ld failed\n", wsize, minchecks - maxfail, maxfail);
        fflush(stdout);
    }
    alarm(0);
    free(t);
    MPI_Finalize();
    return maxfail ? 1 : 0;
}

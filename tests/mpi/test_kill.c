/* test_kill: a rank is killed (SIGKILL) in the middle of large allreduces;
 * the others must come back with an error naming what they waited on, be
 * able to destroy their communicator, and exit.
 *
 * The last rank starts a thread that kills its process a few milliseconds
 * into its third call. Every other rank loops over the same calls with
 * FASTREDUCE_TIMEOUT set; the first failing call must return within the
 * timeout + 2 s with FR_ERR_TIMED_OUT (or FR_ERR_UCX, where UCX sees the
 * peer's endpoint go), fr_comm_destroy must succeed without waiting, and the
 * rank prints one line
 *     test_kill survivor R: OK: <status> after S s: <message>
 * or "test_kill survivor R: FAILED: ...", also into $FR_KILL_OUT/survivor.R
 * when FR_KILL_OUT names a folder, then leaves with _exit (MPI cannot
 * finalize with a dead rank). The launcher must keep the survivors alive
 * (Open MPI: --mca orte_enable_recovery 1; MPICH: -disable-auto-cleanup);
 * tests/mpi/run_mpi.sh counts the lines and checks /dev/shm afterwards.
 *
 * With --requests, each call is three requests (fr_iallreduce of a third of
 * the buffer each) completed by one fr_waitall: the victim dies with
 * requests in flight, and a survivor's fr_waitall must come back as a
 * call would, after which fr_comm_destroy (no request left pending) works.
 *
 * With --shared the buffer comes from fr_mem_alloc: the calls go zero-copy
 * (the first two must say so), and the victim dies while its peers map its
 * memory and write into it.
 *
 * Usage: test_kill [--algo NAME] [--timeout SECONDS] [--count FLOATS] [--requests] [--shared]
 */
#include <pthread.h>
#include <time.h>
#include "testutil.h"

/* The three requests of one call of --requests mode, completed together:
 * the first failed one's status (with its detail in fr_last_error()). */
static fr_status_t three_requests(float *buf, size_t count, fr_comm_t c)
{
    fr_request_t r[3];
    size_t third = count / 3;
    for (int k = 0; k < 3; k++) {
        size_t n = k < 2 ? third : count - 2 * third;
        fr_status_t st = fr_iallreduce(FR_IN_PLACE, buf + k * third, n, FR_FLOAT32, FR_SUM, c, &r[k]);
        if (st != FR_SUCCESS) {
            fr_waitall((size_t)k, r, NULL);
            return st;
        }
    }
    return fr_waitall(3, r, NULL);
}

static void *killer(void *arg)
{
    struct timespec ts = {0, (long)(intptr_t)arg * 1000000L};
    nanosleep(&ts, NULL);
    kill(getpid(), SIGKILL);
    return NULL;
}

typedef struct {
    const char *algo, *tmo;
    size_t count;
    int requests, shared;
} kill_opts_t;

static kill_opts_t parse(int argc, char **argv)
{
    kill_opts_t o = { "shm", "2", 4u << 20, 0, 0 };
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--requests")) o.requests = 1;
        else if (!strcmp(argv[i], "--shared")) o.shared = 1;
        else if (i + 1 == argc) break;
        else if (!strcmp(argv[i], "--algo")) o.algo = argv[++i];
        else if (!strcmp(argv[i], "--timeout")) o.tmo = argv[++i];
        else if (!strcmp(argv[i], "--count")) o.count = strtoull(argv[++i], NULL, 10);
    }
    return o;
}

/* Allreduce until a call fails; the last rank arranges its own death in
 * its third call. Returns the failed call's status, its time in *t_fail;
 * *not_zc: how many of the first two blocking calls on shared memory did
 * not go zero-copy. */
static fr_status_t run_until_failure(fr_comm_t c, const kill_opts_t *o, const char *chosen, int me, int victim,
                                     double *t_fail, int *not_zc)
{
    void *mem = NULL;
    if (o->shared && fr_mem_alloc(o->count * sizeof(float), &mem) != FR_SUCCESS) return FR_ERR_NO_MEMORY;
    float *buf = o->shared ? mem : malloc(o->count * sizeof(float));
    for (size_t i = 0; i < o->count; i++) buf[i] = 1.0f;
    fr_status_t st = FR_SUCCESS;
    for (int it = 0; it < 200; it++) {
        if (me == victim && it == 2) {
            printf("test_kill victim %d: killed in call %d of %s (%zu floats%s)\n", me, it + 1, chosen, o->count,
                   o->requests ? ", three requests in flight" : "");
            fflush(stdout);
            pthread_t t;
            pthread_create(&t, NULL, killer, (void *)(intptr_t)5);
        }
        double t0 = MPI_Wtime();
        st = o->requests ? three_requests(buf, o->count, c)
                         : fr_allreduce(FR_IN_PLACE, buf, o->count, FR_FLOAT32, FR_SUM, c);
        if (st != FR_SUCCESS) { *t_fail = MPI_Wtime() - t0; break; }
        if (o->shared && !o->requests && it < 2) *not_zc += !fr_last_zero_copy();
    }
    if (o->shared) fr_mem_free(mem);
    else free(buf);
    return st;
}

/* Launchers may end the job when the first survivor leaves, and lose the
 * others' output: each writes its line to a file in FR_KILL_OUT, and
 * leaves once every survivor has (or after 10 s). */
static void report(const char *line, int me, int np)
{
    fputs(line, stdout);
    fflush(stdout);
    const char *dir = getenv("FR_KILL_OUT");
    if (!dir) return;
    char path[512];
    snprintf(path, sizeof path, "%s/survivor.%d", dir, me);
    FILE *f = fopen(path, "w");
    if (f) { fputs(line, f); fclose(f); }
    for (int waited = 0; waited < 1000; waited++) {
        int n = 0;
        for (int r = 0; r < np - 1; r++) {
            struct stat sb;
            snprintf(path, sizeof path, "%s/survivor.%d", dir, r);
            n += stat(path, &sb) == 0;
        }
        if (n == np - 1) break;
        usleep(10000);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int np, me;
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    /* MPICH's launcher tells the others of a dead rank with SIGUSR1, whose
     * default action ends the process */
    signal(SIGUSR1, SIG_IGN);
    kill_opts_t o = parse(argc, argv);
    char spec[64];
    snprintf(spec, sizeof spec, "allreduce=%s", o.algo);
    fr_config_t cfg = FR_CONFIG_INIT;
    cfg.algo = spec;
    setenv("FASTREDUCE_TIMEOUT", o.tmo, 1);
    fr_comm_t c = NULL;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, &cfg, &c);
    if (st != FR_SUCCESS) {
        printf("test_kill survivor %d: FAILED: fr_comm_create: %s %s\n", me, fr_strerror(st), fr_last_error());
        fflush(stdout);
        _exit(1);
    }
    const char *chosen = fr_allreduce_algorithm(c, o.count, FR_FLOAT32, FR_SUM);
    double t_fail = 0;
    int not_zc = 0;
    st = run_until_failure(c, &o, chosen, me, np - 1, &t_fail, &not_zc);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", fr_last_error());
    double limit = atof(o.tmo) + 2.0;
    const char *why = st == FR_SUCCESS ? "every call succeeded although a rank was killed"
                    : st != FR_ERR_TIMED_OUT && st != FR_ERR_UCX ? "unexpected status"
                    : t_fail > limit ? "came back too late"
                    : st == FR_ERR_TIMED_OUT && !strstr(msg, "waiting for") ? "the message names no peer"
                    : not_zc ? "a call on shared memory before the kill did not go zero-copy" : NULL;
    fr_status_t ds = fr_comm_destroy(c);
    if (!why && ds != FR_SUCCESS) why = "fr_comm_destroy failed";
    char line[1400];
    snprintf(line, sizeof line, "test_kill survivor %d: %s: %s after %.2f s (%s): %s%s%s\n", me, why ? "FAILED" : "OK",
             fr_strerror(st), t_fail, chosen, msg, why ? " -- " : "", why ? why : "");
    report(line, me, np);
    _exit(why ? 1 : 0);
}

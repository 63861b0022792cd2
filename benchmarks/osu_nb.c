/* The non-blocking driver of the osu-style benchmarks (fr_osu_iallreduce,
 * fr_osu_ibcast), after OSU's osu_iallreduce and osu_ibcast: at each size
 * it times start + wait alone (Pure Comm.), then start + a compute of
 * that length + wait (Overall), and prints how much of the communication
 * the compute hid (Overlap). The options, buffers, validation and the
 * output's conventions are the blocking driver's (osu_common.c). See
 * docs/benchmarks.md. */
#include "config.h"
#include "osu_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

/* What an iteration's times are split into, in this order in the arrays. */
enum { NB_OVERALL, NB_COMPUTE, NB_INIT, NB_TEST, NB_WAIT, NB_NCOLS };
#define NB_LIBS 2   /* fastreduce, and MPI with --vs-mpi */

/* A request of either library. */
typedef struct nb_req {
    int          mpi;
    fr_request_t fr;
    MPI_Request  mreq;
} nb_req_t;

/* One library's figures at one size: medians over blocks of the max over
 * ranks of each rank's block average, in us. */
typedef struct nb_result {
    double col[NB_NCOLS];   /* start + compute + wait, split */
    double pure;            /* start + wait alone */
    int    iters;           /* timed iterations of each kind per rank */
} nb_result_t;

static const char *call_name(const osu_coll_t *coll, int mpi)
{
    if (coll->kind == OSU_ALLREDUCE) return mpi ? "MPI_Iallreduce" : "fr_iallreduce";
    return mpi ? "MPI_Ibcast" : "fr_ibcast";
}

fr_status_t osu_call_nonblocking(const osu_coll_t *coll, osu_ctx_t *c)
{
    fr_request_t req = FR_REQUEST_NULL;
    fr_status_t st = coll->start_fr(c, &req);
    return st != FR_SUCCESS ? st : fr_wait(&req);
}

static void req_start(const osu_coll_t *coll, osu_ctx_t *c, nb_req_t *r)
{
    if (r->mpi) osu_check_mpi(coll->start_mpi(c, &r->mreq), call_name(coll, 1));
    else osu_check_fr(coll->start_fr(c, &r->fr), call_name(coll, 0));
}

static void req_test(nb_req_t *r)
{
    int done = 0;
    if (r->mpi) osu_check_mpi(MPI_Test(&r->mreq, &done, MPI_STATUS_IGNORE), "MPI_Test");
    else osu_check_fr(fr_test(&r->fr, &done), "fr_test");
}

static void req_wait(nb_req_t *r)
{
    if (r->mpi) osu_check_mpi(MPI_Wait(&r->mreq, MPI_STATUS_IGNORE), "MPI_Wait");
    else osu_check_fr(fr_wait(&r->fr), "fr_wait");
}

/* ---------------------------------------------------------------- compute */

/* The monotonic clock clock_nanosleep sleeps on, in seconds; every time of
 * an iteration is taken on it. */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* OSU's dummy compute: a small matrix pass over data that stays in the
 * core's cache, repeated until the deadline. The result goes to a volatile
 * so that the compiler keeps the work. */
#define DIM 25
static float mat_a[DIM][DIM], vec_x[DIM], vec_y[DIM];
static volatile float sink;

static void busy_until(double end)
{
    for (int i = 0; i < DIM; i++) {
        vec_x[i] = vec_y[i] = 1.0f;
        for (int j = 0; j < DIM; j++) mat_a[i][j] = 0.5f;
    }
    do {
        for (int i = 0; i < DIM; i++)
            for (int j = 0; j < DIM; j++) vec_x[i] = vec_x[i] * 0.5f + mat_a[i][j] * mat_a[j][i] + vec_y[j];
        sink = vec_x[0];
    } while (now() < end);
}

/* Sleep to an absolute deadline, so that a late wake-up does not add up
 * over the slices of --test-every. */
static void idle_until(double end)
{
    struct timespec ts;
    ts.tv_sec = (time_t)end;
    ts.tv_nsec = (long)((end - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec > 999999999L) ts.tv_nsec = 999999999L;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

/* Compute for @p seconds, as --compute says; with --test-every, in slices
 * of that length with a test of @p r after each. As in OSU, the tests'
 * time does not count as compute: the slices add up to @p seconds and the
 * tests come on top. Returns the compute's time; *test_s gets the tests'. */
static double compute(const osu_opts_t *o, double seconds, nb_req_t *r, double *test_s)
{
    double slice = o->test_every_us > 0 ? o->test_every_us * 1e-6 : seconds;
    double done = 0, tests = 0;
    while (done < seconds) {
        double chunk = seconds - done < slice ? seconds - done : slice;
        double t0 = now();
        if (o->compute == OSU_COMPUTE_BUSY) busy_until(t0 + chunk);
        else idle_until(t0 + chunk);
        double t1 = now();
        done += t1 - t0;
        if (done >= seconds || o->test_every_us <= 0) break;
        req_test(r);
        tests += now() - t1;
    }
    *test_s = tests;
    return done;
}

/* ----------------------------------------------------------------- timing */

/* One iteration: start, compute for @p target seconds, wait; its times
 * added to @p acc. */
static void iteration(const osu_coll_t *coll, osu_ctx_t *c, int mpi, double target, double *acc)
{
    nb_req_t r = { mpi, FR_REQUEST_NULL, MPI_REQUEST_NULL };
    double test = 0, t0 = now();
    req_start(coll, c, &r);
    double t1 = now();
    double comp = compute(c->o, target, &r, &test);
    double t2 = now();
    req_wait(&r);
    double t3 = now();
    acc[NB_OVERALL] += t3 - t0;
    acc[NB_COMPUTE] += comp;
    acc[NB_INIT] += t1 - t0;
    acc[NB_TEST] += test;
    acc[NB_WAIT] += t3 - t2;
}

/* This rank's averages over a block of @p n iterations, in us. Each
 * iteration starts at a barrier, as in OSU, so that no rank's compute
 * overlaps another rank's previous iteration. */
static void block(const osu_coll_t *coll, osu_ctx_t *c, int mpi, double target, int n, double *out)
{
    double acc[NB_NCOLS] = { 0 }, untimed[NB_NCOLS] = { 0 };
    /* one untimed iteration first: the libraries' blocks take turns, and the
     * first call after the other's block finds the caches holding its buffers */
    MPI_Barrier(c->mpi_comm);
    iteration(coll, c, mpi, target, untimed);
    for (int j = 0; j < n; j++) {
        MPI_Barrier(c->mpi_comm);
        iteration(coll, c, mpi, target, acc);
    }
    for (int k = 0; k < NB_NCOLS; k++) out[k] = acc[k] * 1e6 / n;
}

/* @p nb blocks of each of @p nlib libraries, a different one first in
 * turn, at targets[lib]; loc[(lib * nb + b) * NB_NCOLS + k]. */
static void blocks(const osu_coll_t *coll, osu_ctx_t *c, int nlib, int nb, int per, const double *targets,
                   double *loc)
{
    for (int b = 0; b < nb; b++)
        for (int i = 0; i < nlib; i++) {
            int lib = b % 2 ? nlib - 1 - i : i;
            block(coll, c, lib, targets[lib], per, loc + (lib * nb + b) * NB_NCOLS);
        }
}

/* The medians over blocks of the max over ranks, on every rank:
 * med[lib * NB_NCOLS + k]. @p vmax is scratch of loc's size. */
static void medians(osu_ctx_t *c, const double *loc, double *vmax, int nlib, int nb, double *med)
{
    double v[OSU_MAX_BLOCKS];
    MPI_Allreduce(loc, vmax, nlib * nb * NB_NCOLS, MPI_DOUBLE, MPI_MAX, c->mpi_comm);
    for (int lib = 0; lib < nlib; lib++)
        for (int k = 0; k < NB_NCOLS; k++) {
            for (int b = 0; b < nb; b++) v[b] = vmax[(lib * nb + b) * NB_NCOLS + k];
            med[lib * NB_NCOLS + k] = osu_median(v, nb);
        }
}

/* The current size (c->count): warm-up, Pure Comm. of each library, then
 * each library's start + compute + wait with the compute calibrated to its
 * own Pure Comm., as OSU calibrates it. */
static void time_size(const osu_coll_t *coll, osu_ctx_t *c, nb_result_t *res)
{
    const osu_opts_t *o = c->o;
    size_t bytes = c->count * c->esize;
    int iters = osu_default_iters(o, bytes), warm = osu_default_warmup(o, bytes);
    int nb = osu_blocks(o, bytes), per = (iters + nb - 1) / nb;
    int nlib = o->vs_mpi ? NB_LIBS : 1;
    double targets[NB_LIBS] = { 0, 0 }, med[NB_LIBS * NB_NCOLS], scratch[NB_NCOLS] = { 0 };
    double *loc = malloc(sizeof(double) * NB_LIBS * (size_t)nb * NB_NCOLS);
    double *vmax = malloc(sizeof(double) * NB_LIBS * (size_t)nb * NB_NCOLS);
    if (!loc || !vmax) osu_die("malloc", "out of memory");

    for (int j = 0; j < warm; j++)
        for (int lib = 0; lib < nlib; lib++) {
            MPI_Barrier(c->mpi_comm);
            iteration(coll, c, lib, 0, scratch);
        }
    blocks(coll, c, nlib, nb, per, targets, loc);
    medians(c, loc, vmax, nlib, nb, med);
    for (int lib = 0; lib < nlib; lib++) {
        res[lib].pure = med[lib * NB_NCOLS + NB_OVERALL];
        targets[lib] = res[lib].pure * 1e-6;
    }
    blocks(coll, c, nlib, nb, per, targets, loc);
    medians(c, loc, vmax, nlib, nb, med);
    for (int lib = 0; lib < nlib; lib++) {
        memcpy(res[lib].col, med + lib * NB_NCOLS, sizeof res[lib].col);
        res[lib].iters = nb * per;
    }
    free(loc);
    free(vmax);
}

/* ----------------------------------------------------------------- output */

static void print_header(const osu_coll_t *coll, const osu_ctx_t *c)
{
    const osu_opts_t *o = c->o;
    char name[64], nblocks[128];
    snprintf(name, sizeof name, "Non-blocking %s Latency Test", coll->title);
    osu_print_intro(c, coll, name);
    osu_print_threads(c->comm, o->thread_level, o->thread_provided);
    if (o->compute == OSU_COMPUTE_IDLE)
        printf("# Compute: idle: the rank sleeps (clock_nanosleep), its CPU free, as while it waits for a GPU\n");
    else
        printf("# Compute: busy: the rank spins its CPU (OSU's dummy_compute)\n");
    if (o->test_every_us > 0)
        printf("# Test calls: fr_test / MPI_Test every %g us of compute (in Overall, not in Compute)\n",
               o->test_every_us);
    else
        printf("# Test calls: none during the compute\n");
    osu_blocks_text(o, c->esize, nblocks, sizeof nblocks);
    printf("# Overall = start + compute + wait; Pure Comm. = start + wait alone; Compute is calibrated to\n"
           "#   the same library's Pure Comm. Each time: median of %s of the max over ranks of each\n"
           "#   rank's average per iteration in the block. Overlap(%%) = max(0, 100 * (1 - (Overall - Compute)\n"
           "#   / Pure Comm.))\n", nblocks);
    if (o->vs_mpi)
        printf("# --vs-mpi: each size has a row of %s after fastreduce's; their blocks alternate%s\n",
               call_name(coll, 1),
               coll->kind == OSU_ALLREDUCE && o->op == FR_AVG ? " (MPI_SUM: MPI has no average)" : "");
    printf("%-*s%*s%*s", OSU_SIZE_W, "# Size", OSU_FIELD_W, "Overall(us)", OSU_FIELD_W, "Compute(us)");
    if (o->full)
        printf("%*s%*s%*s", OSU_FIELD_W, "Init(us)", OSU_FIELD_W, "Test(us)", OSU_FIELD_W, "Wait(us)");
    printf("%*s%*s", OSU_FIELD_W, "Pure Comm.(us)", OSU_FIELD_W, "Overlap(%)");
    if (o->full) printf("%*s", 12, "Iterations");
    if (o->validate) printf("%*s", 12, "Validation");
    printf("  %s\n", "Algorithm");
    fflush(stdout);
}

/* A row; @p valid is 1 or 0 with -c, -1 for a row that was not validated. */
static void print_row(const osu_opts_t *o, size_t size, const nb_result_t *r, int valid, const char *label)
{
    const double *v = r->col;
    double overlap = r->pure > 0 ? 100.0 * (1.0 - (v[NB_OVERALL] - v[NB_COMPUTE]) / r->pure) : 0.0;
    printf("%-*zu%*.*f%*.*f", OSU_SIZE_W, size, OSU_FIELD_W, OSU_PREC, v[NB_OVERALL], OSU_FIELD_W, OSU_PREC,
           v[NB_COMPUTE]);
    if (o->full)
        printf("%*.*f%*.*f%*.*f", OSU_FIELD_W, OSU_PREC, v[NB_INIT], OSU_FIELD_W, OSU_PREC, v[NB_TEST], OSU_FIELD_W,
               OSU_PREC, v[NB_WAIT]);
    printf("%*.*f%*.*f", OSU_FIELD_W, OSU_PREC, r->pure, OSU_FIELD_W, OSU_PREC, overlap > 0 ? overlap : 0.0);
    if (o->full) printf("%*d", 12, r->iters);
    if (o->validate) printf("%*s", 12, valid < 0 ? "-" : valid ? "Pass" : "Fail");
    printf("  %s\n", label ? label : "?");
    fflush(stdout);
}

int osu_nb_main(int argc, char **argv, const osu_coll_t *coll)
{
    osu_opts_t o;
    osu_ctx_t c;
    int status = osu_setup(argc, argv, coll, 1, &o, &c);
    if (status >= 0) return status;
    status = 0;
    /* Linux lets a sleep overrun by the thread's timer slack (50 us by
     * default) to batch wake-ups; that would add to every idle compute. */
    if (o.compute == OSU_COMPUTE_IDLE) prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    if (osu_rank == 0) print_header(coll, &c);
    for (size_t size = osu_first_size(&o); size; size = osu_next_size(&o, size)) {
        nb_result_t r[NB_LIBS];
        c.count = size / c.esize;
        if (c.count == 0) continue;
        const char *alg = coll->algorithm(&c, NULL, 0);
        time_size(coll, &c, r);
        int valid = !o.validate || osu_validate_size(coll, &c, size, osu_call_nonblocking);
        if (!valid) status = 1;
        if (osu_rank != 0) continue;
        print_row(&o, size, &r[0], valid, alg);
        if (o.vs_mpi) print_row(&o, size, &r[1], -1, call_name(coll, 1));
    }
    osu_teardown(&c);
    return status;
}

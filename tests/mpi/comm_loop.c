/* comm_loop: communicators made and destroyed in a loop, for leak checkers
 * (scripts/valgrind.sh runs it under valgrind's memcheck).
 *
 * For every host algorithm of the registry (algorithms/registry.c, read
 * through fr_algs[], so a new one is covered without touching this file),
 * on one node and on two faked nodes (fr_config_t.node_size = 1, which is
 * where hier runs and shm declines): fr_comm_create with the algorithm
 * forced through fr_config_t.algo ("allreduce=NAME" or "bcast=NAME"), a few
 * calls whose results are checked against what every rank computes itself,
 * fr_comm_destroy. Then the same with the default table. All of it K times.
 * Every host algorithm must have been the one chosen for some call (else it
 * was forced but never ran).
 *
 * Usage: comm_loop [K]   (default 2; at least 2 ranks to check much)
 * Prints "comm_loop np=N: X passed, Y failed" on rank 0 (tests/mpi/testutil.h).
 */
#include "testutil.h"
#include "internal.h" /* fr_algs[], fr_nalgs: the registry */

static int np, me;

/* counts chosen to take several code paths: one element, an odd size, above
 * shm's single-shot limit (8 or 16 KiB), and more than one ring/pipeline chunk */
static const size_t ar_counts[] = { 1, 1027, 150000 };
static const size_t bc_bytes[] = { 1, 4099, 600000 };
#define N_AR_COUNTS (sizeof ar_counts / sizeof ar_counts[0])
#define N_BC_BYTES (sizeof bc_bytes / sizeof bc_bytes[0])

static int32_t *ibuf, *iout;    /* allreduce int32 sum */
static float *fbuf;             /* allreduce float32 max, in place */
static unsigned char *bbuf;     /* bcast */

static int32_t ar_in(size_t i, int rank, int iter) { return (int32_t)((rank + 1) * (int)(i % 17 + 1) + iter); }
static float ar_fin(size_t i, int rank, int iter) { return (float)((i * 7 + (size_t)rank * 3 + (size_t)iter) % 101); }
static unsigned char bc_val(size_t i, int root, int iter) { return (unsigned char)((i * 31 + (size_t)root * 7 + (size_t)iter) & 0xff); }

/* one communicator's calls; returns 1 if @p name was the algorithm chosen for any */
static int run_calls(fr_comm_t c, const fr_alg_t *alg, int iter, const char *what)
{
    int ran = 0;
    size_t n_ar = !alg || alg->coll == FR_COLL_ALLREDUCE ? N_AR_COUNTS : 0;
    size_t n_bc = !alg || alg->coll == FR_COLL_BCAST ? N_BC_BYTES : 0;
    for (size_t k = 0; k < n_ar; k++) {
        size_t n = ar_counts[k];
        const char *chosen = fr_allreduce_algorithm(c, n, FR_INT32, FR_SUM);
        if (alg && chosen && !strcmp(chosen, alg->name)) ran = 1;
        tu_begin("%s: allreduce int32 sum count=%zu (%s)", what, n, chosen ? chosen : "?");
        for (size_t i = 0; i < n; i++) { ibuf[i] = ar_in(i, me, iter); iout[i] = -1; }
        fr_status_t st = fr_allreduce(ibuf, iout, n, FR_INT32, FR_SUM, c);
        if (TU_CHECK(st == FR_SUCCESS, "fr_allreduce returned %s: %s", tu_status(st), fr_last_error())) {
            size_t bad = 0, first = 0;
            for (size_t i = 0; i < n; i++) {
                int32_t want = 0;
                for (int r = 0; r < np; r++) want += ar_in(i, r, iter);
                if (iout[i] != want && bad++ == 0) first = i;
            }
            TU_CHECK(bad == 0, "%zu of %zu elements wrong, first at %zu", bad, n, first);
            for (size_t i = 0; i < n && bad == 0; i++)
                if (ibuf[i] != ar_in(i, me, iter)) { tu_fail("sendbuf changed at %zu", i); break; }
        }
        /* the same count in place, float32 max */
        chosen = fr_allreduce_algorithm(c, n, FR_FLOAT32, FR_MAX);
        if (alg && chosen && !strcmp(chosen, alg->name)) ran = 1;
        tu_begin("%s: allreduce float32 max in place count=%zu (%s)", what, n, chosen ? chosen : "?");
        for (size_t i = 0; i < n; i++) fbuf[i] = ar_fin(i, me, iter);
        st = fr_allreduce(FR_IN_PLACE, fbuf, n, FR_FLOAT32, FR_MAX, c);
        if (TU_CHECK(st == FR_SUCCESS, "fr_allreduce returned %s: %s", tu_status(st), fr_last_error())) {
            size_t bad = 0, first = 0;
            for (size_t i = 0; i < n; i++) {
                float want = ar_fin(i, 0, iter);
                for (int r = 1; r < np; r++) if (ar_fin(i, r, iter) > want) want = ar_fin(i, r, iter);
                if (fbuf[i] != want && bad++ == 0) first = i;
            }
            TU_CHECK(bad == 0, "%zu of %zu elements wrong, first at %zu", bad, n, first);
        }
    }
    for (size_t k = 0; k < n_bc; k++) {
        size_t n = bc_bytes[k];
        int root = (int)((k + (size_t)iter) % (size_t)np);
        const char *chosen = fr_bcast_algorithm(c, n, FR_UINT8, root);
        if (alg && chosen && !strcmp(chosen, alg->name)) ran = 1;
        tu_begin("%s: bcast %zu bytes root=%d (%s)", what, n, root, chosen ? chosen : "?");
        for (size_t i = 0; i < n; i++) bbuf[i] = me == root ? bc_val(i, root, iter) : 0xEE;
        fr_status_t st = fr_bcast(bbuf, n, FR_UINT8, root, c);
        if (TU_CHECK(st == FR_SUCCESS, "fr_bcast returned %s: %s", tu_status(st), fr_last_error())) {
            size_t bad = 0, first = 0;
            for (size_t i = 0; i < n; i++)
                if (bbuf[i] != bc_val(i, root, iter) && bad++ == 0) first = i;
            TU_CHECK(bad == 0, "%zu of %zu bytes wrong, first at %zu", bad, n, first);
        }
    }
    return ran;
}

/* create, run, destroy; returns 1 if the forced algorithm ran */
static int one_comm(const fr_alg_t *alg, int node_size, int iter)
{
    char spec[96], what[160];
    fr_config_t cfg = FR_CONFIG_INIT;
    cfg.node_size = node_size;
    if (alg) {
        snprintf(spec, sizeof spec, "%s=%s", fr_coll_name(alg->coll), alg->name);
        cfg.algo = spec;
    }
    snprintf(what, sizeof what, "iter %d %s node_size=%d", iter, alg ? spec : "default", node_size);
    tu_begin("%s: fr_comm_create", what);
    fr_comm_t c = NULL;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, &cfg, &c);
    /* a creation that failed on some rank leaves nothing usable: every rank skips */
    if (!tu_all(TU_CHECK(st == FR_SUCCESS && c, "fr_comm_create returned %s: %s", tu_status(st), fr_last_error()))) {
        if (c) fr_comm_destroy(c);
        return 0;
    }
    int ran = run_calls(c, alg, iter, what);
    tu_begin("%s: fr_comm_destroy", what);
    st = fr_comm_destroy(c);
    TU_CHECK(st == FR_SUCCESS, "fr_comm_destroy returned %s: %s", tu_status(st), fr_last_error());
    return ran;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("comm_loop");
    np = tu.size;
    me = tu.rank;
    int loops = argc > 1 ? atoi(argv[1]) : 2;
    if (argc > 2 || loops < 1) {
        if (me == 0) fprintf(stderr, "usage: comm_loop [K]  (K >= 1 loops, default 2)\n");
        MPI_Finalize();
        return 2;
    }
    size_t maxn = ar_counts[N_AR_COUNTS - 1];
    ibuf = malloc(maxn * sizeof *ibuf);
    iout = malloc(maxn * sizeof *iout);
    fbuf = malloc(maxn * sizeof *fbuf);
    bbuf = malloc(bc_bytes[N_BC_BYTES - 1]);
    if (!ibuf || !iout || !fbuf || !bbuf) MPI_Abort(MPI_COMM_WORLD, 2);

    int *ran = calloc((size_t)fr_nalgs, sizeof *ran);
    int nhost = 0;
    if (!ran) MPI_Abort(MPI_COMM_WORLD, 2);
    double t0 = MPI_Wtime();
    for (int iter = 0; iter < loops; iter++) {
        for (int a = 0; a < fr_nalgs; a++) {
            const fr_alg_t *alg = fr_algs[a];
            if (!(alg->mem_types & FR_MEM_HOST)) continue;  /* device-buffer algorithms */
            if (iter == 0) nhost++;
            for (int ns = 0; ns <= 1; ns++) ran[a] |= one_comm(alg, ns, iter);
        }
        one_comm(NULL, 0, iter);
    }
    /* np == 1: every algorithm short-cuts, so only ask that they were chosen at np >= 2 */
    for (int a = 0; a < fr_nalgs && np >= 2; a++) {
        if (!(fr_algs[a]->mem_types & FR_MEM_HOST)) continue;
        tu_begin("%s %s was chosen when forced", fr_coll_name(fr_algs[a]->coll), fr_algs[a]->name);
        TU_CHECK(ran[a], "forced %s=%s never chosen, on one node or on two", fr_coll_name(fr_algs[a]->coll),
                 fr_algs[a]->name);
    }
    if (me == 0)
        printf("comm_loop np=%d: %d loops over %d host algorithms x 2 node shapes + the default, %.1f s\n", np,
               loops, nhost, MPI_Wtime() - t0);
    free(ran);
    free(ibuf);
    free(iout);
    free(fbuf);
    free(bbuf);
    int rc = tu_finish();
    MPI_Finalize();
    return rc;
}

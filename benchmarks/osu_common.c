/* Shared driver of the osu-style benchmarks: the blocking programs' timing,
 * output and --compare, and the set-up, validation and helpers the
 * non-blocking driver (osu_nb.c) shares; see osu_common.h and
 * docs/benchmarks.md. */
#include "config.h"
#include "osu_common.h"
#include "bench_device.h"
#include "internal.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIB ((size_t)1024)
#define MIB (KIB * KIB)
#define MAX_COMPARE 16

/* ---------------------------------------------------------------- timing */

int osu_default_iters(const osu_opts_t *o, size_t bytes)
{
    if (o->iters > 0) return o->iters;
    if (bytes < 64 * KIB) return 1000;
    if (bytes < 8 * MIB) return 100;
    double n = 100.0 * (double)(8 * MIB) / (double)bytes;
    return n < 10 ? 10 : (int)n;
}

int osu_default_warmup(const osu_opts_t *o, size_t bytes)
{
    if (o->warmup >= 0) return o->warmup;
    if (bytes < 64 * KIB) return 100;
    if (bytes < 8 * MIB) return 10;
    double n = 10.0 * (double)(8 * MIB) / (double)bytes;
    return n < 2 ? 2 : (int)n;
}

int osu_blocks(const osu_opts_t *o, size_t bytes)
{
    int iters = osu_default_iters(o, bytes);
    return o->blocks < iters ? o->blocks : iters;
}

void osu_blocks_text(const osu_opts_t *o, size_t esize, char *buf, size_t len)
{
    int lo = INT_MAX, hi = 0;
    for (size_t size = osu_first_size(o); size; size = osu_next_size(o, size)) {
        if (size < esize) continue;
        int nb = osu_blocks(o, size / esize * esize);
        lo = nb < lo ? nb : lo;
        hi = nb > hi ? nb : hi;
    }
    if (lo >= hi) snprintf(buf, len, "%d block%s", hi, hi == 1 ? "" : "s");
    else snprintf(buf, len, "%d to %d blocks, by size", lo, hi);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double osu_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void osu_die(const char *what, const char *detail)
{
    fprintf(stderr, "%s: rank %d: %s failed: %s\n", osu_prog, osu_rank, what, detail);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

void osu_check_fr(fr_status_t st, const char *what)
{
    char msg[512];
    if (st == FR_SUCCESS) return;
    snprintf(msg, sizeof msg, "%s (%s)", fr_strerror(st), fr_last_error());
    osu_die(what, msg);
}

void osu_check_mpi(int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (rc == MPI_SUCCESS) return;
    MPI_Error_string(rc, msg, &len);
    osu_die(what, msg);
}

static void run_one(const osu_coll_t *coll, osu_ctx_t *c, int use_mpi)
{
    int ar = coll->kind == OSU_ALLREDUCE;
    if (use_mpi) osu_check_mpi(coll->run_mpi(c), ar ? "MPI_Allreduce" : "MPI_Bcast");
    else osu_check_fr(coll->run_fr(c), ar ? "fr_allreduce" : "fr_bcast");
}

/* --rewrite: the input of call @p j written anew (by the root of a bcast,
 * every rank of an allreduce: small values, finite in every type's sums),
 * then a barrier, so that the timed call starts with it done everywhere. */
static void rewrite(const osu_coll_t *coll, osu_ctx_t *c, int use_mpi, int j)
{
    if (coll->kind == OSU_ALLREDUCE || c->rank == c->o->root)
        memset(use_mpi ? c->ms : c->sbuf, 1 + j % 63, c->count * c->esize);
    MPI_Barrier(c->mpi_comm);
}

/* This rank's average time of one call over a block of n calls, in us.
 * By default the calls run back to back and are timed together: a rank
 * starts a call as soon as its part of the one before is done, so a bcast
 * root may run ahead while the receivers still copy (a throughput). With
 * --barrier each call is timed alone and an MPI_Barrier follows it outside
 * the timer, as OSU's osu_bcast and osu_allreduce do: every call starts
 * with every rank done with the one before (a latency). */
static double time_block(const osu_coll_t *coll, osu_ctx_t *c, int use_mpi, int n)
{
    /* one untimed call first: blocks of different kinds (ours and MPI's, or
     * --compare's columns) take turns, and the first call after another
     * kind's block finds the caches holding that one's segments and buffers */
    run_one(coll, c, use_mpi);
    MPI_Barrier(c->mpi_comm);
    if (c->o->barrier) {
        double sum = 0;
        for (int j = 0; j < n; j++) {
            if (c->o->rewrite) rewrite(coll, c, use_mpi, j);
            double t0 = MPI_Wtime();
            run_one(coll, c, use_mpi);
            sum += MPI_Wtime() - t0;
            MPI_Barrier(c->mpi_comm);
        }
        return sum * 1e6 / n;
    }
    double t0 = MPI_Wtime();
    for (int j = 0; j < n; j++) run_one(coll, c, use_mpi);
    return (MPI_Wtime() - t0) * 1e6 / n;
}

typedef struct {
    double ours, mpi;   /* median over blocks of the max over ranks, us */
    double min, max;    /* over ranks and blocks of the per-rank block average, us */
    int    iters;       /* timed calls of ours per rank */
} osu_result_t;

static void time_size(const osu_coll_t *coll, osu_ctx_t *c, osu_result_t *r)
{
    const osu_opts_t *o = c->o;
    size_t bytes = c->count * c->esize;
    int iters = osu_default_iters(o, bytes), warm = osu_default_warmup(o, bytes);
    int nb = osu_blocks(o, bytes);
    int per = (iters + nb - 1) / nb;
    double loc[2 * OSU_MAX_BLOCKS], vmax[2 * OSU_MAX_BLOCKS], vmin[2 * OSU_MAX_BLOCKS];

    for (int j = 0; j < warm; j++) {
        run_one(coll, c, 0);
        if (o->vs_mpi) run_one(coll, c, 1);
    }
    for (int b = 0; b < nb; b++) {
        if (!o->vs_mpi) {
            loc[b] = time_block(coll, c, 0, per);
        } else if (b % 2 == 0) {     /* alternate which goes first */
            loc[b] = time_block(coll, c, 0, per);
            loc[nb + b] = time_block(coll, c, 1, per);
        } else {
            loc[nb + b] = time_block(coll, c, 1, per);
            loc[b] = time_block(coll, c, 0, per);
        }
    }
    int nv = o->vs_mpi ? 2 * nb : nb;
    MPI_Reduce(loc, vmax, nv, MPI_DOUBLE, MPI_MAX, 0, c->mpi_comm);
    MPI_Reduce(loc, vmin, nv, MPI_DOUBLE, MPI_MIN, 0, c->mpi_comm);
    memset(r, 0, sizeof *r);
    r->iters = nb * per;
    if (c->rank != 0) return;
    r->min = vmin[0];
    r->max = vmax[0];
    for (int b = 1; b < nb; b++) {
        if (vmin[b] < r->min) r->min = vmin[b];
        if (vmax[b] > r->max) r->max = vmax[b];
    }
    r->ours = osu_median(vmax, nb);
    if (o->vs_mpi) r->mpi = osu_median(vmax + nb, nb);
}

/* memcpy bandwidth in bytes/s: median of 9 timings, each of enough copies of
 * @p bytes between two private buffers to last a while. Rank 0 only. */
static double memcpy_bandwidth(size_t bytes)
{
    void *(*volatile copy)(void *, const void *, size_t) = memcpy;  /* keep every copy */
    char *a = malloc(bytes), *b = malloc(bytes);
    double t[9];
    if (!a || !b) { free(a); free(b); return 0; }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    size_t reps = (16 * MIB) / bytes;
    if (reps < 1) reps = 1;
    if (reps > 65536) reps = 65536;
    copy(b, a, bytes);                                  /* warm */
    for (int s = 0; s < 9; s++) {
        double t0 = MPI_Wtime();
        for (size_t k = 0; k < reps; k++) copy(s % 2 ? a : b, s % 2 ? b : a, bytes);
        t[s] = (MPI_Wtime() - t0) / (double)reps;
    }
    free(a);
    free(b);
    double med = osu_median(t, 9);
    return med > 0 ? (double)bytes / med : 0;
}

/* ---------------------------------------------------------------- output */

void osu_mpi_version(char *buf, size_t len)
{
    char ver[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    MPI_Get_library_version(ver, &n);
    ver[strcspn(ver, "\n,")] = '\0';
    for (char *p = ver; *p; p++) if (*p == '\t') *p = ' ';
    snprintf(buf, len, "%s", ver);
}

void osu_print_threads(fr_comm_t comm, int requested, int provided)
{
    char ver[MPI_MAX_LIBRARY_VERSION_STRING], progress[32];
    osu_mpi_version(ver, sizeof ver);
    fr_setting_text(fr_comm_settings(comm), FR_S_PROGRESS, progress, sizeof progress);
    printf("# MPI: %s; thread level %s asked, %s provided\n", ver, osu_thread_level_name(requested),
           osu_thread_level_name(provided));
    printf("# FASTREDUCE_PROGRESS=%s%s\n", progress,
           provided < MPI_THREAD_MULTIPLE && !strcmp(progress, "thread")
               ? " (below MPI_THREAD_MULTIPLE the thread makes no MPI call: a request that needs MPI"
                 " waits for the caller)" : "");
}

void osu_print_intro(const osu_ctx_t *c, const osu_coll_t *coll, const char *name)
{
    const osu_opts_t *o = c->o;
    printf("# OSU MPI-style fastreduce %s\n", name);
    printf("# Datatype: %s.\n", o->type_label);
    printf("# libfastreduce %s, %d ranks, fastreduce type %s", fr_version(), c->nranks,
           fr_dtype_name(o->dtype));
    if (coll->kind == OSU_ALLREDUCE) printf(", op %s", fr_op_name(o->op));
    else printf(", root %d", o->root);
    printf(", algorithm %s\n", o->algo ? o->algo : "from the tuning table");
}

/* The header's line on how a rank's time per call is taken (time_block). */
static void print_method(const osu_opts_t *o)
{
    if (o->barrier)
        printf("# Timing: each call timed alone, a barrier after it (OSU's method)%s; a rank's time per\n"
               "#   call is the mean of its calls' times in the block\n",
               o->rewrite ? ", its input written anew before it" : "");
    else
        printf("# Timing: calls back to back; a rank's time per call is the block's time / calls (for bcast\n"
               "#   a throughput: the root may run ahead; --barrier times as OSU)\n");
}

static void print_header(const osu_coll_t *coll, const osu_ctx_t *c, double mbw, size_t mbytes)
{
    const osu_opts_t *o = c->o;
    char name[64], nblocks[128];
    snprintf(name, sizeof name, "%s Latency Test", coll->title);
    osu_print_intro(c, coll, name);
    osu_blocks_text(o, c->esize, nblocks, sizeof nblocks);
    printf("# Avg Latency: median of %s; a block's latency is the max over ranks of\n"
           "#   each rank's average time per call in the block (Min/Max: extremes of those\n"
           "#   per-rank block averages)\n", nblocks);
    print_method(o);
    if (o->vs_mpi) {
        char ver[MPI_MAX_LIBRARY_VERSION_STRING];
        osu_mpi_version(ver, sizeof ver);
        printf("# --vs-mpi: blocks of fastreduce and MPI_%s alternate; Speedup = MPI(us) / fastreduce(us)"
               " (>1: fastreduce is faster)\n# MPI: %s%s\n", coll->title, ver,
               coll->kind == OSU_ALLREDUCE && o->op == FR_AVG ? " (MPI_SUM: MPI has no average)" : "");
    }
    static const char *const mem_name[] = {"posix_memalign (private)", "fr_mem_alloc (shared by the node's ranks)",
                                           "MPI_Alloc_mem"};
    printf("# buffers: %s%s\n", o->device ? "device" : mem_name[o->mem],
           o->vs_mpi && o->mem == OSU_MEM_FR ? "; MPI's: MPI_Alloc_mem" : "");
    printf("# busbw: %s; %%memcpy = busbw / memcpy bandwidth\n",
           coll->kind == OSU_ALLREDUCE ? "algbw * 2(n-1)/n" : "algbw (size / latency)");
    printf("# memcpy bandwidth: %.2f GB/s (median of 9 timings of memcpy of %zu bytes, rank 0)\n",
           mbw / 1e9, mbytes);

    printf("%-*s", OSU_SIZE_W, "# Size");
    if (o->vs_mpi)
        printf("%*s%*s%*s", OSU_FIELD_W, "fastreduce(us)", OSU_FIELD_W, "MPI(us)", 10, "Speedup");
    else
        printf("%*s", OSU_FIELD_W, "Avg Latency(us)");
    if (o->full)
        printf("%*s%*s%*s", OSU_FIELD_W, "Min Latency(us)", OSU_FIELD_W, "Max Latency(us)", 12, "Iterations");
    printf("%*s%*s", 14, "busbw(GB/s)", 10, "%memcpy");
    if (o->validate) printf("%*s", 12, "Validation");
    printf("  %s\n", "Algorithm");
    fflush(stdout);
}

static void print_row(const osu_coll_t *coll, const osu_ctx_t *c, size_t size, const osu_result_t *r,
                      double mbw, int valid, const char *alg)
{
    const osu_opts_t *o = c->o;
    double bytes = (double)(c->count * c->esize);
    double busbw = r->ours > 0 ? bytes / (r->ours * 1e3) * coll->busbw_factor(c->nranks) : 0;
    printf("%-*zu", OSU_SIZE_W, size);
    if (o->vs_mpi)
        printf("%*.*f%*.*f%*.*f", OSU_FIELD_W, OSU_PREC, r->ours, OSU_FIELD_W, OSU_PREC, r->mpi,
               10, OSU_PREC, r->ours > 0 ? r->mpi / r->ours : 0.0);
    else
        printf("%*.*f", OSU_FIELD_W, OSU_PREC, r->ours);
    if (o->full)
        printf("%*.*f%*.*f%*d", OSU_FIELD_W, OSU_PREC, r->min, OSU_FIELD_W, OSU_PREC, r->max, 12, r->iters);
    printf("%*.*f%*.1f", 14, OSU_PREC, busbw, 10, mbw > 0 ? busbw * 1e9 / mbw * 100 : 0.0);
    if (o->validate) printf("%*s", 12, valid ? "Pass" : "Fail");
    printf("  %s\n", alg ? alg : "?");
    fflush(stdout);
}

/* ------------------------------------------------------------------ main */

fr_status_t osu_call_blocking(const osu_coll_t *coll, osu_ctx_t *c)
{
    return coll->run_fr(c);
}

int osu_validate_size(const osu_coll_t *coll, osu_ctx_t *c, size_t size,
                      fr_status_t (*call)(const osu_coll_t *, osu_ctx_t *))
{
    unsigned long long wrong = 0, total = 0;
    int failed_call = 0, any_failed = 0;
    for (int seed = 1; seed <= 2; seed++) {
        coll->fill(c, seed);
        osu_upload(c);
        if (call(coll, c) != FR_SUCCESS) {
            failed_call = 1;
            continue;
        }
        osu_download(c);
        wrong += coll->check(c, seed);
    }
    MPI_Allreduce(&wrong, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, c->mpi_comm);
    MPI_Allreduce(&failed_call, &any_failed, 1, MPI_INT, MPI_MAX, c->mpi_comm);
    if ((total || any_failed) && c->rank == 0)
        fprintf(stderr, "%s: validation failed at %zu bytes: %llu wrong elements%s\n", osu_prog, size,
                total, any_failed ? ", and a call returned an error" : "");
    return !total && !any_failed;
}

/* --compare: each entry (an algorithm forced, or the table's choice for
 * "table") timed block by block in turn at each size, on one communicator
 * whose selection table is switched from column to column, as the tuner
 * does: with a communicator per column, the columns' shared segments
 * evict each other from the cache between blocks, which costs most the
 * variants with the largest footprint (docs/performance.md, "Design
 * decisions"). That communicator is osu_setup's (c->comm), its own table
 * put back at the end; osu_teardown destroys it. A forced column's table
 * is FASTREDUCE_ALGO's rule followed by the communicator's own, as for
 * fr_comm_create with config->algo. */
static int run_compare(const osu_coll_t *coll, osu_ctx_t *c)
{
    const osu_opts_t *o = c->o;
    char list[1024], *names[MAX_COMPARE], *save = NULL;
    fr_table_t tabs[MAX_COMPARE];
    int n = 0, table = -1, declined[MAX_COMPARE];
    const char *forced[MAX_COMPARE];   /* the algorithm a column forces for this collective, or NULL */
    const int fc = coll->kind == OSU_ALLREDUCE ? FR_COLL_ALLREDUCE : FR_COLL_BCAST;
    const fr_comm_t comm = c->comm;
    const fr_table_t own = *fr_comm_table(comm);
    snprintf(list, sizeof list, "%s", o->compare);
    for (char *w = strtok_r(list, ",", &save); w && n < MAX_COMPARE; w = strtok_r(NULL, ",", &save)) {
        fr_table_t *tk = &tabs[n];
        int nbad = 0;
        memset(tk, 0, sizeof *tk);
        forced[n] = NULL;
        if (!strcmp(w, "table")) {
            if (table >= 0) osu_die("--compare", "'table' is given twice");
            table = n;
            *tk = own;
        } else if (fr_table_parse_algo(tk, w, NULL, NULL, &nbad) != FR_SUCCESS || nbad) {
            osu_die("--compare", "not an algorithm name (fastreduce-info lists them)");
        } else {
            for (int i = 0; i < tk->n && !forced[n]; i++)
                if (tk->rules[i].coll == fc) forced[n] = fr_algs[tk->rules[i].alg]->name;
            if (fr_table_append(tk, &own) != FR_SUCCESS) osu_die("--compare", fr_last_error());
        }
        names[n++] = w;
    }
    if (osu_rank == 0) {
        char nblocks[128];
        osu_blocks_text(o, c->esize, nblocks, sizeof nblocks);
        printf("# OSU MPI-style fastreduce %s Latency Test, --compare\n", coll->title);
        printf("# Datatype: %s.\n", o->type_label);
        printf("# libfastreduce %s, %d ranks, fastreduce type %s; each column: median over %s of the\n"
               "#   max over ranks of a rank's average time per call, blocks of the columns in turn\n",
               fr_version(), c->nranks, fr_dtype_name(o->dtype), nblocks);
        print_method(o);
        if (table >= 0)
            printf("# table/best: the table's choice over the fastest forced column (1.00: as fast), the median\n"
                   "#   over blocks of the ratio of their two blocks\n");
        printf("%-*s", OSU_SIZE_W, "# Size");
        for (int k = 0; k < n; k++) {
            char h[64];
            snprintf(h, sizeof h, "%s(us)", names[k]);
            printf(" %*s", (int)(strlen(h) > 14 ? strlen(h) : 14), h);
        }
        printf("  %-20s", "best-forced");
        if (table >= 0) printf(" %10s  %s", "table/best", "Algorithm");
        printf("\n");
        fflush(stdout);
    }
    double *loc = malloc(sizeof(double) * MAX_COMPARE * OSU_MAX_BLOCKS);
    double *vmax = malloc(sizeof(double) * MAX_COMPARE * OSU_MAX_BLOCKS);
    if (!loc || !vmax) osu_die("malloc", "out of memory");
    for (size_t size = o->min_size; size <= o->max_size; size *= 2) {
        c->count = size / c->esize;
        if (c->count > 0) {
            size_t bytes = c->count * c->esize;
            int iters = osu_default_iters(o, bytes), warm = osu_default_warmup(o, bytes);
            int nb = osu_blocks(o, bytes), per = (iters + nb - 1) / nb;
            for (int k = 0; k < n; k++) {
                fr_select_use(comm, tabs[k]);
                for (int j = 0; j < warm; j++) run_one(coll, c, 0);
                /* a forced algorithm that declines this call leaves its column to the next rule
                 * (asked after the warm-up: a device algorithm answers once its set-up is done) */
                const char *served = coll->algorithm(c, NULL, 0);
                declined[k] = k != table && served && (!forced[k] || strcmp(served, forced[k]));
                if (osu_rank == 0 && declined[k])
                    printf("# %zu bytes: %s declines this call; its column is %s's (not a best-forced)\n", size,
                           names[k], served);
            }
            for (int b = 0; b < nb; b++)
                for (int i = 0; i < n; i++) {
                    /* a different one goes first each even block, and each odd block is the
                     * one before it reversed, so no column always follows the same one */
                    int k = b % 2 ? (b + n - 2 - i) % n : (b + i) % n;
                    fr_select_use(comm, tabs[k]);
                    loc[k * nb + b] = time_block(coll, c, 0, per);
                }
            MPI_Reduce(loc, vmax, n * nb, MPI_DOUBLE, MPI_MAX, 0, c->mpi_comm);
            const char *alg = NULL;
            char label[128];
            if (table >= 0) {
                fr_select_use(comm, tabs[table]);
                alg = coll->algorithm(c, label, sizeof label);
            }
            if (osu_rank == 0) {
                double med[MAX_COMPARE];
                int best = -1;
                printf("%-*zu", OSU_SIZE_W, size);
                for (int k = 0; k < n; k++) {
                    char h[64];
                    double v[OSU_MAX_BLOCKS];   /* osu_median() sorts: the blocks stay in order for table/best */
                    memcpy(v, vmax + k * nb, sizeof v[0] * (size_t)nb);
                    med[k] = osu_median(v, nb);
                    snprintf(h, sizeof h, "%s(us)", names[k]);
                    printf(" %*.*f", (int)(strlen(h) > 14 ? strlen(h) : 14), OSU_PREC, med[k]);
                    if (k != table && !declined[k] && (best < 0 || med[k] < med[best])) best = k;
                }
                printf("  %-20s", best >= 0 ? names[best] : "-");
                /* table/best: the median over blocks of the ratio within a block, where the two
                 * columns ran one after the other, so a change of the machine's speed between
                 * blocks does not enter it */
                double ratio[OSU_MAX_BLOCKS];
                for (int b = 0; table >= 0 && best >= 0 && b < nb; b++)
                    ratio[b] = vmax[table * nb + b] / vmax[best * nb + b];
                if (table >= 0) printf(" %10.3f  %s", best >= 0 ? osu_median(ratio, nb) : 0.0, alg ? alg : "?");
                printf("\n");
                fflush(stdout);
            }
        }
        if (size > SIZE_MAX / 2) break;
    }
    free(loc);
    free(vmax);
    fr_select_use(comm, own);
    for (int k = 0; k < n; k++)
        if (k != table) fr_table_free(&tabs[k]);
    return 0;
}

/* -d cuda: this rank's GPU (its local rank modulo the GPUs it sees) and
 * device copies of the host buffers. */
static void device_buffers(osu_ctx_t *c, size_t bytes)
{
    char why[160];
    int dev;
    if (!bd_pick_gpu(&dev, why, sizeof why)) {
        char msg[200];
        snprintf(msg, sizeof msg, "no GPU is visible (%s)", why);
        osu_die("-d cuda", msg);
    }
    if (!(c->sbuf = bd_alloc(bytes)) || !(c->rbuf = bd_alloc(bytes)))
        osu_die("cudaMalloc", "cannot allocate the device buffers");
    osu_upload_bytes(c, bytes);
}

/* The host buffers of --mem: ours (hs, hr) and MPI's (ms, mr). */
static void host_buffers(osu_ctx_t *c, size_t bytes)
{
    const osu_mem_t mem = c->o->mem;
    int bad;
    if (mem == OSU_MEM_MALLOC) bad = posix_memalign(&c->hs, 4096, bytes) || posix_memalign(&c->hr, 4096, bytes);
    else if (mem == OSU_MEM_FR) bad = fr_mem_alloc(bytes, &c->hs) != FR_SUCCESS || fr_mem_alloc(bytes, &c->hr) != FR_SUCCESS;
    else bad = MPI_Alloc_mem((MPI_Aint)bytes, MPI_INFO_NULL, &c->hs) != MPI_SUCCESS ||
               MPI_Alloc_mem((MPI_Aint)bytes, MPI_INFO_NULL, &c->hr) != MPI_SUCCESS;
    if (bad) osu_die(mem == OSU_MEM_FR ? "fr_mem_alloc" : mem == OSU_MEM_MPI ? "MPI_Alloc_mem" : "posix_memalign",
                     "out of memory for the buffers");
    c->ms = c->hs;
    c->mr = c->hr;
    if (mem == OSU_MEM_FR && c->o->vs_mpi &&
        (MPI_Alloc_mem((MPI_Aint)bytes, MPI_INFO_NULL, &c->ms) != MPI_SUCCESS ||
         MPI_Alloc_mem((MPI_Aint)bytes, MPI_INFO_NULL, &c->mr) != MPI_SUCCESS))
        osu_die("MPI_Alloc_mem", "out of memory for MPI's buffers");
}

static void free_host_buffers(osu_ctx_t *c)
{
    if (c->ms != c->hs) { MPI_Free_mem(c->ms); MPI_Free_mem(c->mr); }
    if (c->o->mem == OSU_MEM_FR) { fr_mem_free(c->hs); fr_mem_free(c->hr); }
    else if (c->o->mem == OSU_MEM_MPI) { MPI_Free_mem(c->hs); MPI_Free_mem(c->hr); }
    else { free(c->hs); free(c->hr); }
}

int osu_memory_fits(double each, double first, const char *what)
{
    MPI_Comm node;
    int local = 0, nlocal = 1, world = 0, has_first = 0, ok = 1, all_ok = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &world);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_size(node, &nlocal);
    MPI_Allreduce(&(int){ world == 0 }, &has_first, 1, MPI_INT, MPI_MAX, node);
    if (local == 0) {
        unsigned long long kib = 0;
        char line[256];
        FILE *f = fopen("/proc/meminfo", "r");
        while (f && fgets(line, sizeof line, f) && sscanf(line, "MemAvailable: %llu kB", &kib) != 1) {}
        if (f) fclose(f);
        double need = each * nlocal + (has_first ? first : 0), avail = (double)kib * 1024, gib = 1024.0 * 1024 * 1024;
        if (kib && need > avail) {
            fprintf(stderr, "%s: the %d rank%s on this node would touch %.2f GiB (%s), more than the %.2f GiB "
                    "MemAvailable of /proc/meminfo: give smaller sizes\n", osu_prog, nlocal, nlocal == 1 ? "" : "s",
                    need / gib, what, avail / gib);
            ok = 0;
        }
    }
    MPI_Comm_free(&node);
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all_ok;
}

/* osu_memory_fits for osu_setup's buffers of @p bytes and the copy timings
 * of osu_main, which come on top of them: memcpy_bandwidth's two buffers
 * on rank 0, and for the allreduce all_copy_seconds' two on every rank. */
static int buffers_fit(const osu_coll_t *coll, int nonblocking, const osu_opts_t *o, size_t bytes)
{
    int nbuf = o->mem == OSU_MEM_FR && o->vs_mpi ? 4 : 2, ncopy = 0, nfirst = 0;
    char what[160];
    if (!nonblocking && !o->device) {
        if (coll->kind == OSU_ALLREDUCE) ncopy = 2;
        else nfirst = 2;
    }
    snprintf(what, sizeof what, "%d buffers of the largest size, %.2f GiB, a rank%s", nbuf + ncopy,
             (double)bytes / (double)(1 << 30), nfirst ? ", 2 more on rank 0" : "");
    return osu_memory_fits((double)bytes * (nbuf + ncopy), (double)bytes * nfirst, what);
}

int osu_create_comm(fr_comm_t *out, const char *algo)
{
    fr_config_t cfg = FR_CONFIG_INIT;
    cfg.algo = algo;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, &cfg, out);
    int ok = st == FR_SUCCESS, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok) fprintf(stderr, "%s: rank %d: fr_comm_create failed: %s (%s)\n", osu_prog, osu_rank,
                     fr_strerror(st), fr_last_error());
    return all_ok;
}

int osu_setup(int argc, char **argv, const osu_coll_t *coll, int nonblocking, osu_opts_t *o, osu_ctx_t *c)
{
    int requested = -1;
    int provided = osu_init_mpi(&argc, &argv, nonblocking ? MPI_THREAD_MULTIPLE : -1, &requested);
    int rc = osu_parse_options(argc, argv, coll, nonblocking, o);
    if (rc) {
        MPI_Finalize();
        return rc == 1 ? 0 : 1;
    }
    o->thread_level = requested;
    o->thread_provided = provided;
    memset(c, 0, sizeof *c);
    c->o = o;
    c->mpi_comm = MPI_COMM_WORLD;
    c->rank = osu_rank;
    MPI_Comm_size(MPI_COMM_WORLD, &c->nranks);
    c->esize = fr_dtype_size(o->dtype);
    size_t maxcount = o->max_size / c->esize;
    if (o->vs_mpi && maxcount > INT_MAX) {
        if (osu_rank == 0) fprintf(stderr, "%s: --vs-mpi: %zu elements exceed MPI's int count\n", osu_prog, maxcount);
        MPI_Finalize();
        return 1;
    }
    size_t maxbytes = maxcount * c->esize;
    /* fr_comm_destroy() is collective: ranks that did create a handle cannot
     * free it alone when another failed, so leave it to the process exit. */
    if (!buffers_fit(coll, nonblocking, o, maxbytes) || !osu_create_comm(&c->comm, o->algo)) {
        MPI_Finalize();
        return 1;
    }
    host_buffers(c, maxbytes);
    for (size_t i = 0; i < maxcount; i++) osu_set(c->hs, i, o->dtype, 1 + (double)(i % 3));
    memset(c->hr, 0, maxbytes);
    if (c->ms != c->hs) memcpy(c->ms, c->hs, maxbytes);
    c->sbuf = c->hs;
    c->rbuf = c->hr;
    if (o->device) device_buffers(c, maxbytes);
    return -1;
}

void osu_teardown(osu_ctx_t *c)
{
    /* checked: a communicator destroyed twice (FR_ERR_BAD_COMM), or one
     * that would not go, is a bug of the driver that would otherwise pass
     * unseen */
    osu_check_fr(fr_comm_destroy(c->comm), "fr_comm_destroy");
    if (c->o->device) { bd_free(c->sbuf); bd_free(c->rbuf); }
    free_host_buffers(c);
    MPI_Finalize();
}

size_t osu_first_size(const osu_opts_t *o)
{
    return o->min_size;
}

size_t osu_next_size(const osu_opts_t *o, size_t size)
{
    return size > SIZE_MAX / 2 || size * 2 > o->max_size ? 0 : size * 2;
}

/* The largest size's latency against one copy of its bytes: a broadcast
 * between two ranks of a node cannot beat one copy into the other's buffer,
 * so at 2 ranks the line calls it the limit; at other counts it is only a
 * yardstick (the root feeds several receivers, or there is none). */
static void print_bcast_limit(const osu_result_t *last, size_t last_bytes, double mbw, int nranks)
{
    double copy_us = (double)last_bytes / mbw * 1e6;
    printf("# Largest size %zu B: latency %.2f us = %.2f x one memcpy of the message "
           "(%.2f us at %.2f GB/s)%s\n",
           last_bytes, last->ours, last->ours / copy_us, copy_us, mbw / 1e9,
           nranks == 2 ? ", the limit for 2 ranks" : "");
}

/* Seconds for every rank to memcpy @p bytes between two private buffers
 * at once: the memory traffic an allreduce cannot avoid (each input read
 * once, each output written once). Median of 9, each the slowest rank's;
 * collective, the answer on rank 0. */
static double all_copy_seconds(size_t bytes)
{
    void *(*volatile copy)(void *, const void *, size_t) = memcpy;  /* keep every copy */
    char *a = malloc(bytes), *b = malloc(bytes);
    double t[9];
    int ok = a && b, all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) { free(a); free(b); return 0; }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    copy(b, a, bytes);
    for (int s = 0; s < 9; s++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        copy(s % 2 ? a : b, s % 2 ? b : a, bytes);
        double dt = MPI_Wtime() - t0, mx;
        MPI_Reduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        t[s] = mx;
    }
    free(a);
    free(b);
    return osu_median(t, 9);
}

int osu_main(int argc, char **argv, const osu_coll_t *coll)
{
    osu_opts_t o;
    osu_ctx_t c;
    int status = osu_setup(argc, argv, coll, 0, &o, &c);
    if (status >= 0) return status;
    status = 0;

    double mbw = 0;
    size_t maxbytes = o.max_size / c.esize * c.esize;
    MPI_Barrier(MPI_COMM_WORLD);
    if (osu_rank == 0 && !o.device) mbw = memcpy_bandwidth(maxbytes);
    MPI_Barrier(MPI_COMM_WORLD);
    if (o.compare) {
        status = run_compare(coll, &c);
        osu_teardown(&c);
        return status;
    }
    if (osu_rank == 0) print_header(coll, &c, mbw, maxbytes);

    osu_result_t last = { 0 };
    size_t last_bytes = 0;
    for (size_t size = osu_first_size(&o); size; size = osu_next_size(&o, size)) {
        c.count = size / c.esize;
        if (c.count == 0) continue;
        osu_result_t r;
        char label[96];
        const char *alg = coll->algorithm(&c, NULL, 0);
        time_size(coll, &c, &r);
        /* (the last call of the size says whether it went zero-copy) */
        if (alg && fr_last_zero_copy()) {
            snprintf(label, sizeof label, "%s zero-copy", alg);
            alg = label;
        }
        int valid = !o.validate || osu_validate_size(coll, &c, size, osu_call_blocking);
        if (!valid) status = 1;
        if (osu_rank == 0) print_row(coll, &c, size, &r, mbw, valid, alg);
        last = r;
        last_bytes = c.count * c.esize;
    }
    if (osu_rank == 0 && coll->kind == OSU_BCAST && last_bytes && mbw > 0 && last.ours > 0)
        print_bcast_limit(&last, last_bytes, mbw, c.nranks);
    if (coll->kind == OSU_ALLREDUCE && last_bytes && !o.device) {
        double bound = all_copy_seconds(last_bytes);
        if (osu_rank == 0 && bound > 0)
            printf("# Largest size %zu B: latency %.2f us = %.2f x the memory-traffic bound (every rank copying the "
                   "message at once: %.2f us)\n", last_bytes, last.ours, last.ours / (bound * 1e6), bound * 1e6);
    }
    fflush(stdout);
    osu_teardown(&c);
    return status;
}

/* fastreduce-tune: the autotuner. Under mpirun on the cluster to be tuned
 * it measures every algorithm (and parameter variant) that can serve the
 * job's shape at message sizes from 4 B to --max, within --budget seconds,
 * and writes the tuning table of the fastest per size (docs/tuning.md)
 * and a CSV of every measurement. --check TABLE re-measures a sample of
 * sizes and reports the ranges whose choice is no longer the fastest.
 * This file sets the job up and runs a pass per memory type; the parts are
 * named in tuner.h, and the decisions are in tune_choose.c. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <mpi.h>
#include "config.h"
#include "tuner.h"
#include "bench_device.h"

/* The communicator, and where cuda is tuned the GPU (set before the
 * communicator, which binds) and NCCL. Sets *mems to the memory types to
 * tune and @p why to the reason device buffers are not. Returns the exit
 * status when the job cannot go on (the communicator closed), else 0. */
static int open_comm(tuner_t *T, unsigned *mems, char *why, size_t wlen)
{
    int dev = -1;
    /* (--check measures host rules unless --memory names cuda) */
    int gpus = (!T->o.check && !T->o.mems) || (T->o.mems & FR_MEM_CUDA) ? bd_gpus(&dev, why, wlen) : 0;
    if ((T->o.mems & FR_MEM_CUDA) && !gpus) {
        if (T->rank == 0) fprintf(stderr, PROG ": --memory cuda: %s\n", why);
        return 2;
    }
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &T->comm);
    if (st != FR_SUCCESS) {
        if (T->rank == 0) fprintf(stderr, PROG ": fr_comm_create: %s: %s\n", fr_strerror(st), fr_last_error());
        return 1;
    }
    /* NCCL now, so that a job NCCL cannot serve (two ranks on one GPU) is
     * not measured as NCCL: its device calls would all be staged */
    if (gpus && (fr_device_setup(T->comm, dev) != FR_SUCCESS || !fr_comm_facts(T->comm).nccl_ready)) {
        gpus = 0;
        snprintf(why, wlen, "NCCL could not be set up on every rank (see the warning above)");
        if (T->o.mems & FR_MEM_CUDA) {
            if (T->rank == 0) fprintf(stderr, PROG ": --memory cuda: %s\n", why);
            fr_comm_destroy(T->comm);
            return 2;
        }
    }
    *mems = T->o.mems ? T->o.mems : FR_MEM_HOST | (gpus ? FR_MEM_CUDA : 0);
    T->F = fr_comm_facts(T->comm);
    T->own = *fr_comm_table(T->comm);
    return 0;
}

/* Rank 0's first lines: the job, the sizes and the budget. */
static void print_header(const tuner_t *T, const uint64_t *sizes, int nsizes, unsigned mems, const char *why)
{
    if (T->rank != 0) return;
    printf("# " PROG " (libfastreduce %s): %d ranks on %d node(s) of up to %d, fingerprint %s\n", fr_version(),
           T->size, T->F.nnodes, T->F.ppn, T->F.fingerprint);
    printf("# %d sizes from %llu to %llu bytes, budget %.0f s, %d repetitions per point\n", nsizes,
           (unsigned long long)sizes[0], (unsigned long long)sizes[nsizes - 1], T->o.budget, T->o.reps);
    if (!(mems & FR_MEM_CUDA) && !T->o.check) printf("# device buffers: not measured (%s)\n", why);
    fflush(stdout);
}

/* Tuning the memory type T->mem with its share of the time left (an equal
 * share of each of the @p passes_left passes): its sweep 60% of it, the
 * second look 25%, the confirmation of lone wins the rest (the last pass
 * ends at 98% of the budget: 2% for writing, closing, the launcher). */
static void tune_pass(tuner_t *T, int passes_left)
{
    double start = now(), share = (T->t0 + T->o.budget - start) / passes_left;
    T->deadline = start + 0.6 * share;
    tn_sweep(T, NULL);
    T->deadline = start + 0.85 * share;
    tn_second_look(T);
    T->deadline = passes_left == 1 ? T->t0 + 0.98 * T->o.budget : start + share;
    tn_confirm(T);
}

/* One pass per memory type of @p mems, host first, each tuning or (with
 * --check) checking; its grid is kept in T->gs. Returns the exit status so
 * far; sets *stale when --check found a stale range (the next memory type
 * is still checked). */
static int run_passes(tuner_t *T, const uint64_t *sizes, int nsizes, unsigned mems, int *stale)
{
    const fr_mem_t order[2] = { FR_MEM_HOST, FR_MEM_CUDA };
    int npass = ((mems & FR_MEM_HOST) != 0) + ((mems & FR_MEM_CUDA) != 0), rc = 0;
    for (int m = 0, pass = 0; m < 2 && rc == 0; m++) {
        if (!(mems & order[m])) continue;
        T->mem = order[m];
        if (tc_grid_init(&T->g, MAX_CANDS, nsizes)) {
            if (T->rank == 0) fprintf(stderr, PROG ": out of memory\n");
            return 1;
        }
        memcpy(T->g.sizes, sizes, (size_t)nsizes * sizeof *sizes);
        T->g.ncand = 0;
        tn_make_cands(T);
        tn_print_cands(T);
        if (!T->g.ncand) {
            if (T->rank == 0) fprintf(stderr, PROG ": no algorithm left to measure (see --algos and --coll)\n");
            rc = 1;
        } else if (T->o.check) {
            rc = tn_check_table(T, (T->t0 + T->o.budget - now()) / (npass - pass));
            if (rc == 3) *stale = 1, rc = 0;
        } else {
            tune_pass(T, npass - pass);
        }
        T->gs[T->ng] = T->g;
        T->gmem[T->ng++] = T->mem;
        memset(&T->g, 0, sizeof T->g);
        pass++;
    }
    return rc;
}

/* After the passes: --check writes the CSV only (on rank 0, when --csv
 * names one) and exits 3 on a stale range; a run that tuned writes the
 * table and the CSV on rank 0, whose status every rank returns. */
static int finish(tuner_t *T, int rc, int stale, int argc, char **argv)
{
    if (T->o.check) {
        if (T->rank == 0 && T->o.csv) rc |= tn_write_outputs(T, NULL, NULL, T->o.csv);
        return !rc && stale ? 3 : rc;
    }
    if (rc) return rc;
    if (T->rank == 0) rc = tn_write_results(T, argc, argv);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return rc;
}

int main(int argc, char **argv)
{
    tuner_t T;
    memset(&T, 0, sizeof T);
    MPI_Init(&argc, &argv);
    T.t0 = now();
    MPI_Comm_rank(MPI_COMM_WORLD, &T.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &T.size);
    int rc = tn_parse_opts(argc, argv, &T.o, T.rank);
    if (rc) {
        MPI_Finalize();
        return rc == 1 ? 0 : rc;
    }
    MPI_Bcast(&T.t0, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    T.deadline = T.t0 + T.o.budget;
    T.pol = (tc_policy_t)TC_POLICY_DEFAULT;
    char why[256] = "";
    unsigned mems = 0;
    rc = open_comm(&T, &mems, why, sizeof why);
    if (rc) {
        MPI_Finalize();
        return rc;
    }
    uint64_t sizes[MAX_SIZES];
    int nsizes = tc_sizes(T.o.min, T.o.max, sizeof(float), sizes, MAX_SIZES);
    int ok = tn_alloc_buffers(&T, nsizes ? (size_t)sizes[nsizes - 1] : 0, mems) && nsizes, all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        if (T.rank == 0)
            fprintf(stderr, PROG ": %s\n", nsizes ? "cannot allocate the message buffers (see --max)" :
                    "no size in --min..--max");
        rc = 1;
    } else {
        int stale = 0;
        print_header(&T, sizes, nsizes, mems, why);
        rc = run_passes(&T, sizes, nsizes, mems, &stale);
        rc = finish(&T, rc, stale, argc, argv);
    }
    fr_select_use(T.comm, T.own);
    tn_free_buffers(&T);
    tc_grid_free(&T.g);
    for (int i = 0; i < T.ng; i++) tc_grid_free(&T.gs[i]);
    fr_comm_destroy(T.comm);
    MPI_Finalize();
    return rc;
}

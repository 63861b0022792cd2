/* libfastreduce-mpi.so: the PMPI interposer. Its MPI_Allreduce and
 * MPI_Bcast take the place of the MPI library's (LD_PRELOAD, or linked
 * before it): what fastreduce can serve (a predefined type and op on an
 * intra-communicator; any datatype for bcast) goes to fr_allreduce /
 * fr_bcast on a communicator cached on the MPI one (lib/mpi_api.c), with
 * the algorithm the table picks; the rest goes to PMPI_Allreduce /
 * PMPI_Bcast unchanged. A failure of a served call goes to the
 * communicator's error handler with an MPI error class, as MPI's own would.
 * FASTREDUCE_DISABLE=1 passes everything through; FASTREDUCE_STATS=1 prints
 * at MPI_Finalize (rank 0 of MPI_COMM_WORLD, through the logger) each
 * (collective, algorithm or reason for passing, ranks): calls, bytes, total
 * and mean time, busbw, and apart from them the communicators made inside
 * those calls (setups, setup_s): a call's time leaves its set-up out. The cached communicators are destroyed with their
 * MPI communicators, and the rest at MPI_Finalize, by attributes (no
 * MPI_Comm_free wrapper needed). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <mpi.h>
#include "log.h"
#include "mpi_api.h"
#include "settings.h"

enum { DISABLED = 1, STATS = 2 };
#define MAX_STATS 64

typedef struct {
    int           bcast, served, nranks;
    char          what[48];
    unsigned long calls, setups;
    double        bytes, secs, setup_secs;  /* secs: the calls' own time, without setup_secs */
} stat_t;

static stat_t stats[MAX_STATS];
static int nstats;
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static int mode = -1;

static int get_mode(void)
{
    int m = __atomic_load_n(&mode, __ATOMIC_RELAXED);
    if (m < 0) {
        fr_settings_t s = {0};
        fr_settings_load(&s, NULL, -1, fr_settings_when(FR_WHEN_INTERPOSE));
        m = (s.disable == 1 ? DISABLED : 0) | (s.stats == 1 ? STATS : 0);
        fr_settings_free(&s);
        __atomic_store_n(&mode, m, __ATOMIC_RELAXED);
    }
    return m;
}

static void record(int bcast, const fr_mpi_served_t *h, double secs, int count, MPI_Datatype type, MPI_Comm comm)
{
    int nranks = h->nranks, size = 0;
    double bytes = h->bytes;
    if (!h->served) {
        /* (MPI_DATATYPE_NULL would go to MPI_COMM_WORLD's error handler) */
        if (type == MPI_DATATYPE_NULL || PMPI_Type_size(type, &size) != MPI_SUCCESS) size = 0;
        bytes = (double)count * size;
        if (comm == MPI_COMM_NULL || PMPI_Comm_size(comm, &nranks) != MPI_SUCCESS) nranks = 0;
    }
    pthread_mutex_lock(&stats_lock);
    int i;
    for (i = 0; i < nstats; i++)
        if (stats[i].bcast == bcast && stats[i].served == h->served && stats[i].nranks == nranks &&
            !strcmp(stats[i].what, h->what ? h->what : "?"))
            break;
    if (i == nstats && nstats < MAX_STATS) {
        stats[nstats] = (stat_t){ .bcast = bcast, .served = h->served, .nranks = nranks };
        snprintf(stats[nstats].what, sizeof stats[nstats].what, "%s", h->what ? h->what : "?");
        nstats++;
    }
    if (i < nstats) {
        stats[i].calls++;
        stats[i].bytes += bytes;
        stats[i].secs += secs - h->setup;
        stats[i].setups += h->setup > 0;
        stats[i].setup_secs += h->setup;
    }
    pthread_mutex_unlock(&stats_lock);
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    int m = get_mode();
    fr_mpi_served_t h = { .served = 0, .what = "FASTREDUCE_DISABLE=1" };
    double t0 = m & STATS ? PMPI_Wtime() : 0;
    int err = m & DISABLED ? PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm)
                           : fr_mpi_allreduce(sendbuf, recvbuf, count, datatype, op, comm, &h);
    if (m & STATS) record(0, &h, PMPI_Wtime() - t0, count, datatype, comm);
    return err;
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    int m = get_mode();
    fr_mpi_served_t h = { .served = 0, .what = "FASTREDUCE_DISABLE=1" };
    double t0 = m & STATS ? PMPI_Wtime() : 0;
    int err = m & DISABLED ? PMPI_Bcast(buffer, count, datatype, root, comm)
                           : fr_mpi_bcast(buffer, count, datatype, root, comm, &h);
    if (m & STATS) record(1, &h, PMPI_Wtime() - t0, count, datatype, comm);
    return err;
}

static void print_stats(void)
{
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank != 0) return;
    /* (the logger's host and rank, also where no communicator set them) */
    fr_log_init();
    fr_log_set_rank(rank);
    unsigned long made, freed, setups = 0;
    double setup_secs = 0;
    fr_mpi_cache_counts(&made, &freed);
    for (int i = 0; i < nstats; i++) {
        setups += stats[i].setups;
        setup_secs += stats[i].setup_secs;
    }
    fr_log_report("STATS", "libfastreduce-mpi on rank 0: %d kinds of call; fastreduce communicators: %lu made, %lu "
                  "freed before MPI_Finalize", nstats, made, freed);
    fr_log_report("STATS", "communicator set-up inside the first call on each: %lu, %.4f s in all, %.2f ms mean "
                  "(not in the calls' times below)", setups, setup_secs, setups ? setup_secs / (double)setups * 1e3 : 0);
    fr_log_report("STATS", "%-9s %-6s %-38s %5s %10s %14s %10s %11s %10s %6s %9s", "call", "by",
                  "algorithm / why passed", "ranks", "calls", "bytes", "total_s", "mean_us", "busbw_GB/s", "setups",
                  "setup_s");
    for (int i = 0; i < nstats; i++) {
        const stat_t *s = &stats[i];
        double mean = s->calls ? s->secs / (double)s->calls : 0, avg_bytes = s->calls ? s->bytes / (double)s->calls : 0;
        double f = !s->bcast && s->nranks > 1 ? 2.0 * (s->nranks - 1) / s->nranks : 1.0;
        double busbw = mean > 0 ? avg_bytes / mean * f / 1e9 : 0;
        fr_log_report("STATS", "%-9s %-6s %-38s %5d %10lu %14.0f %10.4f %11.2f %10.3f %6lu %9.4f",
                      s->bcast ? "bcast" : "allreduce", s->served ? "fr" : "MPI", s->what, s->nranks, s->calls, s->bytes,
                      s->secs, mean * 1e6, busbw, s->setups, s->setup_secs);
    }
}

int MPI_Finalize(void)
{
    int fin = 0;
    if (PMPI_Finalized(&fin) == MPI_SUCCESS && !fin && (get_mode() & STATS)) print_stats();
    return PMPI_Finalize();
}

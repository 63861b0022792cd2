/* FASTREDUCE_DISABLE and FASTREDUCE_STATS of the MPI-signature calls
 * (see mpi_stats.h). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <mpi.h>
#include "log.h"
#include "metrics.h"
#include "observe.h"
#include "mpi_stats.h"
#include "settings.h"

#define MAX_STATS 64

typedef struct {
    int           kind, served, nranks;   /* kind: fr_mpi_kind_t */
    char          what[48];
    unsigned long calls, setups;
    double        bytes, secs, setup_secs;  /* secs: the calls' own time, without setup_secs */
} stat_t;

static stat_t stats[MAX_STATS];
static int nstats;
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static int mode = -1;

int fr_mpi_mode(void)
{
    int m = __atomic_load_n(&mode, __ATOMIC_RELAXED);
    if (m < 0) {
        fr_settings_t s = {0};
        fr_settings_load(&s, NULL, -1, fr_settings_when(FR_WHEN_INTERPOSE));
        m = (s.disable == 1 ? FR_MPI_DISABLED : 0) | (s.stats == 1 ? FR_MPI_STATS : 0);
        fr_settings_free(&s);
        /* (the metrics count calls passed to MPI from the first one, which
         * may come before any fastreduce communicator) */
        fr_observe_process();
        __atomic_store_n(&mode, m, __ATOMIC_RELAXED);
    }
    return m;
}

/* The summary's name of each kind of call, and whether its time is the
 * whole collective's (a non-blocking call's is its start alone). */
static const char *const kind_name[FR_MPI_KINDS] = { "allreduce", "bcast", "iallreduce", "ibcast", "alloc_mem",
                                                     "free_mem" };
static int blocking(int kind) { return kind == FR_MPI_ALLREDUCE || kind == FR_MPI_BCAST; }

void fr_mpi_call_end(fr_mpi_kind_t kind, const fr_mpi_served_t *h, int count, MPI_Datatype type, MPI_Comm comm)
{
    if (!h->served && kind < FR_MPI_ALLOC_MEM) fr_metrics_passed(kind_name[kind], h->what ? h->what : "?");
    if (!(h->mode & FR_MPI_STATS)) return;
    double secs = PMPI_Wtime() - h->t0;
    int nranks = h->nranks, size = 0;
    double bytes = h->bytes;
    if (!h->served && kind < FR_MPI_ALLOC_MEM) {
        /* (MPI_DATATYPE_NULL would go to MPI_COMM_WORLD's error handler) */
        if (type == MPI_DATATYPE_NULL || PMPI_Type_size(type, &size) != MPI_SUCCESS) size = 0;
        bytes = (double)count * size;
        if (comm == MPI_COMM_NULL || PMPI_Comm_size(comm, &nranks) != MPI_SUCCESS) nranks = 0;
    }
    char what[sizeof stats[0].what];
    snprintf(what, sizeof what, "%s%s%s%s", h->what ? h->what : "?", h->zcopy ? " zero-copy" : "",
             h->via ? " via " : "", h->via ? h->via : "");
    pthread_mutex_lock(&stats_lock);
    int i;
    for (i = 0; i < nstats; i++)
        if (stats[i].kind == (int)kind && stats[i].served == h->served && stats[i].nranks == nranks &&
            !strcmp(stats[i].what, what))
            break;
    if (i == nstats && nstats < MAX_STATS) {
        stats[nstats] = (stat_t){ .kind = (int)kind, .served = h->served, .nranks = nranks };
        snprintf(stats[nstats].what, sizeof stats[nstats].what, "%s", what);
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

void fr_mpi_stats_print(void)
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
    fr_log_report("STATS", "%-10s %-6s %-44s %5s %10s %14s %10s %11s %10s %6s %9s", "call", "by",
                  "algorithm / why passed", "ranks", "calls", "bytes", "total_s", "mean_us", "busbw_GB/s", "setups",
                  "setup_s");
    for (int i = 0; i < nstats; i++) {
        const stat_t *s = &stats[i];
        double mean = s->calls ? s->secs / (double)s->calls : 0, avg_bytes = s->calls ? s->bytes / (double)s->calls : 0;
        double f = s->kind == FR_MPI_ALLREDUCE && s->nranks > 1 ? 2.0 * (s->nranks - 1) / s->nranks : 1.0;
        char busbw[16] = "-";  /* (none for a non-blocking call: its time is its start's) */
        if (blocking(s->kind)) snprintf(busbw, sizeof busbw, "%.3f", mean > 0 ? avg_bytes / mean * f / 1e9 : 0);
        fr_log_report("STATS", "%-10s %-6s %-44s %5d %10lu %14.0f %10.4f %11.2f %10s %6lu %9.4f",
                      kind_name[s->kind], s->served ? "fr" : "MPI", s->what, s->nranks, s->calls, s->bytes, s->secs,
                      mean * 1e6, busbw, s->setups, s->setup_secs);
    }
}

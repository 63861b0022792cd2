/* The metrics (FASTREDUCE_METRICS): counters and histograms of the
 * process's collectives, rendered in the Prometheus text format (version
 * 0.0.4) for lib/api/metrics_out.c's HTTP endpoint and textfile. Updates
 * are relaxed atomic adds, so the calling thread and the progress thread
 * never wait for each other or for a scrape. */
#ifndef FR_METRICS_H
#define FR_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include "fastreduce.h"
#include "trace.h"

/* Make the counters for @p nalgs algorithms named @p algs (kept, not
 * copied), on rank @p rank of MPI_COMM_WORLD. Once; 1 when they exist. */
int fr_metrics_init(int nalgs, const char *const *algs, int rank);
/* 1 once fr_metrics_init succeeded. */
int fr_metrics_on(void);

/* A collective ran: @p coll (0 allreduce, 1 bcast) by algorithm @p alg on
 * @p bytes of memory @p cuda (0 host, 1 device), zero-copy or not, with
 * @p rec's timing and status @p st. */
void fr_metrics_call(int coll, int alg, int cuda, int zcopy, size_t bytes, const fr_trace_call_t *rec,
                     fr_status_t st);
/* A collective failed before an algorithm ran (a mismatch found by
 * FASTREDUCE_CHECK, a broken communicator). */
void fr_metrics_failure(int coll, fr_status_t st);
/* An MPI-signature call (@p call: "allreduce", ...) was passed to the MPI
 * library, for @p reason. */
void fr_metrics_passed(const char *call, const char *reason);
/* Communicators alive: +1 or -1. */
void fr_metrics_comms(int delta);

/* The whole exposition, a malloc'd string (*len its length), or NULL. */
char *fr_metrics_render(size_t *len);

#endif

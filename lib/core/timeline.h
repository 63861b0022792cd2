/* The timeline (FASTREDUCE_TIMELINE): every observed collective, its
 * phases and the program's spans, written per process as Chrome trace
 * events (the JSON array form, which Perfetto and chrome://tracing open
 * even when the closing bracket is missing, so a killed rank's file still
 * reads). Timestamps are this host's CLOCK_MONOTONIC in microseconds; the
 * "fastreduce_clock" metadata event gives the offset to the reference
 * clock that tools/fastreduce-trace adds when it merges the ranks. */
#ifndef FR_TIMELINE_H
#define FR_TIMELINE_H

#include <stddef.h>
#include <stdint.h>
#include "trace.h"

/* Open the file of @p pattern (%h host, %p pid, %r @p rank; ".%r" is
 * appended when it has neither %p nor %r) for this process, rank @p rank
 * of MPI_COMM_WORLD. A file that cannot be written is a warning: the
 * timeline stays off. Once per process; 1 when it is on. */
int fr_timeline_open(const char *pattern, int rank, const char *host);
/* 1 while the timeline is written. */
int fr_timeline_on(void);
/* This process's clock against that of rank @p ref_rank of MPI_COMM_WORLD,
 * communicator @p comm_key's rank 0 (offset_ns added to a local time gives
 * its), measured within +-@p uncertainty_ns. */
void fr_timeline_clock(int64_t offset_ns, uint64_t uncertainty_ns, const char *comm_key, int ref_rank);

/* What the timeline says of one call besides its timing. */
typedef struct fr_tl_call {
    const char *name;       /* "allreduce", "bcast", "allreduce_group" */
    const char *comm;       /* the communicator's key, the same on its ranks */
    uint64_t    seq;        /* its number on the communicator; 0 for a group (its messages have theirs) */
    size_t      bytes, count, nbuf;
    const char *dtype, *op, *algorithm, *memory, *status;
    int         root, zcopy;
} fr_tl_call_t;
/* Write @p c with @p rec's timing and phases. */
void fr_timeline_call(const fr_tl_call_t *c, const fr_trace_call_t *rec);
/* Write a span of the program's own, [t0, t1) ns, named @p name. */
void fr_timeline_span(const char *name, uint64_t t0, uint64_t t1);
/* Name the calling thread in the timeline ("progress"). */
void fr_timeline_thread_name(const char *name);
/* Push what is written to the file (communicator destruction, exit). */
void fr_timeline_flush(void);
/* Close the file with its closing bracket (at unload). */
void fr_timeline_close(void);

#endif

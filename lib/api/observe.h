/* Observing collectives (docs/architecture.md, "Seeing where the time
 * goes"): the timeline (FASTREDUCE_TIMELINE), the metrics
 * (FASTREDUCE_METRICS) and the late-rank report (FASTREDUCE_STATS). The
 * entry points call the hooks below; with everything off each costs a
 * pointer test. Nothing here can fail a collective: a failure to write or
 * serve is a warning, and the call goes on. */
#ifndef FR_API_OBSERVE_H
#define FR_API_OBSERVE_H

#include "comm.h"
#include "request.h"
#include "trace.h"

/* The process's outputs that need no peer (the timeline, the metrics and
 * their file), once: at the first fr_comm_create, or at the first call of
 * the MPI signature (FR_Allreduce, the interposer's MPI_Allreduce, ...). */
void fr_observe_process(void);

/* At fr_comm_create, on every rank (collective over @p comm): the
 * process-wide outputs the first time, then the communicator's clock
 * offset and its arrival record where any rank wants them. FR_SUCCESS or
 * an MPI failure (the only kind that fails the communicator's creation). */
fr_status_t fr_observe_comm(struct fr_comm *comm);

/* A collective starts on this thread (@p t_issue: when it was queued, 0 if
 * it was not) on a communicator observed (comm->obs): fills @p rec and
 * returns what fr_observe_end gives back. */
fr_trace_call_t *fr_observe_begin(struct fr_comm *comm, fr_trace_call_t *rec, uint64_t t_issue);
/* It ended with @p st: algorithm @p alg (an index into the registry, -1
 * when none ran), its call number @p seq. */
void fr_observe_end(struct fr_comm *comm, const fr_call_t *call, int alg, uint64_t seq, fr_trace_call_t *rec,
                    fr_trace_call_t *prev, fr_status_t st);
/* Grouped allreduce @p g ran from fr_observe_begin until now (the
 * timeline's bar around its messages). */
void fr_observe_group(struct fr_comm *comm, const fr_group_t *g, fr_trace_call_t *rec, fr_trace_call_t *prev,
                      fr_status_t st);
/* The progress thread names itself in the timeline. */
void fr_observe_thread(const char *name);

/* Whether this rank of @p comm keeps arrivals for the late-rank report
 * (fr_comm_destroy asks every rank, and makes the report where all do). */
int fr_observe_can_report(const struct fr_comm *comm);
/* fr_comm_destroy, once every rank passed the communicator's barrier:
 * post the late-rank report's reductions (non-blocking) ... */
void fr_observe_destroy_post(struct fr_comm *comm);
/* ... wait for them and print the report (rank 0) ... */
void fr_observe_report(struct fr_comm *comm);
/* ... and free what @p comm's observation holds (also where its creation
 * failed part-way). */
void fr_observe_free(struct fr_comm *comm);

#endif

/* Bounded waiting (FASTREDUCE_TIMEOUT), the argument check of
 * FASTREDUCE_CHECK, and the broken state a failed collective leaves.
 *
 * Every waiting loop of the library (shared-memory flags, UCX requests, the
 * MPI library's own collectives) keeps an fr_wait_t. With no timeout set it
 * costs one well-predicted branch per poll. With one set, the loop reads the
 * clock every 1024 polls while it spins and at every poll once it yields; a
 * wait that sees no completion for the timeout fails with FR_ERR_TIMED_OUT
 * and a message naming the collective, its sequence number, the algorithm,
 * the step and the peers it waited on. */
#ifndef FR_WAIT_H
#define FR_WAIT_H

#include <stdint.h>
#include <mpi.h>
#include "comm.h"
#include "trace.h"

/* The spin-then-yield step used by every waiting loop. */
void fr_backoff(uint64_t *polls, uint64_t spin);

typedef struct fr_wait {
    uint64_t polls;     /* unsuccessful polls so far (drives the spin-then-yield) */
    uint64_t start_ns;  /* when the clock was first read, 0 before */
    uint64_t trace_ns;  /* the first unsuccessful poll, where the call is observed (trace.h); 0 otherwise */
} fr_wait_t;
#define FR_WAIT_INIT {0, 0, 0}

/* The wait succeeded: an observed call gets it as a phase. */
static inline void fr_wait_done(fr_wait_t *w)
{
    if (__builtin_expect(w->trace_ns != 0, 0)) {
        fr_trace_end(FR_PH_WAIT, w->trace_ns);
        w->trace_ns = 0;
    }
}

/* The communicator's reliability settings (FASTREDUCE_TIMEOUT, _CHECK):
 * rank 0's, on every rank (collective). */
fr_status_t fr_wait_setup(struct fr_comm *comm);

/* 1 when this wait has run for the communicator's timeout (clock read here). */
int fr_wait_expired(const struct fr_comm *comm, fr_wait_t *w);

/* Whether the clock is due to be read after w->polls polls. */
static inline int fr_wait_due(const struct fr_comm *comm, const fr_wait_t *w)
{
    return comm->timeout_ns && (w->polls > comm->spin || (w->polls & 1023u) == 0);
}

/* After an unsuccessful poll: back off (spin, then yield) and say whether
 * the wait has timed out. */
int fr_wait_poll(const struct fr_comm *comm, fr_wait_t *w);

/* A wait of the running collective timed out at @p step (a short phrase:
 * "shm flag arrive, round 12") while @p peers (a phrase naming ranks) had not
 * answered: record the diagnostic, log it, leave the communicator broken and
 * return FR_ERR_TIMED_OUT. */
fr_status_t fr_wait_timeout(struct fr_comm *comm, const char *step, const char *peers);
/* The same for any failure of a wait: "<call> <how> at <step>, waiting for
 * <peers>; ..." with @p status. */
fr_status_t fr_wait_fail(struct fr_comm *comm, fr_status_t status, const char *how, const char *step,
                         const char *peers);

/* The collective failed part-way with @p st (its message recorded): the
 * ranks are out of step, so the communicator refuses every later call.
 * Returns @p st. */
fr_status_t fr_comm_break(struct fr_comm *comm, fr_status_t st);

/* "rank 3" or "ranks 0-2,5": a sorted list of ranks for messages. */
void fr_rank_list(const int *ranks, int n, char *buf, size_t len);

/* Complete an MPI request, bounded by the communicator's timeout. @p buf
 * (or NULL) is the heap block the request reads and writes: on a timeout
 * the request, @p buf and the MPI communicator are left to MPI (a
 * collective request cannot be cancelled) and freed by fr_mpi_left_reap()
 * once MPI completes it; the communicator is broken. On any other failure
 * (FR_ERR_MPI) @p buf stays the caller's to free. @p what names the call
 * ("MPI_Iallreduce"). */
fr_status_t fr_wait_mpi(struct fr_comm *comm, MPI_Request *req, const char *what, void *buf);
/* fr_wait_mpi for a request on the heap block @p buf: after a failure
 * other than a timeout (which leaves the block to MPI) the block is freed
 * here, so that no caller leaks it; after success it is the caller's. */
fr_status_t fr_wait_mpi_block(struct fr_comm *comm, MPI_Request *req, const char *what, void *buf);
/* Free what timed-out requests left, for those MPI has completed since.
 * @p released: the MPI communicator of a fastreduce communicator being
 * destroyed (MPI_COMM_NULL: none), freed now if nothing of MPI's uses it
 * any more, else when its last request completes. */
void fr_mpi_left_reap(MPI_Comm released);

/* fr_agree() inside a collective: bounded by the timeout like every wait. */
fr_status_t fr_agree_bounded(struct fr_comm *comm, fr_status_t st, const char *what);

/* The name of item @p i of a list the caller owns (the algorithms'). */
typedef const char *(*fr_name_fn)(int i);

/* FASTREDUCE_CHECK: every rank compares the call's collective, count,
 * datatype, op, root, memory kind and chosen algorithm (@p alg, an index
 * that @p alg_name names: the registry sits above this layer) with the
 * others'. FR_ERR_MISMATCH on every rank, with a message naming the ranks
 * and their values, when they differ. Collective. */
fr_status_t fr_check_agreement(struct fr_comm *comm, const fr_call_t *call, int alg, fr_name_fn alg_name);

#endif

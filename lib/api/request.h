/* Requests and the progress engine: a communicator's queue of collectives,
 * who runs them (its progress thread or a caller), and the request handles
 * programs hold (lib/api/request.c, progress.c, group.c). */
#ifndef FR_API_REQUEST_H
#define FR_API_REQUEST_H

#include <stdint.h>
#include "comm.h"

/* A grouped allreduce: n buffers of one datatype and op (the arrays are
 * the library's copies). */
typedef struct fr_group {
    size_t       n;
    const void **send;     /* send[i] == recv[i] in place */
    void       **recv;
    size_t      *counts;
    fr_dtype_t   dtype;
    fr_op_t      op;
    fr_mem_t     mem;
    int          dev;      /* device buffers: the GPU of the first one holding data */
    int          async;    /* device buffers: enqueue, do not wait (a request's, evented after) */
} fr_group_t;

typedef enum {
    FR_REQ_QUEUED,   /* in its communicator's queue */
    FR_REQ_RUNNING,  /* being run by the thread or a caller */
    FR_REQ_ISSUED,   /* run; the GPU work it issued is not known to be done (event) */
    FR_REQ_DONE,     /* complete: status and detail are final */
} fr_req_state_t;

/* One collective in a communicator's queue: a request, or a blocking call
 * that had to queue behind requests (then on its caller's stack). */
typedef struct fr_work {
    struct fr_work *next;       /* the queue, or the communicator's issued list */
    struct fr_comm *comm;       /* its communicator (which may be gone once the request is done) */
    uint64_t        number;     /* the request's number on its communicator (1, 2, ...); 0 for blocking */
    int             state;      /* fr_req_state_t, under the communicator's queue lock */
    int             parked;     /* the thread may not run it (it needs MPI below THREAD_MULTIPLE) */
    int             claimed;    /* a caller is completing it (fr_test/fr_wait; under fr_req_lock) */
    fr_call_t       call;       /* the collective, or ... */
    fr_group_t     *group;     /* ... a grouped allreduce (then call is unused) */
    void           *event;      /* device buffers: the CUDA event after the issued work */
    uint64_t        slot;       /* its handle (request.c), 0 for blocking calls */
    fr_status_t     status;
    char            detail[512];   /* fr_last_error() of a failure */
    const char     *alg;        /* the algorithm that ran it (the last one of a group) */
    int             zcopy;      /* whether it went zero-copy (the last message of a group) */
    int             cma;        /* whether a bcast went by cma (fr_last_cma) */
    uint64_t        t_issue;    /* when it was queued, where calls are observed (observe.h), else 0 */
    /* a detached request (no handle): the runner calls done(done_arg, status,
     * detail) once it is complete, from whichever thread ran it, and frees it */
    void          (*done)(void *arg, fr_status_t st, const char *detail);
    void           *done_arg;
} fr_work_t;

/* Make @p comm's queue (fr_comm_create); FR_ERR_NO_MEMORY or FR_SUCCESS. */
fr_status_t fr_prog_create(struct fr_comm *comm);
/* Stop the progress thread and free the queue (the queue must be empty:
 * fr_prog_pending said 0). */
void fr_prog_destroy(struct fr_comm *comm);
/* The requests of @p comm not complete yet (issued device work is polled first),
 * plus callers waiting on the communicator; 0 means it may be destroyed. */
uint64_t fr_prog_pending(struct fr_comm *comm);

/* Run a blocking call on @p comm: at once in the caller when nothing is
 * queued or running, else behind the queued requests (the caller runs them
 * as it can, or waits for the runner). */
fr_status_t fr_prog_blocking(struct fr_comm *comm, fr_call_t *call, fr_group_t *group);
/* Queue request @p w (comm, call or group and slot set) and wake the
 * thread, making it at the communicator's first request. */
fr_status_t fr_prog_start(struct fr_comm *comm, fr_work_t *w);
/* Start a request of @p call (checked with fr_prepare_*) on @p comm:
 * what fr_iallreduce and fr_ibcast do after their checks. */
fr_status_t fr_request_start(struct fr_comm *comm, const fr_call_t *call, fr_request_t *req);
/* Start a detached request of @p call (checked with fr_prepare_*) on
 * @p comm: @p done is called once it is complete, by the progress thread
 * or a caller running it; device work is waited for before (no event is
 * polled for it). FR_ERR_NOT_SUPPORTED where nothing would run it
 * unprompted: FASTREDUCE_PROGRESS=caller, or no thread could be made.
 * (The interposer's MPI_Iallreduce under Open MPI completes generalized
 * requests this way.) */
fr_status_t fr_request_start_detached(struct fr_comm *comm, const fr_call_t *call,
                                      void (*done)(void *arg, fr_status_t st, const char *detail), void *arg);
/* Make @p comm's progress thread now, unless FASTREDUCE_PROGRESS=caller:
 * 1 when it runs. (The interposer makes it with its cached communicator and
 * agrees on it, so that no rank is left without one while the others start
 * requests.) */
int fr_prog_thread(struct fr_comm *comm);
/* 1 when @p comm's requests run on a progress thread with MPI allowed
 * there (thread mode under MPI_THREAD_MULTIPLE): a detached request is
 * then run whatever its algorithm. */
int fr_prog_unprompted(struct fr_comm *comm);
/* Whether @p call (checked with fr_prepare_*) may make an MPI call when
 * it runs on @p comm, decided at its start alike on every rank: as the
 * progress thread decides whether it may run a request, but counting a
 * UCX or NCCL set-up whenever the algorithm needs one (earlier requests
 * may have made it by then on some ranks and not on others). In thread
 * mode a request of 0 here is never parked for a caller. (The
 * interposer's MPI_Iallreduce under MPICH below MPI_THREAD_MULTIPLE is
 * served only then.) */
int fr_prog_may_need_mpi(struct fr_comm *comm, const fr_call_t *call);
/* Whether the algorithm the table gives @p call needs UCX. */
int fr_call_needs_ucx(struct fr_comm *comm, const fr_call_t *call);
/* Count a caller that will advance a request of @p comm (under the
 * request table's lock, fr_req_lock), so that the communicator is not
 * destroyed under it; fr_prog_release when it is done with it. */
void fr_prog_hold(struct fr_comm *comm);
void fr_prog_release(struct fr_comm *comm);
/* Advance @p w (the caller holds its communicator, or runs a blocking call on it): with @p wait, until it is done; without, only what the
 * caller must run (caller mode: every request up to @p w; thread mode: the
 * requests parked for the caller) and the issued device work's events.
 * Returns 1 once @p w is done. */
int fr_prog_advance(fr_work_t *w, int wait);

/* The request table's lock (request.c): fr_comm_destroy takes it to find
 * no request pending while no caller can start holding one. */
void fr_req_lock(void);
void fr_req_unlock(void);

/* The calls grouped allreduce @p g makes, one per fusion buffer or lone
 * buffer: fills *call (its buffers unset) for the next batch from buffer
 * *i on, buffers [*first, new *i); 0 when none is left. */
int fr_group_next(struct fr_comm *comm, const fr_group_t *g, size_t *i, size_t *first, fr_call_t *call);
/* Run grouped allreduce @p g (lib/api/group.c). */
fr_status_t fr_group_run(struct fr_comm *comm, fr_group_t *g, const char **alg);
/* Whether running @p g grows the fusion buffer first: it agrees on the
 * outcome with the other ranks, an MPI call. */
int fr_group_grows(struct fr_comm *comm, const fr_group_t *g);
/* Free the communicator's fusion buffer (fr_comm_destroy). */
void fr_group_fusion_free(struct fr_comm *comm);
/* Validate and copy a grouped call's arrays: *out (malloc'd, fr_group_free) or an error. */
fr_status_t fr_group_make(struct fr_comm *comm, const void *const *sendbufs, void *const *recvbufs,
                          const size_t *counts, size_t n, fr_dtype_t dtype, fr_op_t op, fr_group_t **out);
void fr_group_free(fr_group_t *g);

#endif

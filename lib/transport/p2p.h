/* Point-to-point transfers between the ranks of a communicator, over UCX ucp
 * tag matching. Every tag carries the sender's rank, the communicator's call
 * sequence number and a step chosen by the algorithm, so that messages of
 * different calls and steps never match each other. */
#ifndef FR_P2P_H
#define FR_P2P_H

#include <stddef.h>
#include "comm.h"

typedef struct fr_req {
    void    *ucx;   /* UCX request, or NULL when already complete */
    int      peer;  /* for a timeout's diagnostic: the rank, */
    unsigned step;  /* the step, */
    int      recv;  /* and whether it is a receive */
} fr_req_t;

#define FR_REQ_INIT { NULL, 0, 0, 0 }

/* Create the UCX worker and connect to every rank of comm, unless done
 * (collective: fr_dispatch calls it, on every rank alike, before the first
 * algorithm that needs UCX). Its waits are bounded by FASTREDUCE_TIMEOUT.
 * A failure is every rank's: FR_ERR_UCX (or the failed rank's status) on
 * all, the communicator still usable by algorithms without UCX, and later
 * calls fail at once with the same reason; a timeout or an MPI failure
 * breaks the communicator instead. */
fr_status_t fr_ucx_setup(struct fr_comm *comm);
/* Close the endpoints and the worker (local: also what a broken
 * communicator does at once, with requests still posted). */
void fr_ucx_destroy(struct fr_comm *comm);

/* Start a send / receive of @p len bytes to / from @p peer for step @p step
 * (0 <= step < 65536) of the current call. The buffer must stay valid until
 * fr_p2p_wait() returns for the request. */
fr_status_t fr_p2p_isend(struct fr_comm *comm, int peer, unsigned step,
                         const void *buf, size_t len, fr_req_t *req);
fr_status_t fr_p2p_irecv(struct fr_comm *comm, int peer, unsigned step,
                         void *buf, size_t len, fr_req_t *req);
/* Wait for @p n requests (spinning, then yielding the core). Past
 * FASTREDUCE_TIMEOUT: FR_ERR_TIMED_OUT naming the requests' peers, the
 * communicator broken and its worker gone (so nothing lands later). */
fr_status_t fr_p2p_wait(struct fr_comm *comm, fr_req_t *reqs, int n);

/* One step of progress, then whether all @p n requests are complete
 * (*complete; the completed ones are freed). Never waits; a failed request
 * fails (and breaks) the call as in fr_p2p_wait. */
fr_status_t fr_p2p_test(struct fr_comm *comm, fr_req_t *reqs, int n, int *complete);

/* Send to @p dst and receive from @p src at once (either may be -1 to skip). */
fr_status_t fr_p2p_sendrecv(struct fr_comm *comm, int dst, const void *sbuf, size_t slen,
                            int src, void *rbuf, size_t rlen, unsigned step);
fr_status_t fr_p2p_send(struct fr_comm *comm, int dst, const void *buf, size_t len, unsigned step);
fr_status_t fr_p2p_recv(struct fr_comm *comm, int src, void *buf, size_t len, unsigned step);

#endif

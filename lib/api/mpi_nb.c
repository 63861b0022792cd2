/* FR_Iallreduce / FR_Ibcast with MPI's signature. A call fastreduce serves
 * is one of its requests (lib/api/request.h) behind an MPI generalized
 * request, which the program completes with MPI_Wait, MPI_Test and the
 * rest as any other; what MPI gives no correct way to complete goes to
 * PMPI_Iallreduce / PMPI_Ibcast unchanged.
 *
 * MPI completes a generalized request only when something calls
 * MPI_Grequest_complete on it. With MPICH's extension (MPIX_Grequest_start:
 * a poll function that MPI_Test and MPI_Wait call, and a wait function for
 * MPI_Waitall) that is the program's own thread, inside those calls: the
 * request runs on the communicator's progress thread, and the poll asks
 * fr_test whether it is done. Without it (Open MPI) the runner of the
 * request must complete it, calling MPI from the progress thread, which
 * only MPI_THREAD_MULTIPLE allows. Either way MPI_Test must not wait for
 * the other ranks, so a request is served only where the progress thread
 * runs it without help from the caller (see why_not). */
#include "config.h"
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "api.h"
#include "comm.h"
#include "log.h"
#include "mpi_api.h"
#include "request.h"
#include "wait.h"

#ifdef FR_HAVE_GREQUEST_POLL
#define VIA "grequest+poll"
#else
#define VIA "grequest+thread"
#endif

/* One served call: the generalized request's extra state, freed by its
 * free function once MPI is done with the request. (MPI makes
 * MPI_Request_free and MPI_Cancel of a non-blocking collective's request
 * erroneous, so the program completes it; with the poll, a request freed
 * anyway is never polled again, and its state stays.) */
typedef struct nb {
    MPI_Request    mreq;    /* the generalized request, made before anything can complete it */
    int            err;     /* the MPI error class it completes with */
    fr_mpi_bytes_t bytes;   /* a bcast's packing (zero for an allreduce) */
    const char    *name;    /* "MPI_Iallreduce" / "MPI_Ibcast", for the log */
#ifdef FR_HAVE_GREQUEST_POLL
    fr_request_t   req;     /* the library's request, until it is done */
    int            done;    /* MPI_Grequest_complete was called */
    uint64_t       polls;   /* polls that found it running: after spin of them, each yields */
    uint64_t       spin;
    size_t         slot;    /* its place in the served table (below) */
#endif
} nb_t;

#ifdef FR_HAVE_GREQUEST_POLL
/* The served requests MPI still holds, found by their MPI handle:
 * MPI_Request_get_status calls no poll function (MPICH 4.0), so
 * FR_Request_get_status polls a served request itself. A request leaves the
 * table in its free function, before MPI can give its handle to another.
 * The lock is never held across an MPI call: MPI may run the free function
 * under its own lock. */
static struct {
    pthread_mutex_t lock;
    nb_t          **s;
    size_t          n, cap;
} served = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int served_add(nb_t *s)
{
    pthread_mutex_lock(&served.lock);
    if (served.n == served.cap) {
        size_t cap = served.cap ? 2 * served.cap : 64;
        nb_t **t = realloc(served.s, cap * sizeof *t);
        if (!t) {
            pthread_mutex_unlock(&served.lock);
            return 0;
        }
        served.s = t;
        served.cap = cap;
    }
    s->slot = served.n;
    served.s[served.n++] = s;
    pthread_mutex_unlock(&served.lock);
    return 1;
}

static void served_remove(nb_t *s)
{
    pthread_mutex_lock(&served.lock);
    if (s->slot < served.n && served.s[s->slot] == s) {
        served.s[s->slot] = served.s[--served.n];
        served.s[s->slot]->slot = s->slot;
    }
    if (!served.n) {   /* (nothing held between bursts, nothing at exit) */
        free(served.s);
        served.s = NULL;
        served.cap = 0;
    }
    pthread_mutex_unlock(&served.lock);
}

static nb_t *served_find(MPI_Request r)
{
    nb_t *found = NULL;
    pthread_mutex_lock(&served.lock);
    for (size_t i = 0; i < served.n && !found; i++)
        if (served.s[i]->mreq == r) found = served.s[i];
    pthread_mutex_unlock(&served.lock);
    return found;
}
#endif

/* The end of @p s's request (status @p st): a packed bcast is unpacked,
 * and the status becomes the MPI error class the request completes with.
 * The class is stored with release and read by nb_query with acquire:
 * MPI's completion already orders the results before the program's
 * MPI_Wait or MPI_Test returns, but inside the MPI library, where
 * ThreadSanitizer cannot see it; the query runs in that caller's thread,
 * so this pair shows it the same order. */
static void finish(nb_t *s, fr_status_t st, const char *detail)
{
    fr_status_t end = fr_mpi_bytes_end(&s->bytes, st);
    __atomic_store_n(&s->err, fr_mpi_error(end), __ATOMIC_RELEASE);
    if (end != FR_SUCCESS)
        FR_WARN(FR_SUB_COLL, "%s failed: %s", s->name, end == st && detail ? detail : fr_last_error());
}

/* A collective's status: no source, tag or elements, never cancelled; the
 * request's error is returned, which MPI passes on to MPI_Wait and the
 * rest (and raises on the handler of generalized requests, MPI_COMM_WORLD's
 * in Open MPI and MPICH, not on the call's communicator). */
static int nb_query(void *arg, MPI_Status *status)
{
    const nb_t *s = arg;
    status->MPI_SOURCE = MPI_ANY_SOURCE;
    status->MPI_TAG = MPI_ANY_TAG;
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    return __atomic_load_n(&s->err, __ATOMIC_ACQUIRE);
}

static int nb_free(void *arg)
{
#ifdef FR_HAVE_GREQUEST_POLL
    served_remove(arg);
#endif
    free(arg);
    return MPI_SUCCESS;
}

/* (a collective cannot be cancelled, as MPI's own cannot: the request
 * completes as it would have) */
static int nb_cancel(void *arg, int complete)
{
    return MPI_SUCCESS;
}

#ifdef FR_HAVE_GREQUEST_POLL
/* Complete @p s's generalized request once the library's request is done,
 * waiting for it with @p wait. MPI calls the poll again after that (also
 * MPI_Testall with others not done), and a status pointer that may be
 * MPI_STATUS_IGNORE's: neither is read here. */
static void advance(nb_t *s, int wait)
{
    if (s->done) return;
    int done = 0;
    fr_status_t st = wait ? fr_wait(&s->req) : fr_test(&s->req, &done);
    if (s->req != FR_REQUEST_NULL) {
        /* (running still; or, in an erroneous program, completed by another thread) */
        if (!wait) fr_backoff(&s->polls, s->spin);
        return;
    }
    finish(s, st, NULL);
    s->done = 1;
    PMPI_Grequest_complete(s->mreq);
}

static int nb_poll(void *arg, MPI_Status *status)
{
    advance(arg, 0);
    return MPI_SUCCESS;
}

/* MPI_Waitall's: the requests are complete when it returns (MPICH calls it
 * again while one is not). */
static int nb_wait(int n, void **states, double timeout, MPI_Status *status)
{
    for (int i = 0; i < n; i++) advance(states[i], 1);
    return MPI_SUCCESS;
}

/* Start @p call on @p fc behind a generalized request made first. */
static fr_status_t start(nb_t *s, fr_comm_t fc, const fr_call_t *call)
{
    s->slot = SIZE_MAX;
    if (PMPIX_Grequest_start(nb_query, nb_free, nb_cancel, nb_poll, nb_wait, s, &s->mreq) != MPI_SUCCESS)
        return FR_ERROR(FR_ERR_MPI, "%s: MPIX_Grequest_start failed", s->name);
    s->spin = fc->spin;
    if (!served_add(s)) return FR_ERROR(FR_ERR_NO_MEMORY, "%s: out of memory for a request", s->name);
    return fr_request_start(fc, call, &s->req);
}
#else
/* Run by whichever thread ran the request (MPI_THREAD_MULTIPLE): the
 * generalized request is complete from here on, and s MPI's to free. */
static void done(void *arg, fr_status_t st, const char *detail)
{
    nb_t *s = arg;
    const MPI_Request r = s->mreq;
    finish(s, st, detail);
    PMPI_Grequest_complete(r);
}

static fr_status_t start(nb_t *s, fr_comm_t fc, const fr_call_t *call)
{
    if (PMPI_Grequest_start(nb_query, nb_free, nb_cancel, s, &s->mreq) != MPI_SUCCESS)
        return FR_ERROR(FR_ERR_MPI, "%s: MPI_Grequest_start failed", s->name);
    return fr_request_start_detached(fc, call, done, s);
}
#endif

/* Why a call that fastreduce could serve blocking goes to the MPI library
 * non-blocking: where nothing would run it without the caller's help, or
 * MPI could not be told it is done, or a rank has no progress thread, or
 * its algorithm needs UCX, which an earlier blocking call found cannot be
 * set up. Agreed (c->cached), so the same on every rank. */
static const char *why_not(const fr_mpi_call_t *c, const fr_call_t *call)
{
    const int can = c->cached->can;
    if (!(can & FR_MPI_CAN_THREAD)) return "FASTREDUCE_PROGRESS=caller";
    if (!(can & FR_MPI_CAN_MULTIPLE)) {
#ifdef FR_HAVE_GREQUEST_POLL
        /* the progress thread may not call MPI: a request whose run calls MPI
         * would wait for the caller's MPI_Test to run it, to its end */
        if (fr_prog_may_need_mpi(c->fc, call)) return "needs MPI below MPI_THREAD_MULTIPLE";
#else
        return "below MPI_THREAD_MULTIPLE, no grequest poll";
#endif
    }
    if (!(can & FR_MPI_HAS_THREAD)) return "no progress thread on some rank";
    /* (a blocking call found it, alike on every rank: the request would fail) */
    return c->cached->no_ucx && fr_call_needs_ucx(c->fc, call) ? FR_MPI_NO_UCX : NULL;
}

int FR_Request_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
#ifdef FR_HAVE_GREQUEST_POLL
    /* (the program may not complete this request in another thread
     * meanwhile, which would write the handle read here: s stays MPI's) */
    nb_t *s = request != MPI_REQUEST_NULL ? served_find(request) : NULL;
    if (s) advance(s, 0);
#endif
    return PMPI_Request_get_status(request, flag, status);
}

int fr_mpi_grequest_poll(void)
{
#ifdef FR_HAVE_GREQUEST_POLL
    return 1;
#else
    return 0;
#endif
}

/* Serve @p call (checked) with @p s (its packing done) as *request, or say
 * in how why not (how->served 0); s is MPI's from here on if served, else
 * freed. */
static fr_status_t serve(nb_t *s, const fr_mpi_call_t *c, const fr_call_t *call, MPI_Request *request,
                         fr_mpi_served_t *how)
{
    how->what = why_not(c, call);
    how->served = !how->what;
    if (!how->served) {
        fr_mpi_bytes_end(&s->bytes, FR_ERR_NOT_SUPPORTED);   /* (not run: nothing to unpack) */
        free(s);
        return FR_SUCCESS;
    }
    /* (the algorithm the request will run, which the table gives it) */
    if (how->mode & FR_MPI_STATS)
        how->what = call->coll == FR_COLL_ALLREDUCE
                        ? fr_allreduce_choice(c->fc, call->count, call->dtype, call->op, call->mem, NULL, 0)
                        : fr_bcast_choice(c->fc, call->count, call->dtype, call->root, call->mem, NULL, 0);
    how->via = VIA;
    how->bytes = (double)call->bytes;
    how->nranks = c->fc->size;
    __atomic_store_n(&c->cached->started, 1, __ATOMIC_RELEASE);
    fr_status_t st = start(s, c->fc, call);
    if (st == FR_SUCCESS) {
        *request = s->mreq;
        return FR_SUCCESS;
    }
    /* no request of the library's: none of MPI's either */
    fr_mpi_bytes_end(&s->bytes, st);
    if (s->mreq == MPI_REQUEST_NULL) {
        free(s);
    } else {
        PMPI_Grequest_complete(s->mreq);
        PMPI_Request_free(&s->mreq);   /* (its free function frees s) */
    }
    return st;
}

/* A new call's state, or NULL with the error recorded. */
static nb_t *nb_new(const char *name)
{
    nb_t *s = calloc(1, sizeof *s);
    if (!s) {
        FR_ERROR(FR_ERR_NO_MEMORY, "%s: out of memory for a request", name);
        return NULL;
    }
    s->mreq = MPI_REQUEST_NULL;
    s->name = name;
    return s;
}

/* A served call's return: its failure to start (no request) goes to
 * @p comm's error handler. */
static int started(fr_status_t st, MPI_Comm comm, fr_mpi_served_t *how)
{
    if (st != FR_SUCCESS && !how->what) how->what = "failed at its start";
    return fr_mpi_served_status(st, comm);
}

/* FR_Iallreduce without its statistics, saying in *how what happened. */
static int nb_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                        MPI_Request *request, fr_mpi_served_t *how)
{
    fr_mpi_call_t c;
    fr_call_t call;
    const char *why = fr_mpi_allreduce_why(sendbuf, recvbuf, count, datatype, op, comm, 1, &c);
    how->setup = c.setup;
    if (!why && !request) why = "request";
    how->served = !why;
    how->what = why;
    if (why) return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
    *request = MPI_REQUEST_NULL;
    const void *in = sendbuf == MPI_IN_PLACE ? FR_IN_PLACE : sendbuf;
    /* (checked first: a call in error fails at once, with no request) */
    fr_status_t st = fr_prepare_allreduce(in, recvbuf, (size_t)count, (fr_dtype_t)c.dtype, (fr_op_t)c.op, c.fc, &call);
    nb_t *s = st == FR_SUCCESS ? nb_new("MPI_Iallreduce") : NULL;
    if (st == FR_SUCCESS && !s) st = FR_ERR_NO_MEMORY;
    if (s) st = serve(s, &c, &call, request, how);
    if (!how->served) return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
    return started(st, comm, how);
}

/* FR_Ibcast without its statistics: as FR_Bcast, a datatype that does not
 * lie flat packed at the start (the root) or unpacked at the end. */
static int nb_bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request,
                    fr_mpi_served_t *how)
{
    fr_mpi_call_t c;
    fr_call_t call;
    const char *why = fr_mpi_bcast_why(buffer, count, datatype, comm, 1, &c);
    how->setup = c.setup;
    if (!why && !request) why = "request";
    how->served = !why;
    how->what = why;
    if (why) return PMPI_Ibcast(buffer, count, datatype, root, comm, request);
    *request = MPI_REQUEST_NULL;
    nb_t *s = nb_new("MPI_Ibcast");
    fr_status_t st = s ? FR_SUCCESS : FR_ERR_NO_MEMORY;
    /* (MPI_COMM_SELF packs as the call's communicator would, in a homogeneous
     * job; that one may be freed before the request completes) */
    if (s) st = fr_mpi_bytes_begin(&s->bytes, buffer, count, datatype, c.size, root, c.fc->rank, MPI_COMM_SELF, 1);
    if (st == FR_SUCCESS) st = fr_prepare_bcast(s->bytes.buf, s->bytes.bytes, FR_UINT8, root, c.fc, &call);
    if (st == FR_SUCCESS) {
        st = serve(s, &c, &call, request, how);
    } else if (s) {
        fr_mpi_bytes_end(&s->bytes, st);
        free(s);
    }
    if (!how->served) return PMPI_Ibcast(buffer, count, datatype, root, comm, request);
    return started(st, comm, how);
}

int FR_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                  MPI_Request *request)
{
    fr_mpi_served_t h;
    fr_mpi_call_begin(&h);
    int err = h.mode & FR_MPI_DISABLED ? PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request)
                                       : nb_allreduce(sendbuf, recvbuf, count, datatype, op, comm, request, &h);
    fr_mpi_call_end(FR_MPI_IALLREDUCE, &h, count, datatype, comm);
    return err;
}

int FR_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request)
{
    fr_mpi_served_t h;
    fr_mpi_call_begin(&h);
    int err = h.mode & FR_MPI_DISABLED ? PMPI_Ibcast(buffer, count, datatype, root, comm, request)
                                       : nb_bcast(buffer, count, datatype, root, comm, request, &h);
    fr_mpi_call_end(FR_MPI_IBCAST, &h, count, datatype, comm);
    return err;
}

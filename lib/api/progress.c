#define _GNU_SOURCE   /* SCHED_BATCH */
/* The progress engine: each communicator has a queue of collectives that
 * run one at a time in the order they were started, which is the order
 * every rank keeps. A runner (the communicator's progress thread, or a
 * caller that waits for a queued request) takes the head and runs it to
 * its end with the blocking path's dispatch; nothing else of the
 * communicator runs meanwhile.
 *
 * One thread per communicator rather than one per process: the program
 * may complete the requests of two communicators in different orders on
 * different ranks (MPI allows it), and a single thread running each
 * collective to its end would then wait on one communicator for ranks that
 * wait on the other. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "alg.h"
#include "api.h"
#include "device.h"
#include "log.h"
#include "observe.h"
#include "request.h"
#include "select.h"
#include "wait.h"

struct fr_prog {
    pthread_mutex_t lock;
    pthread_cond_t  wake;       /* the thread: work queued, or stop */
    pthread_cond_t  done;       /* waiters: a run ended or a request was parked */
    fr_work_t      *head, *tail;
    fr_work_t      *issued;     /* requests whose GPU work may still run */
    int             busy;       /* a runner is running a collective of the communicator */
    int             caller;     /* FASTREDUCE_PROGRESS=caller (or no thread could be made) */
    int             mpi_ok;     /* MPI_THREAD_MULTIPLE: the thread may call MPI */
    int             thread_on, stop;
    pthread_t       tid;
    uint64_t        numbered;   /* requests started */
    uint64_t        open;       /* requests not done */
    int             waiters;    /* callers inside fr_prog_advance (they hold the communicator) */
};

fr_status_t fr_prog_create(struct fr_comm *comm)
{
    struct fr_prog *P = calloc(1, sizeof *P);
    if (!P) return FR_ERROR(FR_ERR_NO_MEMORY, "fr_comm_create: out of memory");
    pthread_mutex_init(&P->lock, NULL);
    pthread_cond_init(&P->wake, NULL);
    pthread_cond_init(&P->done, NULL);
    P->caller = comm->set.progress == FR_PROGRESS_CALLER;
    int level = MPI_THREAD_SINGLE;
    if (PMPI_Query_thread(&level) != MPI_SUCCESS) level = MPI_THREAD_SINGLE;
    P->mpi_ok = level == MPI_THREAD_MULTIPLE;
    comm->prog = P;
    return FR_SUCCESS;
}

void fr_prog_destroy(struct fr_comm *comm)
{
    struct fr_prog *P = comm->prog;
    if (!P) return;
    pthread_mutex_lock(&P->lock);
    P->stop = 1;
    pthread_cond_signal(&P->wake);
    pthread_mutex_unlock(&P->lock);
    if (P->thread_on) pthread_join(P->tid, NULL);
    pthread_mutex_destroy(&P->lock);
    pthread_cond_destroy(&P->wake);
    pthread_cond_destroy(&P->done);
    free(P);
    comm->prog = NULL;
}

/* A request's state is read without the queue's lock by callers that
 * check whether it is done (request.c, fr_prog_advance), so it is written
 * and read atomically everywhere. */
static int state_of(const fr_work_t *w) { return __atomic_load_n(&w->state, __ATOMIC_ACQUIRE); }
static void state_set(fr_work_t *w, int st) { __atomic_store_n(&w->state, st, __ATOMIC_RELEASE); }

/* Mark @p w done with its final status (lock held). */
static void set_done(struct fr_prog *P, fr_work_t *w)
{
    if (w->number) P->open--;
    state_set(w, FR_REQ_DONE);
}

/* Complete the issued requests whose GPU work has finished (lock held). */
static void poll_issued(struct fr_prog *P)
{
    for (fr_work_t **p = &P->issued; *p;) {
        fr_work_t *w = *p;
        fr_status_t st = FR_SUCCESS;
        if (!fr_device_event_done(w->event, &st)) { p = &w->next; continue; }
        *p = w->next;
        w->next = NULL;
        fr_device_event_free(w->event);
        w->event = NULL;
        if (st != FR_SUCCESS) {
            w->status = st;
            snprintf(w->detail, sizeof w->detail, "request %lu: %s", (unsigned long)w->number, fr_last_error());
        }
        set_done(P, w);
    }
}

/* fr_group_run of a communicator observed (observe.h): a function of its
 * own, so that the timing record is on the stack of observed calls only. */
static __attribute__((noinline)) fr_status_t group_observed(struct fr_comm *comm, fr_group_t *group,
                                                             const char **alg, uint64_t t_issue)
{
    fr_trace_call_t rec;
    fr_trace_call_t *prev = fr_observe_begin(comm, &rec, t_issue);
    fr_status_t st = fr_group_run(comm, group, alg);
    fr_observe_group(comm, group, &rec, prev, st);
    return st;
}

/* Run a collective, or a grouped allreduce, on @p comm (no lock held):
 * refused once the communicator is broken, since a queued call runs after
 * the argument checks that refuse it at its start. *alg: the algorithm
 * that ran (a group's last). */
static fr_status_t run_call(struct fr_comm *comm, fr_call_t *call, fr_group_t *group, const char **alg,
                            uint64_t t_issue)
{
    fr_status_t st;
    *alg = "";
    if (comm->broken)
        return FR_ERROR(FR_ERR_BAD_COMM, "the communicator is unusable since a collective failed on it (%s)",
                        comm->broken_why);
    if (group) return comm->obs ? group_observed(comm, group, alg, t_issue) : fr_group_run(comm, group, alg);
    call->t_issue = t_issue;
    st = fr_dispatch(comm, call);
    *alg = fr_last_algorithm();
    return st;
}

/* Run @p w's collective (no lock held): the request's device work is
 * issued without waiting for it, and an event follows it. */
static fr_status_t run_work(struct fr_comm *comm, fr_work_t *w)
{
    fr_mem_t mem = w->group ? w->group->mem : w->call.mem;
    const int evented = w->number && mem == FR_MEM_CUDA && !w->done;
    int dev = w->number && mem == FR_MEM_CUDA ? (w->group ? w->group->dev : fr_device_of(w->call.recvbuf)) : -1;
    int prev = fr_device_use(dev);
    if (evented) {
        w->call.async = 1;
        if (w->group) w->group->async = 1;
    }
    fr_status_t st = run_call(comm, &w->call, w->group, &w->alg, w->t_issue);
    w->zcopy = *w->alg ? fr_last_zero_copy() : 0;   /* (nothing ran: the runner's last call is another's) */
    w->cma = *w->alg ? fr_last_cma() : 0;
    if (st == FR_SUCCESS && evented) st = fr_device_event_record(NULL, &w->event);
    fr_device_restore(prev);
    if (st != FR_SUCCESS && w->number)
        snprintf(w->detail, sizeof w->detail, "request %lu (call #%lu on its communicator): %s",
                 (unsigned long)w->number, (unsigned long)comm->seq, fr_last_error());
    else if (st != FR_SUCCESS)
        snprintf(w->detail, sizeof w->detail, "%s", fr_last_error());
    return st;
}

/* Run the queue's head (lock held, not busy); the lock is dropped while it runs. */
static void run_head(struct fr_prog *P, struct fr_comm *comm)
{
    fr_work_t *w = P->head;
    P->head = w->next;
    if (!P->head) P->tail = NULL;
    w->next = NULL;
    state_set(w, FR_REQ_RUNNING);
    P->busy = 1;
    pthread_mutex_unlock(&P->lock);
    fr_status_t st = run_work(comm, w);
    pthread_mutex_lock(&P->lock);
    P->busy = 0;
    w->status = st;
    if (st == FR_SUCCESS && w->event) {
        state_set(w, FR_REQ_ISSUED);
        w->next = P->issued;
        P->issued = w;
    } else if (w->done) {
        /* (outside the lock: the callback may call MPI. Counted done
         * first, as MPI may let the program free the communicator once the
         * callback completes its request; a destroy that goes ahead still
         * waits for the callback: for this thread in its join, and for a
         * caller running it, which counts among the waiters.) */
        P->open--;
        pthread_mutex_unlock(&P->lock);
        w->done(w->done_arg, st, w->detail);
        free(w);
        pthread_mutex_lock(&P->lock);
    } else {
        set_done(P, w);   /* (a waiter may free w from here on) */
    }
    pthread_cond_broadcast(&P->done);
    if (P->head && P->thread_on) pthread_cond_signal(&P->wake);
}

/* The algorithm chosen for @p call, with the rule's parameters set in
 * the copy @p c. */
static const fr_alg_t *chosen(struct fr_comm *comm, const fr_call_t *call, fr_call_t *c)
{
    *c = *call;
    int rule;
    return fr_select_choose(comm, c, &rule);
}

/* Whether running @p w makes an MPI call: the MPI library's own
 * collective, FASTREDUCE_CHECK's agreement, the staged path's agreement,
 * the first set-up of UCX or NCCL, and the agreement on a larger scratch
 * buffer. With @p ahead, decided before the communicator's earlier
 * requests ran: a set-up or a scratch buffer is counted whenever the
 * algorithm needs one, as whether it is there by then differs between
 * ranks. */
static int call_needs_mpi(struct fr_comm *comm, const fr_call_t *call, int ahead)
{
    if (comm->check) return 1;
    if (call->mem == FR_MEM_CUDA && (ahead || !comm->nccl_state)) return 1;
    fr_call_t c;
    const fr_alg_t *a = chosen(comm, call, &c);
    if (a->traits & (FR_ALG_MPI | FR_ALG_VIA_HOST)) return 1;
    if (fr_alg_scratch(a, &c, comm) > (ahead ? 0 : comm->scratch_size)) return 1;
    return (a->needs & FR_NEEDS_UCX) && (ahead || !comm->ucx_state);
}

int fr_prog_may_need_mpi(struct fr_comm *comm, const fr_call_t *call)
{
    return call_needs_mpi(comm, call, 1);
}

int fr_call_needs_ucx(struct fr_comm *comm, const fr_call_t *call)
{
    fr_call_t c;
    return (chosen(comm, call, &c)->needs & FR_NEEDS_UCX) != 0;
}

static int needs_mpi(struct fr_comm *comm, const fr_work_t *w)
{
    if (!w->group) return call_needs_mpi(comm, &w->call, 0);
    if (fr_group_grows(comm, w->group)) return 1;
    fr_call_t c;
    for (size_t i = 0, first; fr_group_next(comm, w->group, &i, &first, &c);)
        if (call_needs_mpi(comm, &c, 0)) return 1;
    return 0;
}

static void *thread_main(void *arg)
{
    struct fr_comm *comm = arg;
    struct fr_prog *P = comm->prog;
    /* A woken thread of the default policy preempts the thread that woke
     * it: the program's thread, in the middle of starting a request, would
     * wait for the whole collective before it could go on to compute. As a
     * batch thread it runs on a free core at once, or on the caller's when
     * the caller sleeps or waits. */
    struct sched_param sp = {0};
    pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
    fr_observe_thread("fastreduce progress");
    pthread_mutex_lock(&P->lock);
    while (!P->stop) {
        fr_work_t *h = P->head;
        if (h && !P->busy && !h->parked) {
            if (P->mpi_ok || !needs_mpi(comm, h)) {
                run_head(P, comm);
                continue;
            }
            /* the caller's next fr_test, fr_wait or call runs it */
            h->parked = 1;
            pthread_cond_broadcast(&P->done);
        }
        pthread_cond_wait(&P->wake, &P->lock);
    }
    pthread_mutex_unlock(&P->lock);
    return NULL;
}

/* Make the progress thread (lock held). It takes no signals: they stay
 * with the program's threads. Without a thread, requests run in callers. */
static void thread_start(struct fr_comm *comm, struct fr_prog *P)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&P->tid, NULL, thread_main, comm);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        FR_WARN(FR_SUB_COLL, "no progress thread (pthread_create: %s): requests run in fr_test and fr_wait",
                strerror(rc));
        P->caller = 1;
        return;
    }
    P->thread_on = 1;
}

static void enqueue(struct fr_prog *P, fr_work_t *w)
{
    w->next = NULL;
    w->t_issue = __atomic_load_n(&fr_trace_enabled, __ATOMIC_RELAXED) ? fr_now_ns() : 0;
    state_set(w, FR_REQ_QUEUED);
    if (P->tail) P->tail->next = w;
    else P->head = w;
    P->tail = w;
    if (P->thread_on) pthread_cond_signal(&P->wake);
}

/* Make the thread unless there is one or none is wanted (lock held). */
static void thread_wanted(struct fr_comm *comm, struct fr_prog *P)
{
    if (!P->caller && !P->thread_on) thread_start(comm, P);
}

/* Number request @p w and queue it (lock held). */
static void enqueue_request(struct fr_comm *comm, struct fr_prog *P, fr_work_t *w)
{
    w->comm = comm;
    w->number = __atomic_add_fetch(&P->numbered, 1, __ATOMIC_RELAXED);
    P->open++;
    enqueue(P, w);
}

fr_status_t fr_prog_start(struct fr_comm *comm, fr_work_t *w)
{
    struct fr_prog *P = comm->prog;
    pthread_mutex_lock(&P->lock);
    thread_wanted(comm, P);
    enqueue_request(comm, P, w);
    pthread_mutex_unlock(&P->lock);
    return FR_SUCCESS;
}

fr_status_t fr_request_start_detached(struct fr_comm *comm, const fr_call_t *call,
                                      void (*done)(void *arg, fr_status_t st, const char *detail), void *arg)
{
    struct fr_prog *P = comm->prog;
    fr_work_t *w = calloc(1, sizeof *w);
    if (!w) return FR_ERROR(FR_ERR_NO_MEMORY, "out of memory for a request");
    w->call = *call;
    w->done = done;
    w->done_arg = arg;
    pthread_mutex_lock(&P->lock);
    thread_wanted(comm, P);
    if (P->caller) {
        pthread_mutex_unlock(&P->lock);
        free(w);
        return FR_ERROR(FR_ERR_NOT_SUPPORTED, "requests of this communicator run only when the caller asks "
                        "(FASTREDUCE_PROGRESS=caller, or no progress thread)");
    }
    enqueue_request(comm, P, w);
    pthread_mutex_unlock(&P->lock);
    return FR_SUCCESS;
}

int fr_prog_thread(struct fr_comm *comm)
{
    struct fr_prog *P = comm->prog;
    pthread_mutex_lock(&P->lock);
    thread_wanted(comm, P);
    int on = P->thread_on;
    pthread_mutex_unlock(&P->lock);
    return on;
}

int fr_prog_unprompted(struct fr_comm *comm)
{
    return !comm->prog->caller && comm->prog->mpi_ok;
}

/* Whether a caller advancing @p w runs the head now (lock held). */
static int caller_runs(const struct fr_prog *P, const fr_work_t *w, int wait)
{
    if (!P->head || P->busy || state_of(w) != FR_REQ_QUEUED) return 0;
    return wait || P->caller || !P->thread_on || P->head->parked;
}

int fr_prog_advance(fr_work_t *w, int wait)
{
    if (state_of(w) == FR_REQ_DONE) return 1;
    struct fr_comm *comm = w->comm;   /* (alive: the caller holds it, fr_prog_hold) */
    struct fr_prog *P = comm->prog;
    uint64_t polls = 0;
    pthread_mutex_lock(&P->lock);
    P->waiters++;
    while (state_of(w) != FR_REQ_DONE) {
        if (P->issued) poll_issued(P);
        if (state_of(w) == FR_REQ_DONE) break;
        if (caller_runs(P, w, wait)) {
            run_head(P, comm);
            continue;
        }
        if (!wait) break;
        if (state_of(w) == FR_REQ_ISSUED) {
            /* (the GPU's work: polled, as no thread is told when it ends) */
            pthread_mutex_unlock(&P->lock);
            fr_backoff(&polls, comm->spin);
            pthread_mutex_lock(&P->lock);
            continue;
        }
        pthread_cond_wait(&P->done, &P->lock);
    }
    int done = state_of(w) == FR_REQ_DONE;
    P->waiters--;
    pthread_mutex_unlock(&P->lock);
    return done;
}

fr_status_t fr_prog_blocking(struct fr_comm *comm, fr_call_t *call, fr_group_t *group)
{
    struct fr_prog *P = comm->prog;
    /* A communicator that never had a request has no queue and no thread:
     * its blocking calls take no lock, as before requests existed (two
     * threads must not call collectives on it at once, as on an MPI
     * communicator). */
    const char *alg;
    if (!__atomic_load_n(&P->numbered, __ATOMIC_RELAXED)) return run_call(comm, call, group, &alg, 0);
    pthread_mutex_lock(&P->lock);
    if (!P->head && !P->busy) {
        /* nothing before it: the caller runs it, as without requests */
        P->busy = 1;
        pthread_mutex_unlock(&P->lock);
        fr_status_t st = run_call(comm, call, group, &alg, 0);
        pthread_mutex_lock(&P->lock);
        P->busy = 0;
        if (P->waiters) pthread_cond_broadcast(&P->done);
        if (P->head && P->thread_on) pthread_cond_signal(&P->wake);
        pthread_mutex_unlock(&P->lock);
        return st;
    }
    fr_work_t w = {.comm = comm, .group = group};
    if (call) w.call = *call;
    enqueue(P, &w);
    pthread_mutex_unlock(&P->lock);
    fr_prog_advance(&w, 1);
    /* (the progress thread may have run it: the call is this thread's all the same) */
    if (w.alg) fr_last_algorithm_set(w.alg, w.zcopy, w.cma);
    if (w.status != FR_SUCCESS) return FR_ERROR(w.status, "%s", w.detail);
    return FR_SUCCESS;
}

uint64_t fr_prog_pending(struct fr_comm *comm)
{
    struct fr_prog *P = comm->prog;
    if (!P) return 0;
    pthread_mutex_lock(&P->lock);
    if (P->issued) poll_issued(P);
    uint64_t n = P->open + (uint64_t)P->waiters;
    pthread_mutex_unlock(&P->lock);
    return n;
}

void fr_prog_hold(struct fr_comm *comm)
{
    pthread_mutex_lock(&comm->prog->lock);
    comm->prog->waiters++;
    pthread_mutex_unlock(&comm->prog->lock);
}

void fr_prog_release(struct fr_comm *comm)
{
    pthread_mutex_lock(&comm->prog->lock);
    comm->prog->waiters--;
    pthread_mutex_unlock(&comm->prog->lock);
}

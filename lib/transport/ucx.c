/* Point-to-point transfers over UCX ucp tag matching (see p2p.h). One UCP
 * context per process, shared by the communicators; one worker and one
 * endpoint per peer for each communicator. */
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>
#include "p2p.h"
#include "shm.h"
#include "mem.h"
#include "log.h"
#include "settings.h"
#include "wait.h"

struct fr_ucx {
    ucp_worker_h worker;
    ucp_ep_h    *eps;    /* [size] */
    int          size;
    int          efd;    /* the worker's event fd, -1 when it has none */
    int          failed; /* rank of the first endpoint UCX reported failed, -1 */
    ucs_status_t failed_why;
};

/* UCX reports a failed endpoint (peer error mode): noted for the message of
 * the request that fails with it. */
static void ep_failed(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    struct fr_ucx *u = arg;
    for (int r = 0; r < u->size && u->failed < 0; r++)
        if (u->eps[r] == ep) { u->failed = r; u->failed_why = status; }
}

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static ucp_context_h ctx;
static int ctx_refs;

#define TAG_FULL_MASK UINT64_MAX

/* Allocations of fr_mem_alloc registered with the context (ucp_mem_map) the
 * first time a transfer of at least REG_MIN bytes uses them, and kept until
 * they are freed (fr_mem_on_free) or the context goes: the hierarchical
 * algorithms send from and receive into them with no registration of
 * their own (NICs that need registered memory read it where it lies).
 * Under ctx_lock. */
#define REG_MIN ((size_t)8192)
typedef struct {
    char     *base;
    size_t    size;
    ucp_mem_h memh;
} reg_t;
static reg_t *regs;
static size_t nregs, capregs;

/* fr_mem_free's hook: the allocation's registration goes first. */
static void reg_drop(void *base, size_t size)
{
    (void)size;
    pthread_mutex_lock(&ctx_lock);
    for (size_t i = 0; i < nregs; i++) {
        if (regs[i].base != base) continue;
        ucp_mem_unmap(ctx, regs[i].memh);
        regs[i] = regs[--nregs];
        break;
    }
    pthread_mutex_unlock(&ctx_lock);
}

/* Every registration (ctx_lock held; before the context goes). */
static void reg_drop_all(void)
{
    for (size_t i = 0; i < nregs; i++) ucp_mem_unmap(ctx, regs[i].memh);
    free(regs);
    regs = NULL;
    nregs = capregs = 0;
}

/* The registration of the allocation that holds [buf, buf + len), made now
 * if needed; NULL for private memory, short transfers, or where UCX refuses
 * (the transfer then registers as it would anyway). */
static ucp_mem_h reg_for(const void *buf, size_t len)
{
    fr_mem_ref_t ref;
    if (len < REG_MIN || !fr_mem_find(buf, len, &ref)) return NULL;
    char *base = (char *)buf - ref.off;
    ucp_mem_h memh = NULL;
    pthread_mutex_lock(&ctx_lock);
    for (size_t i = 0; i < nregs && !memh; i++)
        if (regs[i].base == base && regs[i].size == ref.size) memh = regs[i].memh;
    if (!memh && ctx && nregs == capregs) {
        size_t cap = capregs ? 2 * capregs : 16;
        reg_t *r = realloc(regs, cap * sizeof *r);
        if (r) regs = r, capregs = cap;
    }
    if (!memh && ctx && nregs < capregs) {
        ucp_mem_map_params_t mp = {.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                                   .address = base, .length = ref.size};
        ucs_status_t us = ucp_mem_map(ctx, &mp, &memh);
        if (us == UCS_OK) {
            regs[nregs++] = (reg_t){.base = base, .size = ref.size, .memh = memh};
            FR_INFO(FR_SUB_UCX, "UCX: registered %llu bytes of shared memory (fr_mem_alloc) for transfers",
                    (unsigned long long)ref.size);
        } else {
            FR_INFO(FR_SUB_UCX, "UCX: ucp_mem_map of %llu bytes failed (%s); transfers register as usual",
                    (unsigned long long)ref.size, ucs_status_string(us));
            memh = NULL;
        }
    }
    pthread_mutex_unlock(&ctx_lock);
    return memh;
}

/* A transfer's parameters: its buffer's registration where it has one. */
static ucp_request_param_t xfer_param(const void *buf, size_t len)
{
    ucp_request_param_t p;
    p.op_attr_mask = 0;
    ucp_mem_h memh = reg_for(buf, len);
    if (memh) {
        p.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
        p.memh = memh;
    }
    return p;
}

static inline uint64_t make_tag(int sender, uint64_t seq, unsigned step)
{
    return ((uint64_t)(unsigned)sender << 40) | ((seq & 0xFFFFFFu) << 16) | (step & 0xFFFFu);
}

static fr_status_t ctx_get(void)
{
    fr_status_t st = FR_SUCCESS;
    pthread_mutex_lock(&ctx_lock);
    if (ctx_refs == 0) {
        ucp_config_t *cfg;
        /* FASTREDUCE_UCX_<NAME> steers our UCX alone (UCX_<NAME> still applies) */
        ucs_status_t us = ucp_config_read(FR_UCX_ENV_PREFIX, NULL, &cfg);
        if (us == UCS_OK) {
            ucp_params_t p;
            memset(&p, 0, sizeof p);
            p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
            p.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
            /* Each communicator has its own worker, used by one thread at a
             * time; but two communicators' workers may be used at once (by
             * progress threads, or by threads under MPI_THREAD_MULTIPLE), and
             * UCX asks for a context that allows it then. */
            p.mt_workers_shared = 1;
            us = ucp_init(&p, cfg, &ctx);
            ucp_config_release(cfg);
        }
        if (us != UCS_OK)
            st = FR_ERROR(FR_ERR_UCX, "ucp_init failed: %s", ucs_status_string(us));
        else fr_mem_on_free(reg_drop);
    }
    if (st == FR_SUCCESS) ctx_refs++;
    pthread_mutex_unlock(&ctx_lock);
    return st;
}

static void ctx_put(void)
{
    pthread_mutex_lock(&ctx_lock);
    if (ctx_refs > 0 && --ctx_refs == 0) {
        fr_mem_on_free(NULL);
        reg_drop_all();
        ucp_cleanup(ctx);
        ctx = NULL;
    }
    pthread_mutex_unlock(&ctx_lock);
}

/* This rank's worker (comm->ucx, also on failure, for fr_ucx_destroy),
 * a copy of its address in *addr (malloc'd) and the endpoint array. Local. */
static fr_status_t worker_open(struct fr_comm *comm, void **addr, size_t *addr_len)
{
    FR_CHECK(ctx_get());
    struct fr_ucx *u = calloc(1, sizeof *u);
    if (!u) { ctx_put(); return FR_ERROR(FR_ERR_NO_MEMORY, "UCX: out of memory"); }
    comm->ucx = u;
    u->size = comm->size;
    u->failed = -1;
    u->eps = calloc((size_t)comm->size, sizeof(ucp_ep_h));
    if (!u->eps) return FR_ERROR(FR_ERR_NO_MEMORY, "UCX: out of memory");
    ucp_worker_params_t wp;
    memset(&wp, 0, sizeof wp);
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    /* one thread at a time, not always the one that created it (a
     * communicator may move between threads under MPI_THREAD_SERIALIZED or
     * MULTIPLE); UCX takes a lock only for UCS_THREAD_MODE_MULTI */
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    ucs_status_t us = ucp_worker_create(ctx, &wp, &u->worker);
    if (us != UCS_OK) {
        u->worker = NULL;
        return FR_ERROR(FR_ERR_UCX, "ucp_worker_create: %s", ucs_status_string(us));
    }
    if (ucp_worker_get_efd(u->worker, &u->efd) != UCS_OK) u->efd = -1;
    ucp_address_t *a;
    size_t len;
    us = ucp_worker_get_address(u->worker, &a, &len);
    if (us != UCS_OK) return FR_ERROR(FR_ERR_UCX, "ucp_worker_get_address: %s", ucs_status_string(us));
    *addr = len <= INT_MAX ? malloc(len ? len : 1) : NULL;
    if (*addr) memcpy(*addr, a, len);
    ucp_worker_release_address(u->worker, a);
    if (!*addr) return FR_ERROR(FR_ERR_NO_MEMORY, "UCX: no memory for a worker address of %zu bytes", len);
    *addr_len = len;
    return FR_SUCCESS;
}

/* One endpoint per rank, to the addresses in @p all (rank r's at
 * all + displs[r]). Local. */
static fr_status_t eps_open(struct fr_comm *comm, const char *all, const int *displs)
{
    struct fr_ucx *u = comm->ucx;
    for (int r = 0; r < comm->size; r++) {
        ucp_ep_params_t ep;
        memset(&ep, 0, sizeof ep);
        ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
        ep.address = (const ucp_address_t *)(all + displs[r]);
        /* Under a timeout, a peer's death must be an error we return, not
         * UCX's fatal one: peer error handling (which some transports lack,
         * so it is asked for only then). */
        if (comm->timeout_ns) {
            ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
            ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
            ep.err_handler.cb = ep_failed;
            ep.err_handler.arg = u;
        }
        ucs_status_t us = ucp_ep_create(u->worker, &ep, &u->eps[r]);
        if (us != UCS_OK) {
            u->eps[r] = NULL;
            return FR_ERROR(FR_ERR_UCX, "ucp_ep_create to rank %d: %s", r, ucs_status_string(us));
        }
    }
    return FR_SUCCESS;
}

/* Complete a collective request of the set-up, bounded like every wait;
 * @p block is the heap block it uses, freed here unless a timeout left it
 * to MPI. */
static fr_status_t setup_wait(struct fr_comm *comm, int rc, MPI_Request *req, const char *what, void *block)
{
    if (rc != MPI_SUCCESS) {
        free(block);
        return fr_comm_break(comm, FR_ERROR(FR_ERR_MPI, "UCX set-up: %s failed", what));
    }
    fr_status_t st = fr_wait_mpi(comm, req, what, block);
    if (st != FR_SUCCESS && comm->mpi_left) return st;   /* (the block is MPI's now) */
    if (st != FR_SUCCESS) free(block);
    return st;
}

/* Every rank's (status, address length) in pairs[2r], pairs[2r+1]: the
 * outcome of worker_open and the lengths exchanged in one collective.
 * *pairs: NULL when the exchange itself failed (the communicator is then
 * broken); else the first failed rank's status (*who: its rank) or
 * FR_SUCCESS. */
static fr_status_t exchange_status(struct fr_comm *comm, fr_status_t mine, size_t len, int **pairs, int *who)
{
    int n = comm->size, *p = malloc(2 * sizeof(int) * (size_t)n);
    *pairs = NULL;
    if (!p) return fr_comm_break(comm, FR_ERROR(FR_ERR_NO_MEMORY, "UCX set-up: out of memory"));
    p[2 * comm->rank] = (int)mine;
    p[2 * comm->rank + 1] = (int)len;
    MPI_Request req;
    int rc = PMPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, p, 2, MPI_INT, comm->mpi, &req);
    FR_CHECK(setup_wait(comm, rc, &req, "MPI_Iallgather of the UCX worker outcomes", p));
    *pairs = p;
    for (int r = 0; r < n; r++)
        if (p[2 * r] != FR_SUCCESS) { *who = r; return (fr_status_t)p[2 * r]; }
    return FR_SUCCESS;
}

/* Every rank's worker address, exchanged in one block [lens][displs][bytes]
 * (it outlives this frame if a timeout leaves it to MPI); then the
 * endpoints, and their outcome agreed. */
static fr_status_t exchange_addresses(struct fr_comm *comm, const int *pairs, const void *addr)
{
    int n = comm->size;
    size_t total = 0;
    for (int r = 0; r < n; r++) total += (size_t)pairs[2 * r + 1];
    if (total > INT_MAX)
        return fr_agree_bounded(comm, FR_ERROR(FR_ERR_UCX, "UCX worker addresses of %zu bytes in all", total),
                                "UCX endpoint creation");
    int *lens = malloc(2 * sizeof(int) * (size_t)n + total), *displs = lens + n;
    if (!lens) return fr_comm_break(comm, FR_ERROR(FR_ERR_NO_MEMORY, "UCX set-up: out of memory"));
    char *all = (char *)(displs + n);
    for (int r = 0, at = 0; r < n; r++) { lens[r] = pairs[2 * r + 1]; displs[r] = at; at += lens[r]; }
    memcpy(all + displs[comm->rank], addr, (size_t)lens[comm->rank]);
    MPI_Request req;
    int rc = PMPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, lens, displs, MPI_BYTE, comm->mpi, &req);
    FR_CHECK(setup_wait(comm, rc, &req, "MPI_Iallgatherv of the UCX worker addresses", lens));
    fr_status_t st = eps_open(comm, all, displs);
    free(lens);
    return fr_agree_bounded(comm, st, "UCX endpoint creation");
}

/* See p2p.h. The ranks agree in every collective step, so a failure on
 * one rank fails the set-up on all; one that broke the communicator (a
 * timeout, MPI failing) leaves it broken. */
fr_status_t fr_ucx_setup(struct fr_comm *comm)
{
    if (comm->ucx_state > 0) return FR_SUCCESS;
    if (comm->ucx_state < 0)
        return FR_ERROR(FR_ERR_UCX, "this communicator has no UCX: its set-up failed at an earlier call (%s)",
                        comm->ucx_why);
    void *addr = NULL;
    size_t len = 0;
    int *pairs = NULL, who = -1;
    fr_status_t mine = worker_open(comm, &addr, &len);
    fr_status_t st = exchange_status(comm, mine, len, &pairs, &who);
    if (st == FR_SUCCESS) st = exchange_addresses(comm, pairs, addr);
    else if (pairs && mine == FR_SUCCESS)
        st = FR_ERROR(st, "UCX set-up failed on rank %d (%s)", who, fr_strerror(st));
    else if (pairs)
        st = mine;
    free(addr);
    free(pairs);
    if (st == FR_SUCCESS) {
        comm->ucx_state = 1;
        FR_INFO(FR_SUB_UCX, "UCX worker ready, %d endpoints", comm->size);
    } else if (!comm->broken) {
        /* (every rank failed alike: later calls that need UCX fail at once) */
        comm->ucx_state = -1;
        snprintf(comm->ucx_why, sizeof comm->ucx_why, "%s", fr_last_error());
        fr_ucx_destroy(comm);
        FR_WARN(FR_SUB_UCX, "%s", comm->ucx_why);
    }
    return st;
}

/* Receive and drop what peers sent that nobody will receive now (a broken
 * communicator's late messages), so that the worker goes empty. */
static void drain(struct fr_ucx *u)
{
    ucp_tag_recv_info_t info;
    ucp_tag_message_h msg;
    for (int n = 0; n < 1024 && (msg = ucp_tag_probe_nb(u->worker, 0, 0, 1, &info)) != NULL; n++) {
        void *sink = malloc(info.length ? info.length : 1);
        if (!sink) return;
        ucp_request_param_t p;
        p.op_attr_mask = 0;
        void *r = ucp_tag_msg_recv_nbx(u->worker, sink, info.length, msg, &p);
        if (UCS_PTR_IS_PTR(r)) {
            for (int i = 0; i < 100000 && ucp_request_check_status(r) == UCS_INPROGRESS; i++)
                ucp_worker_progress(u->worker);
            int busy = ucp_request_check_status(r) == UCS_INPROGRESS;
            ucp_request_free(r);
            /* (still receiving: UCX may write the sink until the worker goes, so it is left) */
            if (busy) return;
        }
        free(sink);
    }
}

void fr_ucx_destroy(struct fr_comm *comm)
{
    struct fr_ucx *u = comm->ucx;
    if (!u) return;
    if (comm->broken && u->worker) drain(u);
    if (u->eps) {
        /* Every collective completed on every rank before destroy (the caller
         * synchronises first), so a forced, local close loses nothing. (UCX
         * documents a forced close as possibly causing transport errors on
         * the peer unless every endpoint has peer error handling, which this
         * one has only under a timeout. A flushing close was tried instead
         * (2026-12-05): over TCP it waits on peers whose workers are already
         * gone, logs "error during flush: Endpoint timeout" and made a test
         * of many communicators time out; making the peers stay until every
         * flush is done would need a second synchronisation that a rank whose
         * communicator broke alone cannot join.) */
        for (int r = 0; r < comm->size; r++) {
            if (!u->eps[r]) continue;
            ucp_request_param_t p;
            memset(&p, 0, sizeof p);
            p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
            p.flags = UCP_EP_CLOSE_FLAG_FORCE;
            void *req = ucp_ep_close_nbx(u->eps[r], &p);
            if (UCS_PTR_IS_PTR(req)) {
                while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(u->worker);
                ucp_request_free(req);
            }
        }
        free(u->eps);
    }
    if (u->worker) ucp_worker_destroy(u->worker);
    free(u);
    comm->ucx = NULL;
    ctx_put();
}

static fr_status_t start(void *ret, int recv, int peer, unsigned step, fr_req_t *req)
{
    *req = (fr_req_t){.peer = peer, .step = step, .recv = recv};
    if (UCS_PTR_IS_ERR(ret))
        return FR_ERROR(FR_ERR_UCX, "UCX %s rank %d: %s", recv ? "receive from" : "send to", peer,
                        ucs_status_string(UCS_PTR_STATUS(ret)));
    req->ucx = ret; /* NULL when it completed at once */
    return FR_SUCCESS;
}

/* A communicator whose worker is gone (broken) or not made moves nothing. */
static fr_status_t gone(struct fr_comm *comm)
{
    if (comm->broken)
        return FR_ERROR(comm->broken, "the communicator's UCX worker is closed: %s", comm->broken_why);
    return FR_ERROR(FR_ERR_INTERNAL, "no UCX worker: the algorithm %s moves data by UCX but does not say so "
                    "(fr_alg_t.needs lacks FR_NEEDS_UCX)", comm->cur_alg ? comm->cur_alg : "?");
}

fr_status_t fr_p2p_isend(struct fr_comm *comm, int peer, unsigned step, const void *buf, size_t len,
                         fr_req_t *req)
{
    if (!comm->ucx) return gone(comm);
    ucp_request_param_t p = xfer_param(buf, len);
    void *r = ucp_tag_send_nbx(comm->ucx->eps[peer], buf, len, make_tag(comm->rank, comm->seq, step), &p);
    return start(r, 0, peer, step, req);
}

fr_status_t fr_p2p_irecv(struct fr_comm *comm, int peer, unsigned step, void *buf, size_t len,
                         fr_req_t *req)
{
    if (!comm->ucx) return gone(comm);
    ucp_request_param_t p = xfer_param(buf, len);
    void *r = ucp_tag_recv_nbx(comm->ucx->worker, buf, len, make_tag(peer, comm->seq, step), TAG_FULL_MASK, &p);
    return start(r, 1, peer, step, req);
}

/* "a receive from" / "a send to", for the messages naming a request's peer. */
static const char *req_kind(const fr_req_t *r) { return r->recv ? "a receive from" : "a send to"; }

/* A wait that fails hands its requests back first: the receives are
 * cancelled and every request freed, so that nothing of this call stays
 * posted when the communicator's worker goes (peers' late messages then
 * find nothing to land in). */
static void release(struct fr_comm *comm, fr_req_t *reqs, int n)
{
    for (int i = 0; i < n; i++) {
        if (!reqs[i].ucx) continue;
        if (reqs[i].recv) ucp_request_cancel(comm->ucx->worker, reqs[i].ucx);
        ucp_request_free(reqs[i].ucx);
        reqs[i].ucx = NULL;
    }
    for (int i = 0; i < 16; i++) ucp_worker_progress(comm->ucx->worker);
}

/* The requests still pending when a wait timed out, for its message. */
static fr_status_t p2p_timeout(struct fr_comm *comm, fr_req_t *reqs, int n)
{
    char peers[512] = "", step[64] = "";
    size_t at = 0;
    int shown = 0;
    for (int i = 0; i < n; i++) {
        if (!reqs[i].ucx || ucp_request_check_status(reqs[i].ucx) != UCS_INPROGRESS) continue;
        if (!shown) snprintf(step, sizeof step, "UCX step %u", reqs[i].step);
        if (++shown > 8) { snprintf(peers + at, sizeof peers - at, ", ..."); break; }
        at += (size_t)snprintf(peers + at, sizeof peers - at, "%s%s rank %d", shown > 1 ? ", " : "",
                               req_kind(&reqs[i]), reqs[i].peer);
        if (at >= sizeof peers) break;
    }
    if (!shown) return FR_SUCCESS;   /* (all completed as the clock ran out: no timeout) */
    release(comm, reqs, n);
    return fr_wait_timeout(comm, step, peers);
}

/* One look at @p n requests: frees the completed ones and sets *pending and
 * *done (how many completed now); a failed one fails the call. */
static fr_status_t scan(struct fr_comm *comm, fr_req_t *reqs, int n, int *pending, int *done)
{
    fr_status_t st = FR_SUCCESS;
    char how[192], step[32], peer[64];
    *pending = *done = 0;
    for (int i = 0; i < n; i++) {
        if (!reqs[i].ucx) continue;
        ucs_status_t s = ucp_request_check_status(reqs[i].ucx);
        if (s == UCS_INPROGRESS) { ++*pending; continue; }
        ++*done;
        if (s != UCS_OK && st == FR_SUCCESS) {
            st = FR_ERR_UCX;
            snprintf(how, sizeof how, "failed: UCX reports %s", ucs_status_string(s));
            if (comm->ucx->failed >= 0)
                snprintf(how + strlen(how), sizeof how - strlen(how), " (the endpoint to rank %d failed: "
                         "that rank died, or gave up on this call)", comm->ucx->failed);
            snprintf(step, sizeof step, "UCX step %u", reqs[i].step);
            snprintf(peer, sizeof peer, "%s rank %d", req_kind(&reqs[i]), reqs[i].peer);
        }
        ucp_request_free(reqs[i].ucx);
        reqs[i].ucx = NULL;
    }
    /* (a failed transfer fails the call: the rest need not finish) */
    if (st != FR_SUCCESS) {
        release(comm, reqs, n);
        return fr_wait_fail(comm, st, how, step, peer);
    }
    return FR_SUCCESS;
}

fr_status_t fr_p2p_test(struct fr_comm *comm, fr_req_t *reqs, int n, int *complete)
{
    if (!comm->ucx) return gone(comm);
    int pending, done;
    ucp_worker_progress(comm->ucx->worker);
    FR_CHECK(scan(comm, reqs, n, &pending, &done));
    *complete = !pending;
    return FR_SUCCESS;
}

fr_status_t fr_p2p_wait(struct fr_comm *comm, fr_req_t *reqs, int n)
{
    if (!comm->ucx) return gone(comm);
    ucp_worker_h w = comm->ucx->worker;
    fr_wait_t wt = FR_WAIT_INIT;
    int pending, done, expired = 0;
    unsigned passes = 0;
    for (;;) {
        FR_CHECK(scan(comm, reqs, n, &pending, &done));
        if (!pending) {
            fr_wait_done(&wt);
            return FR_SUCCESS;
        }
        if (!wt.trace_ns) wt.trace_ns = fr_trace_begin();
        /* a completed request is progress: the timeout counts from it,
         * also where the clock had just run out */
        if (done) {
            wt.start_ns = 0;
            expired = 0;
        }
        /* (expired at the last pass, and this scan found them still pending) */
        if (expired) {
            FR_CHECK(p2p_timeout(comm, reqs, n));
            expired = 0;
            wt.start_ns = 0;
            continue;
        }
        if (!ucp_worker_progress(w)) {
            /* Past the spin, sleep until the network has something (at most
             * 1 ms): a yielding rank would wait for the scheduler instead. */
            if (comm->ucx->efd >= 0 && wt.polls++ > comm->spin) {
                if (ucp_worker_arm(w) == UCS_OK) {
                    struct pollfd pf = {.fd = comm->ucx->efd, .events = POLLIN};
                    poll(&pf, 1, 1);
                }
            } else {
                fr_backoff(&wt.polls, comm->spin);
            }
        }
        /* (checked whether or not the worker had other work: activity that
         * is not ours must not keep the wait alive, so every 1024th pass
         * reads the clock too, as polls count only the idle ones) */
        if ((fr_wait_due(comm, &wt) || (comm->timeout_ns && !(++passes & 1023u))) && fr_wait_expired(comm, &wt))
            expired = 1;
    }
}

fr_status_t fr_p2p_sendrecv(struct fr_comm *comm, int dst, const void *sbuf, size_t slen,
                            int src, void *rbuf, size_t rlen, unsigned step)
{
    fr_req_t r[2] = {FR_REQ_INIT, FR_REQ_INIT};
    fr_status_t st = FR_SUCCESS;
    if (src >= 0) st = fr_p2p_irecv(comm, src, step, rbuf, rlen, &r[0]);
    if (st == FR_SUCCESS && dst >= 0) st = fr_p2p_isend(comm, dst, step, sbuf, slen, &r[1]);
    if (st != FR_SUCCESS) {
        /* (a send that could not start: its receive is not waited for) */
        if (comm->ucx) release(comm, r, 2);
        return st;
    }
    return fr_p2p_wait(comm, r, 2);
}

fr_status_t fr_p2p_send(struct fr_comm *comm, int dst, const void *buf, size_t len, unsigned step)
{
    return fr_p2p_sendrecv(comm, dst, buf, len, -1, NULL, 0, step);
}

fr_status_t fr_p2p_recv(struct fr_comm *comm, int src, void *buf, size_t len, unsigned step)
{
    return fr_p2p_sendrecv(comm, -1, NULL, 0, src, buf, len, step);
}

/* Bounded waits, the broken state and the argument check (see wait.h). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "wait.h"
#include "agree.h"
#include "hwtopo.h"
#include "log.h"
#include "p2p.h"
#include "settings.h"
#include "shm.h"

/* A spinning core tells the CPU it waits (a sibling thread gets the core). */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Spin @p spin polls, then yield at each: oversubscribed ranks must let the
 * rank they wait for run. */
void fr_backoff(uint64_t *polls, uint64_t spin)
{
    if (++*polls > spin) sched_yield();
    else cpu_relax();
}

fr_status_t fr_wait_setup(struct fr_comm *comm)
{
    double t = comm->set.timeout_s;
    /* Rank 0's settings hold on every rank: ranks that bounded their waits
     * differently would call different MPI collectives (the mpi algorithms,
     * the check's agreement) and make UCX endpoints of different modes. */
    uint64_t mine[2] = {(uint64_t)(t * 1e9), comm->set.check != 0}, all[2];
    if (t > 0 && !mine[0]) mine[0] = 1;
    memcpy(all, mine, sizeof all);
    if (PMPI_Bcast(all, 2, MPI_UINT64_T, 0, comm->mpi) != MPI_SUCCESS)
        return FR_ERROR(FR_ERR_MPI, "fr_comm_create: MPI_Bcast of FASTREDUCE_TIMEOUT and _CHECK failed");
    if (mine[0] != all[0] || mine[1] != all[1])
        FR_WARN(FR_SUB_INIT, "FASTREDUCE_TIMEOUT / FASTREDUCE_CHECK differ from rank 0's here; rank 0's hold "
                "(timeout %.3g s, check %d)", (double)all[0] / 1e9, (int)all[1]);
    comm->timeout_ns = all[0];
    comm->check = (int)all[1];
    return FR_SUCCESS;
}

int fr_wait_expired(const struct fr_comm *comm, fr_wait_t *w)
{
    uint64_t t = fr_now_ns();
    if (!w->start_ns) { w->start_ns = t; return 0; }
    return t - w->start_ns >= comm->timeout_ns;
}

int fr_wait_poll(const struct fr_comm *comm, fr_wait_t *w)
{
    if (!w->polls && !w->trace_ns) w->trace_ns = fr_trace_begin();
    fr_backoff(&w->polls, comm->spin);
    return fr_wait_due(comm, w) && fr_wait_expired(comm, w);
}

fr_status_t fr_comm_break(struct fr_comm *comm, fr_status_t st)
{
    if (st == FR_SUCCESS || comm->broken) return st;
    comm->broken = st;
    snprintf(comm->broken_why, sizeof comm->broken_why, "%s", fr_last_error());
    /* No message of the failed call may land in a user buffer later: the
     * worker goes now, with every receive still posted. */
    fr_ucx_destroy(comm);
    return st;
}

void fr_rank_list(const int *ranks, int n, char *buf, size_t len)
{
    int at = snprintf(buf, len, "rank%s ", n > 1 ? "s" : "");
    if (at >= 0 && (size_t)at < len) fr_topo_ranges(ranks, n, buf + at, len - (size_t)at);
}

fr_status_t fr_wait_fail(struct fr_comm *comm, fr_status_t status, const char *how, const char *step,
                         const char *peers)
{
    const fr_call_t *c = comm->cur;
    char what[160] = "a collective";
    if (c)
        snprintf(what, sizeof what, "%s #%lu (algorithm %s, %zu bytes of %s)", fr_coll_name(c->coll),
                 (unsigned long)comm->seq, comm->cur_alg ? comm->cur_alg : "?", c->bytes, fr_dtype_name(c->dtype));
    fr_status_t st = FR_ERROR(status, "%s %s at %s, waiting for %s; this communicator is unusable now (destroy it)",
                              what, how, step, peers);
    FR_WARN(FR_SUB_COLL, "%s", fr_last_error());
    return fr_comm_break(comm, st);
}

fr_status_t fr_wait_timeout(struct fr_comm *comm, const char *step, const char *peers)
{
    char how[64];
    snprintf(how, sizeof how, "timed out: no progress for %.1f s", (double)comm->timeout_ns / 1e9);
    return fr_wait_fail(comm, FR_ERR_TIMED_OUT, how, step, peers);
}

/* Requests a timeout gave up on, with the heap block each uses and its MPI
 * communicator: MPI may still complete them (a late rank arriving), and
 * then the block is freed, and the communicator once its fastreduce
 * communicator is gone and no other request uses it. Kept in a list so
 * that nothing is lost track of. */
typedef struct fr_left {
    MPI_Request     req;
    void           *buf;
    MPI_Comm        comm;
    int             released;  /* the fastreduce communicator is destroyed */
    struct fr_left *next;
} fr_left_t;
static fr_left_t *left;
static pthread_mutex_t left_lock = PTHREAD_MUTEX_INITIALIZER;

static void leave(MPI_Request req, void *buf, MPI_Comm comm)
{
    fr_left_t *l = malloc(sizeof *l);
    if (!l) return;  /* (then the block is lost: it must not be freed under MPI) */
    *l = (fr_left_t){.req = req, .buf = buf, .comm = comm};
    pthread_mutex_lock(&left_lock);
    l->next = left;
    left = l;
    pthread_mutex_unlock(&left_lock);
}

void fr_mpi_left_reap(MPI_Comm released)
{
    if (fr_mpi_ready() != FR_SUCCESS) return;
    pthread_mutex_lock(&left_lock);
    for (fr_left_t *l = left; l; l = l->next)
        if (released != MPI_COMM_NULL && l->comm == released) l->released = 1;
    /* communicators to free once the lock is dropped (MPI_Comm_free runs
     * attribute callbacks, which may come back here) */
    MPI_Comm gone[16];
    int ngone = 0, released_used = 0;
    for (fr_left_t **p = &left; *p;) {
        fr_left_t *l = *p;
        int done = 0;
        if (PMPI_Test(&l->req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) { p = &l->next; continue; }
        free(l->buf);
        l->buf = NULL;
        int used = 0;
        for (fr_left_t *o = left; o; o = o->next) used |= o != l && o->comm == l->comm;
        int frees = l->released && !used && l->comm != released;
        /* With gone[] full, an entry whose communicator is to be freed
         * stays, done (its request is MPI_REQUEST_NULL now), so that the
         * next reap frees it rather than nobody. */
        if (frees && ngone == (int)(sizeof gone / sizeof gone[0])) { p = &l->next; continue; }
        if (frees) gone[ngone++] = l->comm;
        *p = l->next;
        free(l);
    }
    for (fr_left_t *o = left; o; o = o->next) released_used |= released != MPI_COMM_NULL && o->comm == released;
    pthread_mutex_unlock(&left_lock);
    /* (the communicator being destroyed, when nothing of MPI's uses it any more) */
    if (released != MPI_COMM_NULL && !released_used) PMPI_Comm_free(&released);
    for (int i = 0; i < ngone; i++) PMPI_Comm_free(&gone[i]);
}

fr_status_t fr_wait_mpi(struct fr_comm *comm, MPI_Request *req, const char *what, void *buf)
{
    /* (an MPI failure in the middle of a collective leaves the ranks out of step too) */
    if (!comm->timeout_ns) {
        if (PMPI_Wait(req, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return fr_comm_break(comm, FR_ERROR(FR_ERR_MPI, "%s failed", what));
        return FR_SUCCESS;
    }
    fr_wait_t w = FR_WAIT_INIT;
    for (;;) {
        int done = 0;
        if (PMPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return fr_comm_break(comm, FR_ERROR(FR_ERR_MPI, "%s failed", what));
        if (done) return FR_SUCCESS;
        if (fr_wait_poll(comm, &w)) {
            char step[96];
            snprintf(step, sizeof step, "the MPI library's %s", what);
            /* A collective request cannot be cancelled or freed: it stays
             * with MPI, with its block and communicator (fr_mpi_left_reap). */
            leave(*req, buf, comm->mpi);
            comm->mpi_left = 1;
            return fr_wait_timeout(comm, step, "every rank of the communicator (MPI does not say which)");
        }
    }
}

fr_status_t fr_wait_mpi_block(struct fr_comm *comm, MPI_Request *req, const char *what, void *buf)
{
    fr_status_t st = fr_wait_mpi(comm, req, what, buf);
    if (st != FR_SUCCESS && st != FR_ERR_TIMED_OUT) free(buf);
    return st;
}

fr_status_t fr_agree_bounded(struct fr_comm *comm, fr_status_t st, const char *what)
{
    /* (a failure here is this rank's alone, the others wait in the
     * reduction: it breaks the communicator) */
    int *b = malloc(2 * sizeof(int));  /* [mine, worst] (the request may outlive this frame) */
    if (!b) return fr_comm_break(comm, FR_ERROR(FR_ERR_NO_MEMORY, "%s: no memory to agree on the outcome", what));
    b[0] = (int)st;
    MPI_Request req;
    if (PMPI_Iallreduce(b, b + 1, 1, MPI_INT, MPI_MAX, comm->mpi, &req) != MPI_SUCCESS) {
        free(b);
        return fr_comm_break(comm, FR_ERROR(FR_ERR_MPI, "%s: MPI_Iallreduce failed while agreeing on the outcome",
                                            what));
    }
    FR_CHECK(fr_wait_mpi_block(comm, &req, "MPI_Iallreduce agreeing on an outcome", b));
    int worst = b[1];
    free(b);
    return fr_agreed(st, worst, what);
}

/* ---- FASTREDUCE_CHECK ---------------------------------------------------- */

enum { F_COLL, F_COUNT, F_DTYPE, F_OP, F_ROOT, F_MEM, F_ALG, NF };
static const char *const field_name[NF] = {"collective", "count", "datatype", "op", "root", "memory", "algorithm"};

static void field_text(int f, int64_t v, fr_name_fn alg_name, char *buf, size_t len)
{
    switch (f) {
    case F_COLL:  snprintf(buf, len, "%s", v >= 0 && v < FR_COLL_COUNT ? fr_coll_name((fr_coll_t)v) : "?"); break;
    case F_DTYPE: snprintf(buf, len, "%s", fr_dtype_name((fr_dtype_t)v)); break;
    case F_OP:    snprintf(buf, len, "%s", v < 0 ? "none (bcast)" : fr_op_name((fr_op_t)v)); break;
    case F_ROOT:  if (v < 0) snprintf(buf, len, "none (allreduce)"); else snprintf(buf, len, "%lld", (long long)v); break;
    case F_MEM:   snprintf(buf, len, "%s", v == FR_MEM_CUDA ? "device" : "host"); break;
    case F_ALG:   snprintf(buf, len, "%s", alg_name((int)v)); break;
    default:      snprintf(buf, len, "%lld", (long long)v); break;
    }
}

/* Append to @p msg, for field @p f, each distinct value and the ranks holding
 * it: "count: 1000 on ranks 0-2, 999 on rank 3". */
static void describe(const int64_t *all, int n, int f, fr_name_fn alg_name, int *ranks, char *msg, size_t len)
{
    size_t at = strlen(msg);
    at += (size_t)snprintf(msg + at, at < len ? len - at : 0, "%s%s:", at ? "; " : "", field_name[f]);
    int shown = 0;
    for (int r = 0; r < n && at < len; r++) {
        int64_t v = all[(size_t)r * NF + f];
        int seen = 0;
        for (int q = 0; q < r && !seen; q++) seen = all[(size_t)q * NF + f] == v;
        if (seen) continue;
        if (++shown > 4) { at += (size_t)snprintf(msg + at, len - at, " ..."); break; }
        int k = 0;
        for (int q = r; q < n; q++)
            if (all[(size_t)q * NF + f] == v) ranks[k++] = q;
        char val[48], rl[128];
        field_text(f, v, alg_name, val, sizeof val);
        fr_rank_list(ranks, k, rl, sizeof rl);
        at += (size_t)snprintf(msg + at, len - at, "%s %s on %s", shown > 1 ? "," : "", val, rl);
    }
}

fr_status_t fr_check_agreement(struct fr_comm *comm, const fr_call_t *call, int alg, fr_name_fn alg_name)
{
    /* (heap blocks: a timed-out request keeps using them after this returns) */
    struct { int64_t v[2 * NF], ext[2 * NF]; int ok, all_ok; } *b = malloc(sizeof *b);
    if (!b) return fr_comm_break(comm, FR_ERROR(FR_ERR_NO_MEMORY, "FASTREDUCE_CHECK: out of memory"));
    const int64_t mine[NF] = {
        [F_COLL] = call->coll, [F_COUNT] = (int64_t)call->count, [F_DTYPE] = call->dtype,
        [F_OP] = call->coll == FR_COLL_ALLREDUCE ? (int64_t)call->op : -1,
        [F_ROOT] = call->coll == FR_COLL_BCAST ? call->root : -1, [F_MEM] = call->mem, [F_ALG] = alg,
    };
    /* One reduction gives every field's largest and (negated) smallest value. */
    for (int i = 0; i < NF; i++) { b->v[i] = mine[i]; b->v[NF + i] = -mine[i]; }
    MPI_Request req;
    if (PMPI_Iallreduce(b->v, b->ext, 2 * NF, MPI_INT64_T, MPI_MAX, comm->mpi, &req) != MPI_SUCCESS) {
        free(b);
        return fr_comm_break(comm, FR_ERROR(FR_ERR_MPI, "FASTREDUCE_CHECK: MPI_Iallreduce failed"));
    }
    FR_CHECK(fr_wait_mpi_block(comm, &req, "MPI_Iallreduce of FASTREDUCE_CHECK", b));
    unsigned differ = 0;
    for (int i = 0; i < NF; i++)
        if (b->ext[i] != -b->ext[NF + i]) differ |= 1u << i;
    if (!differ) { free(b); return FR_SUCCESS; }
    /* (calls of different collectives differ in op, root and algorithm too: saying so adds nothing) */
    if (differ & (1u << F_COLL)) differ &= ~((1u << F_OP) | (1u << F_ROOT) | (1u << F_ALG));

    /* They differ: every rank learns every rank's values, to say who has
     * what; [n * NF] holds this rank's own, the gather's send buffer. */
    int n = comm->size;
    int64_t *all = malloc(sizeof(int64_t) * NF * ((size_t)n + 1));
    int *ranks = malloc(sizeof(int) * (size_t)n);
    b->ok = all && ranks;
    b->all_ok = 0;
    fr_status_t st = FR_SUCCESS;
    if (PMPI_Iallreduce(&b->ok, &b->all_ok, 1, MPI_INT, MPI_MIN, comm->mpi, &req) != MPI_SUCCESS)
        st = FR_ERROR(FR_ERR_MPI, "FASTREDUCE_CHECK: MPI_Iallreduce failed");
    else if ((st = fr_wait_mpi_block(comm, &req, "MPI_Iallreduce of FASTREDUCE_CHECK", b)) != FR_SUCCESS)
        b = NULL;  /* (left to MPI, or freed) */
    int gathered = st == FR_SUCCESS && b->all_ok == 1;
    if (gathered) {
        memcpy(all + (size_t)n * NF, mine, sizeof mine);
        if (PMPI_Iallgather(all + (size_t)n * NF, NF, MPI_INT64_T, all, NF, MPI_INT64_T, comm->mpi, &req) !=
            MPI_SUCCESS)
            st = FR_ERROR(FR_ERR_MPI, "FASTREDUCE_CHECK: MPI_Iallgather failed");
        else if ((st = fr_wait_mpi_block(comm, &req, "MPI_Iallgather of FASTREDUCE_CHECK", all)) != FR_SUCCESS)
            all = NULL;  /* (left to MPI, or freed) */
        gathered = st == FR_SUCCESS;
    }
    char msg[768] = "";
    for (int f = 0; f < NF; f++) {
        if (!(differ & (1u << f))) continue;
        if (gathered) { describe(all, n, f, alg_name, ranks, msg, sizeof msg); continue; }
        size_t at = strlen(msg);
        snprintf(msg + at, sizeof msg - at, "%s%s", at ? ", " : "", field_name[f]);
    }
    free(all);
    free(ranks);
    free(b);
    if (st != FR_SUCCESS) return comm->broken ? comm->broken : fr_comm_break(comm, st);
    char mine_txt[48];
    field_text(F_COLL, mine[F_COLL], alg_name, mine_txt, sizeof mine_txt);
    st = FR_ERROR(FR_ERR_MISMATCH, "FASTREDUCE_CHECK: call #%lu (%s here): the ranks disagree: %s; nothing was sent",
                  (unsigned long)comm->seq, mine_txt, msg);
    if (comm->rank == 0) FR_WARN(FR_SUB_COLL, "%s", fr_last_error());
    return st;
}

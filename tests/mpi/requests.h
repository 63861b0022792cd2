/* Helpers of the request tests (mpi/test_requests.c, mpi/test_reqfault.c).
 *
 * An rq_op_t is one collective with buffers of its own and its expected
 * result from reference.h (computed on every rank, never with MPI or the
 * library): started as a request (rq_start) or made blocking (rq_blocking),
 * then checked (rq_ok: status, result, send buffer, guard bytes).
 * rq_complete() completes a set of started requests in an order other than
 * the one they were started in, the same on every rank, with fr_waitall,
 * fr_wait or an fr_test loop. Nothing here calls tu_fail(), so threads may
 * use it: callers turn a false return and its reason into a failure.
 * Also: MPI's thread level from a word (--thread-level), whether the
 * library runs requests in the caller (FASTREDUCE_PROGRESS=caller), and
 * communicators made and destroyed as a test of their own.
 */
#ifndef FR_TEST_REQUESTS_H
#define FR_TEST_REQUESTS_H

#include <sched.h>
#include <strings.h>
#include "testutil.h"
#include "reference.h"

enum { RQ_AR = 0, RQ_BC = 1 };

typedef struct rq_op {
    int            kind;                 /* RQ_AR or RQ_BC */
    fr_dtype_t     dt;
    fr_op_t        op;                   /* allreduce only */
    size_t         count;
    int            inplace;              /* allreduce only */
    int            root;                 /* bcast only */
    unsigned char *input, *expect;       /* this rank's input; what every rank must end with */
    unsigned char *sbuf, *rbuf;          /* rbuf: the result (a bcast's only buffer) */
    fr_request_t   req;
    fr_status_t    st;                   /* of the start, then of the completion */
} rq_op_t;

/* The thread levels by name, in MPI's order (MPI_THREAD_SINGLE first). */
static const char *const rq_level_names[] = { "single", "funneled", "serialized", "multiple" };

/* MPI_THREAD_* named by @p word, or -1. */
TU_FN int rq_thread_level(const char *word)
{
    static const int levels[] = { MPI_THREAD_SINGLE, MPI_THREAD_FUNNELED, MPI_THREAD_SERIALIZED,
                                  MPI_THREAD_MULTIPLE };
    for (int i = 0; i < 4; i++)
        if (!strcmp(word, rq_level_names[i])) return levels[i];
    return -1;
}

/* The name of MPI_THREAD_* @p level. */
TU_FN const char *rq_level_name(int level)
{
    return level == MPI_THREAD_MULTIPLE ? "multiple" : level == MPI_THREAD_SERIALIZED ? "serialized"
         : level == MPI_THREAD_FUNNELED ? "funneled" : "single";
}

/* 1 when FASTREDUCE_PROGRESS=caller (the library reads it case-blind). */
TU_FN int rq_caller_mode(void)
{
    const char *p = getenv("FASTREDUCE_PROGRESS");
    return p && !strcasecmp(p, "caller");
}

/* A communicator of @p mpi forcing @p spec (fr_config_t.algo; NULL: the
 * default table), or NULL on failure. */
TU_FN fr_comm_t rq_make_comm(const char *spec, MPI_Comm mpi)
{
    fr_config_t cfg = FR_CONFIG_INIT;
    cfg.algo = spec;
    fr_comm_t c = NULL;
    tu_begin("fr_comm_create algo=%s", spec ? spec : "default");
    fr_status_t st = fr_comm_create(mpi, &cfg, &c);
    TU_CHECK(st == FR_SUCCESS && c, "fr_comm_create: %s", tu_status(st));
    return st == FR_SUCCESS ? c : NULL;
}

/* Destroy @p c (made for @p name): it must succeed. */
TU_FN void rq_destroy_comm(fr_comm_t c, const char *name)
{
    tu_begin("fr_comm_destroy algo=%s", name ? name : "default");
    fr_status_t st = c ? fr_comm_destroy(c) : FR_SUCCESS;
    TU_CHECK(st == FR_SUCCESS, "fr_comm_destroy: %s", tu_status(st));
}

/* A description of @p o for messages. */
TU_FN const char *rq_what(const rq_op_t *o, char *buf, size_t len)
{
    if (o->kind == RQ_AR)
        snprintf(buf, len, "allreduce %s %s of %zu%s", tu_dtype_names[o->dt], tu_op_names[o->op], o->count,
                 o->inplace ? " in place" : "");
    else
        snprintf(buf, len, "bcast %s of %zu from %d", tu_dtype_names[o->dt], o->count, o->root);
    return buf;
}

/* Clear @p o for a @p kind of @p count dt and give it guarded buffers;
 * returns their size in bytes. */
TU_FN size_t rq_alloc(rq_op_t *o, int kind, fr_dtype_t dt, size_t count)
{
    size_t nb = count * tu_dtype_sizes[dt];
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->dt = dt;
    o->count = count;
    o->input = tu_alloc(nb);
    o->expect = tu_alloc(nb);
    o->sbuf = tu_alloc(nb);
    o->rbuf = tu_alloc(nb);
    tu_guard_set(o->sbuf, nb);
    tu_guard_set(o->rbuf, nb);
    return nb;
}

/* @p o: an allreduce of @p count (dt, op), in place or not, inputs of @p salt. */
TU_FN void rq_allreduce(rq_op_t *o, fr_dtype_t dt, fr_op_t op, size_t count, int inplace, uint64_t salt)
{
    size_t nb = rq_alloc(o, RQ_AR, dt, count);
    o->op = op;
    o->inplace = inplace;
    make_case(dt, op, count, salt, tu.size, tu.rank, o->input, o->expect);
    if (inplace) {
        memcpy(o->rbuf, o->input, nb);
    } else {
        memcpy(o->sbuf, o->input, nb);
        memset(o->rbuf, 0xA5 ^ tu.rank, nb);
    }
}

/* @p o: a bcast of @p count dt from @p root, the root's data of @p salt. */
TU_FN void rq_bcast(rq_op_t *o, fr_dtype_t dt, size_t count, int root, uint64_t salt)
{
    size_t nb = rq_alloc(o, RQ_BC, dt, count);
    o->root = root;
    fill_pattern(o->expect, nb, salt);
    if (tu.rank == root) memcpy(o->rbuf, o->expect, nb);
    else memset(o->rbuf, 0x5A ^ tu.rank, nb);
}

/* Start @p o on @p comm; 1 when it started (a request that is not NULL). */
TU_FN int rq_start(rq_op_t *o, fr_comm_t comm)
{
    o->req = FR_REQUEST_NULL;
    if (o->kind == RQ_AR)
        o->st = fr_iallreduce(o->inplace ? FR_IN_PLACE : o->sbuf, o->rbuf, o->count, o->dt, o->op, comm, &o->req);
    else
        o->st = fr_ibcast(o->rbuf, o->count, o->dt, o->root, comm, &o->req);
    return o->st == FR_SUCCESS && o->req != FR_REQUEST_NULL;
}

/* Run @p o as a blocking call on @p comm. */
TU_FN void rq_blocking(rq_op_t *o, fr_comm_t comm)
{
    o->req = FR_REQUEST_NULL;
    if (o->kind == RQ_AR)
        o->st = fr_allreduce(o->inplace ? FR_IN_PLACE : o->sbuf, o->rbuf, o->count, o->dt, o->op, comm);
    else
        o->st = fr_bcast(o->rbuf, o->count, o->dt, o->root, comm);
}

/* 1 when @p o completed right: its status, its result on this rank, its
 * send buffer unchanged, the guard bytes intact; else 0 and why. */
TU_FN int rq_ok(const rq_op_t *o, char *why, size_t len)
{
    char w[96], g[96], e[96];
    size_t nb = o->count * tu_dtype_sizes[o->dt], nbad;
    long where = 0;
    rq_what(o, w, sizeof w);
    if (o->st != FR_SUCCESS) {
        snprintf(why, len, "%s: %s: %s", w, fr_strerror(o->st), fr_last_error());
        return 0;
    }
    size_t i = tu_first_diff(o->rbuf, o->expect, o->count, tu_dtype_sizes[o->dt], &nbad);
    if (i < o->count) {
        tu_format_elem(g, sizeof g, o->rbuf, i, o->dt);
        tu_format_elem(e, sizeof e, o->expect, i, o->dt);
        snprintf(why, len, "%s: element %zu is %s, want %s (%zu wrong)", w, i, g, e, nbad);
        return 0;
    }
    if (o->kind == RQ_AR && !o->inplace && memcmp(o->sbuf, o->input, nb)) {
        snprintf(why, len, "%s: the send buffer changed", w);
        return 0;
    }
    if (!tu_guard_ok(o->rbuf, nb, &where) || !tu_guard_ok(o->sbuf, nb, &where)) {
        snprintf(why, len, "%s: a guard byte changed at offset %ld", w, where);
        return 0;
    }
    return 1;
}

TU_FN void rq_free(rq_op_t *o)
{
    tu_free(o->input); tu_free(o->expect); tu_free(o->sbuf); tu_free(o->rbuf);
    o->input = o->expect = o->sbuf = o->rbuf = NULL;
}

/* ---- completion ------------------------------------------------------------ */

/* Record the first reason a check failed: *ok becomes 0 and @p why holds
 * the first message (later ones are dropped: the first explains most). */
TU_FN void rq_why(int *ok, char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
TU_FN void rq_why(int *ok, char *why, size_t len, const char *fmt, ...)
{
    if (!*ok) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    *ok = 0;
}

enum { RQ_WAITALL = 0, RQ_WAIT, RQ_TEST, RQ_NSTYLES };
static const char *const rq_style_names[RQ_NSTYLES] = { "fr_waitall", "fr_wait", "an fr_test loop" };

/* A permutation of 0..n-1 drawn from @p seed: the same on every rank. */
TU_FN void rq_perm(int *p, int n, uint64_t seed)
{
    for (int i = 0; i < n; i++) p[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(tu_hash3(seed, (uint64_t)i, 77) % (uint64_t)(i + 1)), t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
}

/* fr_test each pending one in @p perm's order until all are done. With
 * FASTREDUCE_PROGRESS=caller, fr_test runs a request (and those before it)
 * to its end, so each must be done at its first test. */
TU_FN int rq_test_loop(rq_op_t *ops, const int *perm, int n, char *why, size_t len)
{
    int left = 0, ok = 1, caller = rq_caller_mode();
    for (int i = 0; i < n; i++) left += ops[i].req != FR_REQUEST_NULL;
    for (long sweep = 0; left > 0; sweep++) {
        for (int k = 0; k < n; k++) {
            rq_op_t *o = &ops[perm[k]];
            if (o->req == FR_REQUEST_NULL) continue;
            int done = -1;
            fr_status_t st = fr_test(&o->req, &done);
            if (done == 1) {
                o->st = st;
                left--;
                if (o->req != FR_REQUEST_NULL) rq_why(&ok, why, len, "fr_test: done, the request not NULL");
                o->req = FR_REQUEST_NULL;
            } else if (done != 0 || st != FR_SUCCESS) {
                rq_why(&ok, why, len, "fr_test of request %d: %s, done %d", perm[k], fr_strerror(st), done);
                o->st = st != FR_SUCCESS ? st : FR_ERR_INTERNAL;
                o->req = FR_REQUEST_NULL;
                left--;
            } else if (caller) {
                rq_why(&ok, why, len, "FASTREDUCE_PROGRESS=caller: fr_test of request %d not done at once", perm[k]);
            }
        }
        if (left) sched_yield();
    }
    return ok;
}

/* fr_waitall on the pending ones in @p perm's order: every request NULL
 * after, the statuses the ops', the return the first failed one's. */
TU_FN int rq_waitall(rq_op_t *ops, const int *perm, int n, char *why, size_t len)
{
    fr_request_t *reqs = calloc((size_t)n, sizeof *reqs);
    fr_status_t *sts = calloc((size_t)n, sizeof *sts), first = FR_SUCCESS;
    int ok = 1;
    for (int k = 0; k < n; k++) reqs[k] = ops[perm[k]].req;
    fr_status_t ret = fr_waitall((size_t)n, reqs, sts);
    for (int k = 0; k < n; k++) {
        rq_op_t *o = &ops[perm[k]];
        if (o->req == FR_REQUEST_NULL) continue;
        o->req = FR_REQUEST_NULL;
        o->st = sts[k];
        if (first == FR_SUCCESS) first = sts[k];
        if (reqs[k] != FR_REQUEST_NULL) rq_why(&ok, why, len, "fr_waitall left request %d not NULL", perm[k]);
    }
    if (ret != first)
        rq_why(&ok, why, len, "fr_waitall returned %s, the first failed status is %s", fr_strerror(ret),
               fr_strerror(first));
    free(reqs);
    free(sts);
    return ok;
}

/* Complete the started ones of @p ops by @p style, in an order drawn from
 * @p seed; each op's st becomes its request's status. 1 when the calls
 * behaved as documented, else 0 and why (the results are rq_ok's). */
TU_FN int rq_complete(rq_op_t *ops, int n, int style, uint64_t seed, char *why, size_t len)
{
    int *perm = malloc((size_t)n * sizeof *perm), ok = 1;
    rq_perm(perm, n, seed);
    if (style == RQ_WAITALL) {
        ok = rq_waitall(ops, perm, n, why, len);
    } else if (style == RQ_TEST) {
        ok = rq_test_loop(ops, perm, n, why, len);
    } else {
        for (int k = 0; k < n; k++) {
            rq_op_t *o = &ops[perm[k]];
            if (o->req == FR_REQUEST_NULL) continue;
            o->st = fr_wait(&o->req);
            if (o->req != FR_REQUEST_NULL) rq_why(&ok, why, len, "fr_wait left request %d not NULL", perm[k]);
            o->req = FR_REQUEST_NULL;
        }
    }
    free(perm);
    return ok;
}

#endif

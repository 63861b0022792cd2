/* Request handles and the non-blocking entry points. A handle is a slot of
 * a process-wide table and the slot's generation, so that a handle used
 * after its request completed (or never made) is told apart from a live
 * one and refused, never followed to freed memory. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "api.h"
#include "log.h"
#include "request.h"

#define SLOTS_PER_CHUNK 1024u
#define MAX_CHUNKS 4096u

typedef struct slot {
    uint32_t   gen;        /* the generation of its current or next request (never 0) */
    uint32_t   next_free;  /* the free list: the next free slot + 1, 0 at its end */
    fr_work_t *w;          /* the request, NULL while free */
} slot_t;

static pthread_mutex_t req_lock = PTHREAD_MUTEX_INITIALIZER;
static slot_t *chunks[MAX_CHUNKS];
static uint32_t nslots;     /* slots made */
/* The free list is a queue: a freed slot is taken again only after every
 * other free one, so a slot's 32-bit generation moves once per thousand
 * requests at most and a stale handle cannot meet its own generation again
 * within any run (a stack would wrap one slot after 2^32 requests). */
static uint32_t free_head;  /* the first free slot + 1, 0: none */
static uint32_t free_tail;  /* the last free slot + 1, 0: none */

void fr_req_lock(void) { pthread_mutex_lock(&req_lock); }
void fr_req_unlock(void) { pthread_mutex_unlock(&req_lock); }

static slot_t *slot_at(uint32_t i) { return &chunks[i / SLOTS_PER_CHUNK][i % SLOTS_PER_CHUNK]; }

/* A free slot, reserved: its handle, or 0 when the table is full (lock
 * held). Its request is set only once queued, so that a handle used before
 * its start returned is refused rather than followed half made. */
static fr_request_t slot_get(void)
{
    if (!free_head) {
        if (nslots / SLOTS_PER_CHUNK >= MAX_CHUNKS) return 0;
        slot_t *c = calloc(SLOTS_PER_CHUNK, sizeof *c);
        if (!c) return 0;
        chunks[nslots / SLOTS_PER_CHUNK] = c;
        for (uint32_t k = 0; k < SLOTS_PER_CHUNK; k++) {
            c[k].gen = 1;
            c[k].next_free = k + 1 < SLOTS_PER_CHUNK ? nslots + k + 2 : 0;
        }
        free_head = nslots + 1;
        nslots += SLOTS_PER_CHUNK;
        free_tail = nslots;
    }
    uint32_t i = free_head - 1;
    slot_t *s = slot_at(i);
    free_head = s->next_free;
    if (!free_head) free_tail = 0;
    return ((uint64_t)s->gen << 32) | (uint64_t)(i + 1);
}

/* Free the slot of handle @p h (lock held): its generation moves on. */
static void slot_put(fr_request_t h)
{
    uint32_t i = (uint32_t)h - 1;
    slot_t *s = slot_at(i);
    s->w = NULL;
    s->gen = s->gen + 1 ? s->gen + 1 : 1;
    s->next_free = 0;
    if (free_tail) slot_at(free_tail - 1)->next_free = i + 1;
    else free_head = i + 1;
    free_tail = i + 1;
}

static void work_free(fr_work_t *w)
{
    if (!w) return;
    fr_group_free(w->group);
    free(w);
}

/* Queue @p w (its call or group set) on @p comm as a request: *req. */
static fr_status_t start(fr_comm_t comm, fr_work_t *w, fr_request_t *req)
{
    fr_req_lock();
    fr_request_t h = slot_get();
    fr_req_unlock();
    if (!h) {
        work_free(w);
        return FR_ERROR(FR_ERR_NO_MEMORY, "no room for another request (%u pending in the process)", nslots);
    }
    w->slot = h;
    FR_CHECK(fr_prog_start(comm, w));
    fr_req_lock();
    slot_at((uint32_t)h - 1)->w = w;
    fr_req_unlock();
    *req = h;
    return FR_SUCCESS;
}

static fr_work_t *work_new(void)
{
    fr_work_t *w = calloc(1, sizeof *w);
    if (!w) FR_ERROR(FR_ERR_NO_MEMORY, "out of memory for a request");
    return w;
}

fr_status_t fr_request_start(fr_comm_t comm, const fr_call_t *call, fr_request_t *req)
{
    *req = FR_REQUEST_NULL;
    fr_work_t *w = work_new();
    if (!w) return FR_ERR_NO_MEMORY;
    w->call = *call;
    return start(comm, w, req);
}

fr_status_t fr_iallreduce(const void *sendbuf, void *recvbuf, size_t count, fr_dtype_t dtype, fr_op_t op,
                          fr_comm_t comm, fr_request_t *req)
{
    if (!req) return FR_ERROR(FR_ERR_NULL_POINTER, "fr_iallreduce: req is NULL");
    *req = FR_REQUEST_NULL;
    fr_call_t call;
    FR_CHECK(fr_prepare_allreduce(sendbuf, recvbuf, count, dtype, op, comm, &call));
    return fr_request_start(comm, &call, req);
}

fr_status_t fr_ibcast(void *buf, size_t count, fr_dtype_t dtype, int root, fr_comm_t comm, fr_request_t *req)
{
    if (!req) return FR_ERROR(FR_ERR_NULL_POINTER, "fr_ibcast: req is NULL");
    *req = FR_REQUEST_NULL;
    fr_call_t call;
    FR_CHECK(fr_prepare_bcast(buf, count, dtype, root, comm, &call));
    return fr_request_start(comm, &call, req);
}

fr_status_t fr_allreduce_group(const void *const *sendbufs, void *const *recvbufs, const size_t *counts, size_t n,
                               fr_dtype_t dtype, fr_op_t op, fr_comm_t comm)
{
    fr_group_t *g;
    FR_CHECK(fr_group_make(comm, sendbufs, recvbufs, counts, n, dtype, op, &g));
    fr_status_t st = fr_prog_blocking(comm, NULL, g);
    fr_group_free(g);
    return st;
}

fr_status_t fr_iallreduce_group(const void *const *sendbufs, void *const *recvbufs, const size_t *counts,
                                size_t n, fr_dtype_t dtype, fr_op_t op, fr_comm_t comm, fr_request_t *req)
{
    if (!req) return FR_ERROR(FR_ERR_NULL_POINTER, "fr_iallreduce_group: req is NULL");
    *req = FR_REQUEST_NULL;
    fr_group_t *g;
    FR_CHECK(fr_group_make(comm, sendbufs, recvbufs, counts, n, dtype, op, &g));
    fr_work_t *w = work_new();
    if (!w) {
        fr_group_free(g);
        return FR_ERR_NO_MEMORY;
    }
    w->group = g;
    return start(comm, w, req);
}

/* The request of handle @p h, claimed by this caller (no other may
 * complete it meanwhile), and its communicator held while it is not done
 * (*held, else NULL); or an error naming @p fn. */
static fr_status_t claim(fr_request_t h, const char *fn, fr_work_t **out, struct fr_comm **held)
{
    uint32_t i = (uint32_t)h - 1, gen = (uint32_t)(h >> 32);
    fr_status_t st = FR_SUCCESS;
    *out = NULL;
    *held = NULL;
    fr_req_lock();
    slot_t *s = (uint32_t)h && i < nslots ? slot_at(i) : NULL;
    fr_work_t *w = s && s->gen == gen ? s->w : NULL;
    if (!w) {
        st = FR_ERROR(FR_ERR_INVALID_ARG, "%s: %#llx is not a pending request (it completed already, or was "
                      "never made)", fn, (unsigned long long)h);
    } else if (w->claimed) {
        st = FR_ERROR(FR_ERR_INVALID_ARG, "%s: request %lu is being completed by another thread", fn,
                      (unsigned long)w->number);
    } else {
        w->claimed = 1;
        if (__atomic_load_n(&w->state, __ATOMIC_ACQUIRE) != FR_REQ_DONE) {
            *held = w->comm;
            fr_prog_hold(w->comm);
        }
        *out = w;
    }
    fr_req_unlock();
    return st;
}

/* Give up the claim (and hold) of @p w: complete it when @p done (its
 * handle freed, its status returned with its detail), else leave it pending. */
static fr_status_t unclaim(fr_work_t *w, struct fr_comm *held, int done, fr_request_t *req)
{
    if (held) fr_prog_release(held);
    fr_req_lock();
    if (done) slot_put(w->slot);
    else w->claimed = 0;
    fr_req_unlock();
    if (!done) return FR_SUCCESS;
    *req = FR_REQUEST_NULL;
    fr_status_t st = w->status;
    if (st != FR_SUCCESS) FR_ERROR(st, "%s", w->detail);
    /* (this thread's last collective is now this one, whoever ran it) */
    if (w->alg) fr_last_algorithm_set(w->alg, w->zcopy, w->cma);
    work_free(w);
    return st;
}

static fr_status_t complete(fr_request_t *req, int wait, int *done, const char *fn)
{
    *done = 0;
    if (*req == FR_REQUEST_NULL) {
        *done = 1;
        return FR_SUCCESS;
    }
    fr_work_t *w;
    struct fr_comm *held;
    FR_CHECK(claim(*req, fn, &w, &held));
    *done = fr_prog_advance(w, wait);
    return unclaim(w, held, *done, req);
}

fr_status_t fr_test(fr_request_t *req, int *done)
{
    if (!done) return FR_ERROR(FR_ERR_NULL_POINTER, "fr_test: done is NULL");
    *done = 0;
    if (!req) return FR_ERROR(FR_ERR_NULL_POINTER, "fr_test: req is NULL");
    return complete(req, 0, done, "fr_test");
}

fr_status_t fr_wait(fr_request_t *req)
{
    int done;
    if (!req) return FR_ERROR(FR_ERR_NULL_POINTER, "fr_wait: req is NULL");
    return complete(req, 1, &done, "fr_wait");
}

fr_status_t fr_waitall(size_t n, fr_request_t *reqs, fr_status_t *statuses)
{
    if (n && !reqs) return FR_ERROR(FR_ERR_NULL_POINTER, "fr_waitall: reqs is NULL with %zu requests", n);
    fr_status_t first = FR_SUCCESS;
    char detail[512] = "";
    for (size_t i = 0; i < n; i++) {
        int done;
        fr_status_t st = complete(&reqs[i], 1, &done, "fr_waitall");
        if (statuses) statuses[i] = st;
        if (st != FR_SUCCESS && first == FR_SUCCESS) {
            first = st;
            snprintf(detail, sizeof detail, "%s", fr_last_error());
        }
    }
    if (first != FR_SUCCESS) FR_ERROR(first, "%s", detail);
    return first;
}

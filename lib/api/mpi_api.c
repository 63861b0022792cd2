/* FR_Allreduce / FR_Bcast with MPI's signature, and what they share with
 * FR_Iallreduce / FR_Ibcast (mpi_api.h): the fr_comm_t each MPI
 * communicator gets, what a call cannot be served by and why. */
#include <pthread.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "mpi_api.h"
#include "mpi_types.h"
#include "api.h"
#include "agree.h"
#include "comm.h"
#include "log.h"
#include "reduce.h"
#include "device.h"
#include "request.h"
#include "wait.h"

/* ---- the fr_comm_t cached on an MPI communicator ------------------------- */
/* An entry per cached communicator; destroyed when the MPI communicator is
 * freed, or at MPI_Finalize (through an attribute on MPI_COMM_SELF, whose
 * delete callback MPI runs first, while MPI still works). */
typedef fr_mpi_cached_t cached_t;

static int comm_key = MPI_KEYVAL_INVALID, self_key = MPI_KEYVAL_INVALID;
static cached_t *cache_list;
static unsigned long n_created, n_freed;  /* fr_comm_t made and destroyed for MPI communicators */
/* Guards cache_list and the counts (the keyvals are made under
 * pthread_once): FR_* calls on
 * different communicators may come from several threads at once
 * (MPI_THREAD_MULTIPLE), and so may the MPI_Comm_free calls that run
 * comm_delete. Never held across a collective (fr_comm_create,
 * fr_comm_destroy, fr_agree): threads of two ranks could then wait for each
 * other's lock. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

void fr_mpi_cache_counts(unsigned long *created, unsigned long *freed)
{
    pthread_mutex_lock(&cache_lock);
    *created = n_created;
    *freed = n_freed;
    pthread_mutex_unlock(&cache_lock);
}

/* (with cache_lock held) */
static void unlink_entry(cached_t *e)
{
    for (cached_t **p = &cache_list; *p; p = &(*p)->next)
        if (*p == e) { *p = e->next; break; }
}

static int comm_delete(MPI_Comm c, int key, void *val, void *extra)
{
    cached_t *e = val;
    (void)c; (void)key; (void)extra;
    pthread_mutex_lock(&cache_lock);
    fr_comm_t fc = e->comm;
    e->comm = NULL;
    unlink_entry(e);
    if (fc) n_freed++;
    pthread_mutex_unlock(&cache_lock);
    /* Served non-blocking calls may be pending on some ranks and not on
     * others (MPI lets a communicator be freed before they complete), and
     * fr_comm_destroy refuses a communicator with requests on the ranks
     * that have some, leaving the others waiting: a call behind them, on
     * every rank (started is set alike), completes them first. */
    if (fc && __atomic_load_n(&e->started, __ATOMIC_ACQUIRE)) fr_bcast(NULL, 0, FR_UINT8, 0, fc);
    /* Behind the call, a request may still count as pending on some ranks
     * only: its device work not ended, or another thread inside MPI_Test of
     * it. A rank refused would leave the others in the destroy's barrier,
     * so each tries again until it is through. */
    for (uint64_t polls = 0; fc && fr_comm_destroy(fc) == FR_ERR_PENDING;) fr_backoff(&polls, fc->spin);
    free(e);
    return MPI_SUCCESS;
}

/* The oldest cached fr_comm_t not yet destroyed, taken from its entry
 * (the list is newest first); NULL when none is left. */
static fr_comm_t take_oldest(void)
{
    fr_comm_t fc = NULL;
    pthread_mutex_lock(&cache_lock);
    cached_t *oldest = NULL;
    for (cached_t *e = cache_list; e; e = e->next)
        if (e->comm) oldest = e;
    if (oldest) {
        fc = oldest->comm;
        oldest->comm = NULL;
        n_freed++;
    }
    pthread_mutex_unlock(&cache_lock);
    return fc;
}

/* At finalize: destroy every fr_comm_t still cached, all at once
 * (fr_comm_destroy_many), since threads may have made them in a different
 * order on each rank; one at a time, oldest first, without memory for the
 * list. The entries stay, for a later comm_delete to free. */
static int self_delete(MPI_Comm c, int key, void *val, void *extra)
{
    (void)c; (void)key; (void)val; (void)extra;
    /* (before the cached communicators go: their count is of those freed before MPI_Finalize) */
    if (fr_mpi_mode() & FR_MPI_STATS) fr_mpi_stats_print();
    pthread_mutex_lock(&cache_lock);
    int n = 0, k = 0;
    for (cached_t *e = cache_list; e; e = e->next) n += e->comm != NULL;
    fr_comm_t *v = n ? malloc((size_t)n * sizeof *v) : NULL;
    for (cached_t *e = cache_list; v && e; e = e->next)
        if (e->comm) {
            v[k++] = e->comm;
            e->comm = NULL;
            n_freed++;
        }
    pthread_mutex_unlock(&cache_lock);
    /* (outside the lock: destroying is collective) */
    if (v) fr_comm_destroy_many(v, k);
    free(v);
    for (fr_comm_t fc; (fc = take_oldest());) fr_comm_destroy(fc);
    return MPI_SUCCESS;
}

static pthread_once_t keys_once = PTHREAD_ONCE_INIT;
static int keys_ok;

static void make_keys(void)
{
    keys_ok = PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_delete, &comm_key, NULL) == MPI_SUCCESS &&
              PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &self_key, NULL) == MPI_SUCCESS &&
              PMPI_Comm_set_attr(MPI_COMM_SELF, self_key, NULL) == MPI_SUCCESS;
}

int FR_Comm_free(MPI_Comm *comm)
{
    /* (the keyvals exist once a call cached something; made here otherwise,
     * which costs nothing, as reading comm_key unordered would be a race) */
    if (comm && *comm != MPI_COMM_NULL && fr_mpi_ready() == FR_SUCCESS) {
        pthread_once(&keys_once, make_keys);
        void *val;
        int found = 0;
        if (keys_ok && PMPI_Comm_get_attr(*comm, comm_key, &val, &found) == MPI_SUCCESS && found)
            PMPI_Comm_delete_attr(*comm, comm_key);   /* (comm_delete, now) */
    }
    return PMPI_Comm_free(comm);
}

/* (fr_mpi_mode(), with the finalize callback in place when statistics are
 * kept: MPI_Finalize deletes MPI_COMM_SELF's attributes first) */
void fr_mpi_call_begin(fr_mpi_served_t *h)
{
    int m = fr_mpi_mode();
    if ((m & FR_MPI_STATS) && fr_mpi_ready() == FR_SUCCESS) pthread_once(&keys_once, make_keys);
    *h = (fr_mpi_served_t){ .mode = m, .t0 = m & FR_MPI_STATS ? PMPI_Wtime() : 0, .what = "FASTREDUCE_DISABLE=1" };
}

/* Who may run @p fc's requests here (FR_MPI_CAN_*), agreed over its ranks:
 * a process's thread level and FASTREDUCE_PROGRESS are its own, and a
 * non-blocking call that some ranks serve and others pass would wait
 * forever. The progress thread is made now where a request could be
 * served, and agreed too: a rank that could not make it would refuse its
 * requests (Open MPI) or run them only inside MPI_Test (MPICH) while the
 * others start theirs; and agreeing later, inside a non-blocking call, would
 * wait for ranks that do not make that call. */
static int agreed_can(fr_comm_t fc)
{
    int level = MPI_THREAD_SINGLE, mine, all = 0;
    if (PMPI_Query_thread(&level) != MPI_SUCCESS) level = MPI_THREAD_SINGLE;
    mine = (fc->set.progress != FR_PROGRESS_CALLER ? FR_MPI_CAN_THREAD : 0) |
           (level == MPI_THREAD_MULTIPLE ? FR_MPI_CAN_MULTIPLE : 0);
    if ((mine & FR_MPI_CAN_THREAD) && (fr_mpi_grequest_poll() || (mine & FR_MPI_CAN_MULTIPLE)) && fr_prog_thread(fc))
        mine |= FR_MPI_HAS_THREAD;
    if (PMPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_BAND, fc->mpi) != MPI_SUCCESS) return 0;
    return all;
}

/* The entry cached on @p mc, made now if there is none and @p make (its
 * comm NULL when fastreduce declined the communicator), or NULL; *setup:
 * the seconds spent making it (0 when it was cached). */
static cached_t *cached_comm(MPI_Comm mc, int make, double *setup)
{
    *setup = 0;
    /* once per process, whichever thread comes first */
    pthread_once(&keys_once, make_keys);
    if (!keys_ok) return NULL;
    void *val;
    int found = 0;
    PMPI_Comm_get_attr(mc, comm_key, &val, &found);
    if (found) return val;
    if (!make) return NULL;
    double t0 = PMPI_Wtime();
    cached_t *e = calloc(1, sizeof *e);
    fr_status_t st = e ? FR_SUCCESS : FR_ERROR(FR_ERR_NO_MEMORY, "no memory for the communicator cache");
    st = fr_agree(mc, st, "FR_* communicator cache");
    if (st != FR_SUCCESS) { free(e); return NULL; }
    int made = fr_comm_create(mc, NULL, &e->comm) == FR_SUCCESS;
    if (!made) {
        FR_WARN(FR_SUB_INIT, "FR_* calls on this communicator go to MPI: %s", fr_last_error());
        e->comm = NULL; /* remembered: not retried */
    } else {
        e->can = agreed_can(e->comm);
    }
    pthread_mutex_lock(&cache_lock);
    if (made) n_created++;
    e->next = cache_list;
    cache_list = e;
    pthread_mutex_unlock(&cache_lock);
    PMPI_Comm_set_attr(mc, comm_key, e);
    *setup = PMPI_Wtime() - t0;
    return e;
}

/* Whether FR_* can serve this communicator (intra, MPI usable). */
static int usable(MPI_Comm comm)
{
    int inter = 1;
    if (fr_mpi_ready() != FR_SUCCESS || comm == MPI_COMM_NULL) return 0;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return 0;
    return !inter;
}

int fr_mpi_error(fr_status_t st)
{
    switch (st) {
    case FR_SUCCESS: return MPI_SUCCESS;
    case FR_ERR_NULL_POINTER: return MPI_ERR_BUFFER;
    case FR_ERR_COUNT: return MPI_ERR_COUNT;
    case FR_ERR_ROOT: return MPI_ERR_ROOT;
    case FR_ERR_UNSUPPORTED_OP: return MPI_ERR_OP;
    case FR_ERR_BAD_COMM: return MPI_ERR_COMM;
    case FR_ERR_INVALID_ARG: return MPI_ERR_ARG;
    case FR_ERR_MISMATCH: return MPI_ERR_ARG;        /* the ranks' arguments differ */
    default: return MPI_ERR_OTHER;
    }
}

/* Whether a buffer of a served call is device memory that this build
 * cannot serve (no CUDA): such a call goes to the MPI library, which may be
 * CUDA-aware. */
static int device_unserved(const void *p, int count)
{
    return count > 0 && p != MPI_IN_PLACE && fr_mem_unserved(p);
}

/* A failure of a served call goes to the communicator's error handler, as
 * one of MPI's own would (a passed call's went there inside PMPI). */
int fr_mpi_served_status(fr_status_t st, MPI_Comm comm)
{
    int err = fr_mpi_error(st);
    if (err != MPI_SUCCESS) PMPI_Comm_call_errhandler(comm, err);
    return err;
}

/* Why @p comm's cached communicator cannot serve (NULL: it can, in *c):
 * fastreduce declined it, or a non-blocking call (@p nb) found none. */
static const char *cached_why(MPI_Comm comm, int nb, fr_mpi_call_t *c)
{
    c->cached = cached_comm(comm, !nb, &c->setup);
    c->fc = c->cached ? c->cached->comm : NULL;
    return c->fc ? NULL : c->cached || !nb ? "fastreduce declined the communicator" : FR_MPI_NOT_SET_UP;
}

const char *fr_mpi_allreduce_why(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                 MPI_Comm comm, int nb, fr_mpi_call_t *c)
{
    *c = (fr_mpi_call_t){ .dtype = fr_dtype_from_mpi(datatype) };
    c->op = op == MPI_SUM ? FR_SUM : op == MPI_PROD ? FR_PROD : op == MPI_MIN ? FR_MIN : op == MPI_MAX ? FR_MAX : -1;
    /* (MPI_IN_PLACE as recvbuf is erroneous: MPI says so in its own way) */
    return c->dtype < 0 ? "datatype" : c->op < 0 ? "op" : count < 0 ? "count" :
           recvbuf == MPI_IN_PLACE ? "MPI_IN_PLACE as recvbuf" : !usable(comm) ? "communicator" :
           device_unserved(recvbuf, count) || device_unserved(sendbuf, count) ? "device memory (built without CUDA)" :
           cached_why(comm, nb, c);
}

/* Whether a served call failed (@p st) only because UCX could not be set
 * up on @p c's communicator: a failure every rank agreed on before any
 * data moved, the communicator still whole. The call then goes to MPI,
 * which would have served it (*how says so); fastreduce has warned why.
 * (Blocking calls only: the state moves in a request's run on each rank at
 * its own time. Their finding is kept, alike on every rank, for the
 * non-blocking calls after them: mpi_nb.c.) */
static int no_ucx(const fr_mpi_call_t *c, fr_status_t st, fr_mpi_served_t *how)
{
    if (st != FR_ERR_UCX || c->fc->ucx_state >= 0 || c->fc->broken) return 0;
    c->cached->no_ucx = 1;
    how->served = 0;
    how->what = FR_MPI_NO_UCX;
    return 1;
}

/* FR_Allreduce without its statistics, saying in *how what happened. */
static int mpi_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                     fr_mpi_served_t *how)
{
    fr_mpi_call_t c;
    const char *why = fr_mpi_allreduce_why(sendbuf, recvbuf, count, datatype, op, comm, 0, &c);
    how->served = !why;
    how->what = why;
    how->setup = c.setup;
    if (why) return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    const void *s = sendbuf == MPI_IN_PLACE ? FR_IN_PLACE : sendbuf;
    fr_status_t st = fr_allreduce(s, recvbuf, (size_t)count, (fr_dtype_t)c.dtype, (fr_op_t)c.op, c.fc);
    if (no_ucx(&c, st, how)) return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
    how->what = fr_last_algorithm();
    how->zcopy = fr_last_zero_copy();
    how->bytes = (double)count * (double)fr_dtype_size((fr_dtype_t)c.dtype);
    how->nranks = c.fc->size;
    return fr_mpi_served_status(st, comm);
}

/* Whether @p count elements of @p t (of @p size bytes each) are their
 * count x size bytes where they lie: a predefined type without padding
 * (not the pair types such as MPI_DOUBLE_INT, whose extent is larger
 * than their size). A derived type is never taken as such, even when
 * contiguous: its type map may order the bytes otherwise. */
static int lies_flat(MPI_Datatype t, MPI_Count size)
{
    int ni, na, nd, combiner;
    MPI_Aint lb, extent;
    return PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) == MPI_SUCCESS && combiner == MPI_COMBINER_NAMED &&
           PMPI_Type_get_extent(t, &lb, &extent) == MPI_SUCCESS && lb == 0 && (MPI_Count)extent == size;
}

/* MPI_Pack (@p unpack 0) or MPI_Unpack of @p count elements of @p t at
 * @p buf to or from @p packed, which holds count x @p size bytes; in runs
 * whose packed bytes fit an int, as MPI_Pack counts them. FR_SUCCESS when
 * MPI packed every run into exactly its elements' size, as every
 * homogeneous MPI does. */
static fr_status_t pack_all(int unpack, void *buf, int count, MPI_Datatype t, MPI_Count size, char *packed,
                            MPI_Comm comm)
{
    MPI_Aint lb, extent;
    if (size > INT_MAX)
        return FR_ERROR(FR_ERR_NOT_SUPPORTED, "MPI_Bcast: an element of %lld bytes of a datatype with gaps cannot "
                        "be packed (MPI_Pack counts bytes in an int)", (long long)size);
    if (PMPI_Type_get_extent(t, &lb, &extent) != MPI_SUCCESS)
        return FR_ERROR(FR_ERR_MPI, "MPI_Bcast: MPI_Type_get_extent failed");
    const int per = INT_MAX / (int)size;
    for (int i = 0; i < count; i += per) {
        int n = count - i < per ? count - i : per, pos = 0, len = n * (int)size, rc;
        char *at = (char *)buf + (MPI_Aint)i * extent, *p = packed + (size_t)i * (size_t)size;
        rc = unpack ? PMPI_Unpack(p, len, &pos, at, n, t, comm) : PMPI_Pack(at, n, t, p, len, &pos, comm);
        if (rc != MPI_SUCCESS || pos != len)
            return FR_ERROR(FR_ERR_MPI, "MPI_Bcast: MPI_%s of %d elements of the datatype %s (%d of %d bytes)",
                            unpack ? "Unpack" : "Pack", n, rc != MPI_SUCCESS ? "failed" : "was not their size", pos,
                            len);
    }
    return FR_SUCCESS;
}

/* A bcast of count x size bytes, the same on every rank whatever datatype
 * each names: MPI lets the ranks of one bcast name different datatypes of
 * the same type signature (MPI_INT x 4 at the root, a derived type of 4
 * ints elsewhere), so whether fastreduce serves a call must not depend on
 * the datatype. A rank whose datatype does not lie flat packs its data
 * (the root) or unpacks it (the others) through a buffer of those bytes;
 * the gaps of its datatype are left as they are. Two limits: that buffer
 * is host memory, so with device buffers the ranks must all name datatypes
 * that lie flat or all name others (else their calls differ in memory
 * type); and a root that cannot pack sends zeros, which the others take
 * for data (the root returns the error: a rank that lies flat has nowhere
 * to hear of it). */
fr_status_t fr_mpi_bytes_begin(fr_mpi_bytes_t *b, void *buffer, int count, MPI_Datatype t, MPI_Count size, int root,
                               int me, MPI_Comm comm, int keep_type)
{
    *b = (fr_mpi_bytes_t){ .buf = buffer, .bytes = (size_t)count * (size_t)size, .user = buffer, .count = count,
                           .type = t, .size = size, .comm = comm };
    if (!b->bytes || lies_flat(t, size)) return FR_SUCCESS;
    /* (a rank that cannot allocate cannot take part: the others then wait
     * for it, as for any rank that leaves a collective) */
    b->packed = malloc(b->bytes);
    if (!b->packed) return FR_ERROR(FR_ERR_NO_MEMORY, "MPI_Bcast: no memory to pack %zu bytes", b->bytes);
    b->buf = b->packed;
    b->unpack = me != root;
    if (b->unpack && keep_type && PMPI_Type_dup(t, &b->type) != MPI_SUCCESS) {
        free(b->packed);
        b->packed = NULL;
        return FR_ERROR(FR_ERR_MPI, "MPI_Ibcast: MPI_Type_dup failed");
    }
    b->own_type = b->unpack && keep_type;
    /* the root takes part even when packing failed, so that no rank waits */
    if (me == root) b->pack_st = pack_all(0, buffer, count, t, size, b->packed, comm);
    if (b->pack_st != FR_SUCCESS) memset(b->packed, 0, b->bytes);
    return FR_SUCCESS;
}

fr_status_t fr_mpi_bytes_end(fr_mpi_bytes_t *b, fr_status_t st)
{
    if (st == FR_SUCCESS && b->packed && b->unpack)
        st = pack_all(1, b->user, b->count, b->type, b->size, b->packed, b->comm);
    free(b->packed);
    b->packed = NULL;
    if (b->own_type) PMPI_Type_free(&b->type);
    b->own_type = 0;
    return b->pack_st != FR_SUCCESS ? b->pack_st : st;
}

const char *fr_mpi_bcast_why(void *buffer, int count, MPI_Datatype datatype, MPI_Comm comm, int nb,
                             fr_mpi_call_t *c)
{
    *c = (fr_mpi_call_t){ .size = 0 };
    /* (every reason here is the same on every rank of a correct program:
     * the message's bytes are, whatever datatype each rank names; the
     * size in an MPI_Count, as an element of 2 GiB or more has no int size) */
    return count < 0 ? "count" : datatype == MPI_DATATYPE_NULL ? "datatype" :
        !usable(comm) ? "communicator" : PMPI_Type_size_x(datatype, &c->size) != MPI_SUCCESS || c->size < 0 ? "datatype" :
        c->size > 0 && (unsigned long long)count > (unsigned long long)(PTRDIFF_MAX / c->size) ? "count" :
        device_unserved(buffer, count) ? "device memory (built without CUDA)" : cached_why(comm, nb, c);
}

/* FR_Bcast without its statistics, saying in *how what happened. */
static int mpi_bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, fr_mpi_served_t *how)
{
    fr_mpi_call_t c;
    const char *why = fr_mpi_bcast_why(buffer, count, datatype, comm, 0, &c);
    how->served = !why;
    how->what = why;
    how->setup = c.setup;
    if (why) return PMPI_Bcast(buffer, count, datatype, root, comm);
    fr_mpi_bytes_t b;
    fr_status_t st = fr_mpi_bytes_begin(&b, buffer, count, datatype, c.size, root, c.fc->rank, comm, 0);
    if (st == FR_SUCCESS) st = fr_mpi_bytes_end(&b, fr_bcast(b.buf, b.bytes, FR_UINT8, root, c.fc));
    if (no_ucx(&c, st, how)) return PMPI_Bcast(buffer, count, datatype, root, comm);
    how->what = fr_last_algorithm();
    how->zcopy = fr_last_zero_copy();
    how->bytes = (double)count * (double)c.size;
    how->nranks = c.fc->size;
    return fr_mpi_served_status(st, comm);
}

/* Calls fastreduce cannot serve go to PMPI_Allreduce / PMPI_Bcast
 * unchanged; fastreduce's failures come back as MPI error classes. */
int FR_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    fr_mpi_served_t h;
    fr_mpi_call_begin(&h);
    int err = h.mode & FR_MPI_DISABLED ? PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm)
                                       : mpi_allreduce(sendbuf, recvbuf, count, datatype, op, comm, &h);
    fr_mpi_call_end(FR_MPI_ALLREDUCE, &h, count, datatype, comm);
    return err;
}

int FR_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    fr_mpi_served_t h;
    fr_mpi_call_begin(&h);
    int err = h.mode & FR_MPI_DISABLED ? PMPI_Bcast(buffer, count, datatype, root, comm)
                                       : mpi_bcast(buffer, count, datatype, root, comm, &h);
    fr_mpi_call_end(FR_MPI_BCAST, &h, count, datatype, comm);
    return err;
}

/* The zero-copy steps of shm_zcopy.h.
 *
 * Allreduce: every rank posts a descriptor of its send and receive
 * buffers; once all are posted, each rank reduces its block of every chunk
 * (the blocks the copy path would give it) from every rank's input (read
 * once) into a small buffer that stays in L1 and writes it into every
 * rank's output (written once; hier first allreduces it across the nodes
 * in its own output), then posts that it is done and waits until all are,
 * so that no rank returns before its output is complete or while its input
 * is still read.
 * Bcast: the root posts a descriptor of its buffer; each other rank copies
 * from it and posts that it is done; the root waits for them and posts its
 * verdict, which the others wait for. A private root buffer is copied by
 * cma instead of mapped, with the same steps: the ranks checked at
 * fr_comm_create that they may read each other, but a buffer the kernel
 * cannot pin for another process (secret memory, a device's mapping) still
 * fails the read, and the verdict then sends every rank the copy way.
 * A rank that cannot map a peer's buffer (mmap failing, say) does nothing
 * of its part and says so with its done flag: the ranks then run the
 * copy path over what it left (its slice, or the whole bcast). */
#include <string.h>
#include "shm_zcopy.h"
#include "cma.h"
#include "shm_steps.h"
#include "shm.h"
#include "mem.h"
#include "copy.h"
#include "reduce.h"
#include "log.h"

/* A rank's descriptor: the round word last, written with a release store
 * after the rest; ok = 0 says its buffers do not qualify. */
typedef struct {
    uint64_t round;
    uint32_t ok;          /* ZC_*: how the readers take a bcast root's buffer */
    int32_t  pid;
    uint64_t frees;       /* the owner's fr_mem_frees() */
    fr_mem_ref_t send;    /* (the first line ends here) */
    fr_mem_ref_t recv;
    uint64_t addr;        /* ZC_CMA: the root's buffer, in its address space */
    char     pad[FR_SHM_ZC_DESC - 32 - 2 * sizeof(fr_mem_ref_t)];
} zdesc_t;
/* A descriptor's ok: the buffers do not qualify, they are fr_mem_alloc's
 * (the readers map them), or a bcast root's private buffer that readers
 * copy with process_vm_readv (cma.h). */
enum { ZC_NO = 0, ZC_MAPPED = 1, ZC_CMA = 2 };
_Static_assert(sizeof(zdesc_t) == FR_SHM_ZC_DESC, "a descriptor is two lines");

/* Below these sizes the copy path is as fast (docs/performance.md,
 * "Zero-copy"): its one-shot and small-ring paths take one synchronisation
 * where zero-copy takes two, and a bcast root may run ahead of its readers.
 * Where the machine's ranks outnumber its cores, a wait may be one for a
 * rank without a core, and zero-copy's second wait costs more. Both values
 * are the same on every rank of a node (comm->oversubscribed is agreed). */
#define ZC_ALLREDUCE_MIN ((size_t)4096)
#define ZC_BCAST_MIN     ((size_t)32768)
#define ZC_OVERSUBSCRIBED_ALLREDUCE_MIN ((size_t)65536)
#define ZC_OVERSUBSCRIBED_BCAST_MIN     ((size_t)131072)
/* A private root buffer is read by cma from 64 KiB to 512 KiB, where one
 * copy beats the copy path's two timed one call at a time and back to
 * back, and holds level where the root has just written its buffer;
 * outside that range, and where ranks share cores (a reader then waits for
 * a core while the root, which cannot run ahead, idles), the copy path is
 * as fast or faster somewhere (docs/performance.md, "One-copy bcast"). */
#define CMA_BCAST_MIN ((size_t)65536)
#define CMA_BCAST_MAX ((size_t)512 * 1024)
/* The chunk of the copy path that serves the slices of a rank that could
 * not map its peers' buffers (a rare failure: the size matters little). */
#define RECOVER_CHUNK (512u * 1024u)

int fr_shm_zc_allreduce_size(const struct fr_comm *comm, const fr_call_t *call)
{
    size_t min = comm->oversubscribed ? ZC_OVERSUBSCRIBED_ALLREDUCE_MIN : ZC_ALLREDUCE_MIN;
    return comm->shm && comm->shm->zc_ok && call->bytes >= min;
}

int fr_shm_zc_bcast_size(const struct fr_comm *comm, const fr_call_t *call)
{
    size_t min = comm->oversubscribed ? ZC_OVERSUBSCRIBED_BCAST_MIN : ZC_BCAST_MIN;
    return comm->shm && comm->shm->zc_ok && call->bytes >= min;
}

int fr_shm_cma_bcast_range(const struct fr_comm *comm, size_t *lo, size_t *hi)
{
    *lo = CMA_BCAST_MIN;
    *hi = CMA_BCAST_MAX;
    return comm->shm && comm->shm->cma_on;
}

int fr_shm_cma_bcast_size(const struct fr_comm *comm, const fr_call_t *call)
{
    return comm->shm && comm->shm->cma_on && call->bytes >= CMA_BCAST_MIN && call->bytes <= CMA_BCAST_MAX;
}

/* Local rank @p r's descriptor of round @p Z; stride from one rank's to the next. */
static zdesc_t *desc(fr_shm_t *s, int r, uint64_t Z)
{
    return (zdesc_t *)(s->zdesc + ((size_t)r * FR_SHM_ZC_NDESC + (size_t)(Z % FR_SHM_ZC_NDESC)) * FR_SHM_ZC_DESC);
}
#define DESC_STRIDE ((size_t)FR_SHM_ZC_NDESC * FR_SHM_ZC_DESC)

/* Post this rank's descriptor of round @p Z (its buffers' kind @p ok, a
 * bcast root's buffer at @p addr), once every rank has read the one of
 * round Z - FR_SHM_ZC_NDESC that it replaces. */
static fr_status_t post_desc(struct fr_comm *comm, uint64_t Z, int ok, const fr_mem_ref_t *send,
                             const fr_mem_ref_t *recv, const void *addr)
{
    fr_shm_t *s = comm->shm;
    if (Z > FR_SHM_ZC_NDESC && s->zseen_min < Z - FR_SHM_ZC_NDESC) {
        FR_CHECK(fr_shm_wait_all(comm, FR_SHM_F_ZSEEN, Z - FR_SHM_ZC_NDESC));
        s->zseen_min = fr_shm_flag_min(s, FR_SHM_F_ZSEEN);
    }
    zdesc_t *d = desc(s, s->lrank, Z);
    d->ok = (uint32_t)ok;
    d->pid = s->pid;
    d->frees = fr_mem_frees();
    if (ok == ZC_MAPPED) {
        d->send = *send;
        d->recv = *recv;
    }
    d->addr = (uint64_t)(uintptr_t)addr;
    fr_shm_slot_post((char *)d, Z);
    return FR_SUCCESS;
}

/* Whether this rank's buffers of @p bytes qualify (FASTREDUCE_ZERO_COPY on
 * and both from fr_mem_alloc). */
static int qualifies(const struct fr_comm *comm, const void *send, const void *recv, size_t bytes,
                     fr_mem_ref_t *sref, fr_mem_ref_t *rref)
{
    return comm->set.zero_copy && fr_mem_find(send, bytes, sref) && fr_mem_find(recv, bytes, rref);
}

/* This rank's slice of the allreduce: elements [so, so + sl), reduced
 * from in[] and written to out[] (to out[me] alone with @p own_only) in one
 * pass, streamed with @p stream. The inputs are taken in the copy path's
 * order (rank order, or with @p own_first this rank's input first and then
 * the others' in rank order), so that a result has the same bits whichever
 * memory its buffers are in. */
static void reduce_slice(fr_shm_t *s, const fr_call_t *call, char **in, char **out, size_t so, size_t sl,
                         int own_first, int own_only, int stream)
{
    const size_t at = so * fr_dtype_size(call->dtype);
    const int l = s->lsize, me = s->lrank;
    const void **src = s->zin;
    void **dst = s->zout;
    int nin = 0, nout = 0;
    if (own_first) src[nin++] = in[me] + at;
    for (int j = 0; j < l; j++)
        if (!own_first || j != me) src[nin++] = in[j] + at;
    /* (the next rank's output first: the ranks start on different ones) */
    for (int k = 1; k <= l; k++)
        if (!own_only || (me + k) % l == me) dst[nout++] = out[(me + k) % l] + at;
    fr_reduce_fanout(dst, nout, src, nin, sl, call->dtype, call->op, stream);
}

/* This rank's block [at, at + sl) of chunk @p k of a hierarchical call:
 * reduced into its own output, handed to @p between (across the nodes),
 * then written into the other ranks' outputs. */
static fr_status_t between_block(struct fr_comm *comm, const fr_call_t *call, char **in, char **out, size_t at,
                                 size_t sl, unsigned k, fr_slice_fn between, fr_copy_fn copy_out)
{
    fr_shm_t *s = comm->shm;
    const size_t es = fr_dtype_size(call->dtype);
    char *mine = out[s->lrank] + at * es;
    reduce_slice(s, call, in, out, at, sl, 1, 1, 0);
    if (sl) FR_CHECK(between(comm, call, mine, sl, k));
    for (int j = 0; j < s->lsize; j++)
        if (j != s->lrank) copy_out(out[j] + at * es, mine, sl * es);
    return FR_SUCCESS;
}

/* Map every peer's buffers of round @p Z into in[] and out[] (this rank's
 * own are the call's): 1, or 0 when one cannot be mapped. */
static int map_peers(fr_shm_t *s, const fr_call_t *call, uint64_t Z, char **in, char **out)
{
    int ok = 1;
    for (int r = 0; r < s->lsize; r++) {
        if (r == s->lrank) {
            in[r] = (char *)call->sendbuf;
            out[r] = call->recvbuf;
            continue;
        }
        const zdesc_t *d = desc(s, r, Z);
        in[r] = fr_mem_peer(d->pid, d->frees, &d->send);
        out[r] = fr_mem_peer(d->pid, d->frees, &d->recv);
        ok = ok && in[r] && out[r];
    }
    return ok;
}

/* Whether local rank @p r posted ZFAIL for round @p Z. */
static int failed_at(fr_shm_t *s, int r, uint64_t Z)
{
    return __atomic_load_n(fr_shm_flag(s, r, FR_SHM_F_ZFAIL), __ATOMIC_ACQUIRE) == Z;
}

/* Whether any local rank posted ZFAIL for round @p Z. */
static int any_failed(fr_shm_t *s, uint64_t Z)
{
    int f = 0;
    for (int r = 0; r < s->lsize; r++) f |= failed_at(s, r, Z);
    return f;
}

/* The copy path over the slices of the ranks that posted ZFAIL for round
 * @p Z (the same on every rank): their block of every chunk of @p cel
 * elements; the other blocks are complete. */
static fr_status_t recover_slices(struct fr_comm *comm, const fr_call_t *call, size_t cel, uint64_t Z)
{
    fr_shm_t *s = comm->shm;
    const size_t es = fr_dtype_size(call->dtype);
    for (int f = 0; f < s->lsize; f++) {
        if (!failed_at(s, f, Z)) continue;
        FR_INFO(FR_SUB_SHM, "zero-copy: local rank %d could not map a peer's buffer; its slices go the copy way",
                f);
        for (size_t c0 = 0; c0 < call->count; c0 += cel) {
            size_t fo, fl, n = call->count - c0 < cel ? call->count - c0 : cel;
            fr_block(n, s->lsize, f, &fo, &fl);
            fr_call_t sub = *call;
            sub.sendbuf = (const char *)call->sendbuf + (c0 + fo) * es;
            sub.recvbuf = (char *)call->recvbuf + (c0 + fo) * es;
            sub.count = fl;
            sub.bytes = fl * es;
            sub.chunk = 0;
            if (fl) FR_CHECK(fr_shm_allreduce_chunks(comm, &sub, RECOVER_CHUNK, NULL));
        }
    }
    return FR_SUCCESS;
}

fr_status_t fr_shm_zc_allreduce(struct fr_comm *comm, fr_call_t *call, size_t cel, int own_first,
                                fr_slice_fn between, int *done)
{
    fr_shm_t *s = comm->shm;
    const int l = s->lsize, me = s->lrank;
    uint64_t Z = ++s->round[FR_SHM_F_ZDESC];
    fr_mem_ref_t sref, rref;
    int ok = qualifies(comm, call->sendbuf, call->recvbuf, call->bytes, &sref, &rref);
    *done = 0;
    FR_CHECK(post_desc(comm, Z, ok, &sref, &rref, NULL));
    if (ok) {
        FR_CHECK(fr_shm_wait_slots(comm, (char *)desc(s, 0, Z), DESC_STRIDE, FR_SHM_F_ZDESC, Z));
        for (int r = 0; r < l && ok; r++) ok = desc(s, r, Z)->ok;
    }
    if (!ok) {
        /* (every rank that read the descriptors saw the same "no") */
        fr_shm_post(s, FR_SHM_F_ZSEEN, Z);
        return FR_SUCCESS;
    }
    char **in = s->zptr, **out = s->zptr + l;
    int mapped = map_peers(s, call, Z, in, out);
    if (!mapped) fr_shm_post(s, FR_SHM_F_ZFAIL, Z);
    fr_shm_post(s, FR_SHM_F_ZSEEN, Z);
    if (between) {
        /* A hierarchical call cannot leave a rank's blocks out: its peers on
         * the other nodes wait for them. So the node's ranks first see that
         * all have mapped, and take the copy path together if one has not
         * (its slices cross the nodes as these would: nodes may differ). */
        FR_CHECK(fr_shm_wait_all(comm, FR_SHM_F_ZSEEN, Z));
        if (any_failed(s, Z)) return FR_SUCCESS;
    }
    /* Results are streamed once every rank's input and output (twice the
     * message a rank) outgrow its share of the last-level cache: plain
     * stores then only push out lines that the next call reads again. */
    fr_copy_fn copy_out = fr_copy_for(2 * call->bytes, fr_stream_min(comm->llc_share));
    /* this rank's block of every chunk, as the copy path would cut them */
    unsigned k = 0;
    for (size_t c0 = 0; mapped && c0 < call->count; c0 += cel, k++) {
        size_t so, sl, n = call->count - c0 < cel ? call->count - c0 : cel;
        fr_block(n, l, me, &so, &sl);
        if (between) FR_CHECK(between_block(comm, call, in, out, c0 + so, sl, k, between, copy_out));
        else reduce_slice(s, call, in, out, c0 + so, sl, own_first, 0, copy_out == fr_copy_stream);
    }
    fr_shm_post(s, FR_SHM_F_ZDONE, Z);
    FR_CHECK(fr_shm_wait_all(comm, FR_SHM_F_ZDONE, Z));
    int failed = any_failed(s, Z);
    if (failed) FR_CHECK(recover_slices(comm, call, cel, Z));
    call->zcopy = !failed;
    *done = 1;
    return FR_SUCCESS;
}


/* A reader's copy of the root's buffer, described by @p d: mapped (an
 * fr_mem_alloc buffer) or by cma. 1 when it has the data, 0 when it could
 * not take it (the verdict then sends every rank the copy way). */
static int read_root(struct fr_comm *comm, fr_call_t *call, const zdesc_t *d, uint64_t Z)
{
    fr_shm_t *s = comm->shm;
    const int32_t pid = d->pid;
    const uint64_t addr = d->addr;
    if (d->ok == ZC_CMA) {
        fr_shm_post(s, FR_SHM_F_ZSEEN, Z);
        return fr_cma_read(pid, addr, call->recvbuf, call->bytes) == 0;
    }
    /* (FASTREDUCE_ZERO_COPY=0 on a reader: it does not map) */
    char *from = comm->set.zero_copy ? fr_mem_peer(pid, d->frees, &d->send) : NULL;
    fr_shm_post(s, FR_SHM_F_ZSEEN, Z);
    if (from) fr_shm_copy_for(comm, call)(call->recvbuf, from, call->bytes);
    return from != NULL;
}

fr_status_t fr_shm_zc_bcast(struct fr_comm *comm, fr_call_t *call, int *done)
{
    fr_shm_t *s = comm->shm;
    const int root = comm->rank_local[call->root];
    uint64_t Z = ++s->round[FR_SHM_F_ZDESC];
    int failed = 0, kind;
    *done = 0;
    if (s->lrank == root) {
        fr_mem_ref_t ref;
        int mapped = fr_shm_zc_bcast_size(comm, call) &&
                     qualifies(comm, call->recvbuf, call->recvbuf, call->bytes, &ref, &ref);
        kind = mapped ? ZC_MAPPED : fr_shm_cma_bcast_size(comm, call) ? ZC_CMA : ZC_NO;
        FR_CHECK(post_desc(comm, Z, kind, &ref, &ref, call->recvbuf));
        fr_shm_post(s, FR_SHM_F_ZSEEN, Z);
        if (kind == ZC_NO) return FR_SUCCESS;
        for (int r = 0; r < s->lsize; r++) {
            if (r == root) continue;
            FR_CHECK(fr_shm_wait_one(comm, r, FR_SHM_F_ZDONE, Z));
            failed |= failed_at(s, r, Z);
        }
        /* the verdict: readers wait for it, and run the copy path with the root if one failed */
        if (failed) fr_shm_post(s, FR_SHM_F_ZFAIL, Z);
        fr_shm_post(s, FR_SHM_F_ZDONE, Z);
    } else {
        zdesc_t *d = desc(s, root, Z);
        FR_CHECK(fr_shm_wait_slot(comm, root, (char *)d, FR_SHM_F_ZDESC, Z));
        kind = (int)d->ok;
        if (kind == ZC_NO) {
            fr_shm_post(s, FR_SHM_F_ZSEEN, Z);
            return FR_SUCCESS;
        }
        if (!read_root(comm, call, d, Z)) fr_shm_post(s, FR_SHM_F_ZFAIL, Z);
        fr_shm_post(s, FR_SHM_F_ZDONE, Z);
        FR_CHECK(fr_shm_wait_one(comm, root, FR_SHM_F_ZDONE, Z));
        failed = failed_at(s, root, Z);
    }
    if (failed)
        FR_INFO(FR_SUB_SHM, "%s: a rank could not read the root's buffer%s; the bcast goes the copy way",
                kind == ZC_CMA ? "cma" : "zero-copy", kind == ZC_CMA ? "" : " (or has FASTREDUCE_ZERO_COPY=0)");
    call->zcopy = !failed && kind == ZC_MAPPED;
    call->cma = !failed && kind == ZC_CMA;
    *done = !failed;
    return FR_SUCCESS;
}

fr_status_t fr_shm_zc_stream_start(struct fr_comm *comm, const fr_call_t *call, int src, size_t nchunks,
                                   fr_zc_stream_t *z)
{
    fr_shm_t *s = comm->shm;
    *z = (fr_zc_stream_t){.src = src, .Z = ++s->round[FR_SHM_F_ZDESC]};
    if (s->lrank == src) {
        fr_mem_ref_t ref;
        int ok = qualifies(comm, call->recvbuf, call->recvbuf, call->bytes, &ref, &ref);
        FR_CHECK(post_desc(comm, z->Z, ok, &ref, &ref, NULL));
        fr_shm_post(s, FR_SHM_F_ZSEEN, z->Z);
        if (!ok) return FR_SUCCESS;
        /* the verdict, before any chunk: every rank mapped the buffer, or all take the copy path */
        FR_CHECK(fr_shm_wait_all(comm, FR_SHM_F_ZSEEN, z->Z));
        z->on = !any_failed(s, z->Z);
        if (!z->on) fr_shm_post(s, FR_SHM_F_ZFAIL, z->Z);
        fr_shm_post(s, FR_SHM_F_ZDONE, z->Z);
    } else {
        zdesc_t *d = desc(s, src, z->Z);
        FR_CHECK(fr_shm_wait_slot(comm, src, (char *)d, FR_SHM_F_ZDESC, z->Z));
        if (!d->ok) {
            fr_shm_post(s, FR_SHM_F_ZSEEN, z->Z);
            return FR_SUCCESS;
        }
        z->from = comm->set.zero_copy ? fr_mem_peer(d->pid, d->frees, &d->send) : NULL;
        if (!z->from) fr_shm_post(s, FR_SHM_F_ZFAIL, z->Z);
        fr_shm_post(s, FR_SHM_F_ZSEEN, z->Z);
        FR_CHECK(fr_shm_wait_one(comm, src, FR_SHM_F_ZDONE, z->Z));
        z->on = !failed_at(s, src, z->Z);
    }
    if (z->on) {
        z->base = s->round[FR_SHM_F_ZAVAIL];
        s->round[FR_SHM_F_ZAVAIL] += nchunks;
    }
    return FR_SUCCESS;
}

void fr_shm_zc_stream_ready(struct fr_comm *comm, const fr_zc_stream_t *z, size_t k)
{
    fr_shm_post(comm->shm, FR_SHM_F_ZAVAIL, z->base + k);
}

fr_status_t fr_shm_zc_stream_copy(struct fr_comm *comm, const fr_zc_stream_t *z, size_t k, char *data, size_t off,
                                  size_t n, fr_copy_fn copy)
{
    FR_CHECK(fr_shm_wait_one(comm, z->src, FR_SHM_F_ZAVAIL, z->base + k + 1));
    copy(data + off, z->from + off, n);
    return FR_SUCCESS;
}

fr_status_t fr_shm_zc_stream_end(struct fr_comm *comm, const fr_zc_stream_t *z)
{
    fr_shm_t *s = comm->shm;
    if (s->lrank != z->src) {
        fr_shm_post(s, FR_SHM_F_ZDONE, z->Z);
        return FR_SUCCESS;
    }
    for (int r = 0; r < s->lsize; r++)
        if (r != z->src) FR_CHECK(fr_shm_wait_one(comm, r, FR_SHM_F_ZDONE, z->Z));
    return FR_SUCCESS;
}

/* The shared-memory steps of shm_steps.h. */
#include "shm_steps.h"
#include "alg_util.h"
#include "copy.h"
#include "reduce.h"
#include "shm.h"
#include "log.h"

/* Long copies and reductions run in pieces of this many bytes while a
 * background transfer is in flight, which is moved on between them. */
#define BG_PIECE ((size_t)256 * 1024)

/* Copy @p bytes with @p copy, or with NULL by fr_shm_put (timed piece by
 * piece), in pieces between which a background transfer moves on. */
static fr_status_t copy_bg(struct fr_comm *comm, fr_copy_fn copy, char *dst, const char *src, size_t bytes)
{
    if (copy && !comm->bg) {
        copy(dst, src, bytes);
        return FR_SUCCESS;
    }
    for (size_t o = 0; o < bytes; o += BG_PIECE) {
        size_t n = bytes - o < BG_PIECE ? bytes - o : BG_PIECE;
        if (copy) copy(dst + o, src + o, n);
        else fr_shm_put(comm->shm, dst + o, src + o, n);
        if (comm->bg) FR_CHECK(comm->bg(comm, comm->bg_arg));
    }
    return FR_SUCCESS;
}

/* How far round R's @p bytes start from the start of their slot, which has
 * room for @p spare bytes more, @p nbuf buffers taking turns. Placing the
 * data of a buffer's successive rounds one after the other across up to
 * ROTATE_SPAN bytes, rather than always at the slot's start, means a rank
 * overwrites lines the readers last touched megabytes of traffic ago: out
 * of their private caches, so a store need not first take its line back
 * from another core. Every rank computes the same place from R and the
 * size. */
#define ROTATE_SPAN ((size_t)512 * 1024)
/* Larger pieces are not moved: a message of several of them already spreads
 * over the buffers, and a wider footprint costs more in the shared cache.
 * A message of one piece has no such spread, and is moved below
 * ROTATE_ONE_BELOW. Nor are pieces under a page: for those, lines that a
 * reader holds cost the writer less than lines fetched from the shared
 * cache or memory (docs/performance.md, "Design decisions"). */
#define ROTATE_BELOW     ((size_t)256 * 1024)
#define ROTATE_ONE_BELOW ((size_t)512 * 1024)
#define ROTATE_FROM      ((size_t)4096)
/* The places a piece of @p bytes takes in turn: *step apart, as many as
 * returned (1: it stays at the slot's start). */
static size_t rotate_places(size_t bytes, size_t spare, size_t below, size_t *step)
{
    *step = (bytes + 4095) / 4096 * 4096;
    if (bytes < ROTATE_FROM || bytes >= below) return 1;
    if (spare > ROTATE_SPAN) spare = ROTATE_SPAN;
    return spare / *step + 1;
}

static size_t rotate(uint64_t R, unsigned nbuf, size_t bytes, size_t spare, size_t below)
{
    size_t step, places = rotate_places(bytes, spare, below, &step);
    return (size_t)(R / nbuf % places) * step;
}

/* How far into its slot a piece of @p bytes reaches at most, from @p head
 * bytes past the slot's start: what fr_shm_ready maps before its first use. */
static size_t rotate_reach(size_t head, size_t bytes, size_t spare, size_t below)
{
    size_t step, places = rotate_places(bytes, spare, below, &step);
    return head + (places - 1) * step + bytes;
}

/* Where the buffers of allreduce round @p R start, for a chunk of @p n
 * elements of @p call (the pages chunks of this size reach mapped first). */
static char *red_bufs(fr_shm_t *s, const fr_call_t *call, uint64_t R, size_t n)
{
    const size_t bytes = n * fr_dtype_size(call->dtype);
    const size_t below = bytes == call->bytes ? ROTATE_ONE_BELOW : ROTATE_BELOW;
    fr_shm_ready(s->red, s->red_slot, (size_t)FR_SHM_RED_NBUF * (size_t)s->lsize,
                 rotate_reach(0, bytes, s->red_slot - bytes, below), &s->red_ready);
    return fr_shm_red(s, R) + rotate(R, FR_SHM_RED_NBUF, bytes, s->red_slot - bytes, below);
}

/* dst[0..n) = own op (every other local rank's copy at element @p at of
 * its slot in @p bufs), in rank order. */
static void reduce_slice(fr_shm_t *s, const fr_call_t *call, char *dst, const char *own, const char *bufs,
                         size_t at, size_t n)
{
    const size_t es = fr_dtype_size(call->dtype);
    int first = 1;
    for (int j = 0; j < s->lsize; j++) {
        if (j == s->lrank) continue;
        const char *src = bufs + (size_t)j * s->red_slot + at * es;
        if (first) fr_reduce3(dst, own, src, n, call->dtype, call->op);
        else fr_reduce(dst, src, n, call->dtype, call->op);
        first = 0;
    }
}

fr_status_t fr_shm_rs_chunk(struct fr_comm *comm, const fr_call_t *call, const char *send, size_t n,
                            char *recv, char **slice, uint64_t *round, size_t *so, size_t *sl)
{
    fr_shm_t *s = comm->shm;
    const int l = s->lsize, me = s->lrank;
    const size_t es = fr_dtype_size(call->dtype);
    uint64_t R = ++s->round[FR_SHM_F_ARRIVE];
    char *bufs = red_bufs(s, call, R, n);
    char *mine = bufs + (size_t)me * s->red_slot;
    fr_block(n, l, me, so, sl);
    /* Buffer R % FR_SHM_RED_NBUF is free once every rank has started R-1 (shm.h). */
    if (R > 1) FR_CHECK(fr_shm_wait_all(comm, FR_SHM_F_ARRIVE, R - 1));
    /* my own slice is read from the send buffer: only the others go in */
    FR_CHECK(copy_bg(comm, NULL, mine, send, *so * es));
    FR_CHECK(copy_bg(comm, NULL, mine + (*so + *sl) * es, send + (*so + *sl) * es, (n - *so - *sl) * es));
    fr_shm_post(s, FR_SHM_F_ARRIVE, R);
    FR_CHECK(fr_shm_wait_all(comm, FR_SHM_F_ARRIVE, R));

    char *res = mine + *so * es;
    const char *own = send + *so * es;
    /* piece by piece: with @p recv, pieces that stay in L1, reduced into
     * recv and copied from there into the segment; else one piece, or
     * pieces of a background transfer's period, or, while puts stream,
     * pieces that fit s->tmp and go out from there */
    const int stream = fr_shm_streaming(s);
    fr_copy_fn out = stream ? fr_copy_stream : fr_copy;
    char *mine_out = recv ? recv + *so * es : NULL;
    size_t piece = recv || stream ? FR_SHM_TMP : comm->bg ? BG_PIECE : *sl * es;
    size_t pe = piece / es ? piece / es : 1;
    for (size_t po = 0; po < *sl; po += pe) {
        size_t pn = *sl - po < pe ? *sl - po : pe;
        char *to = mine_out ? mine_out + po * es : stream ? s->tmp : res + po * es;
        reduce_slice(s, call, to, own + po * es, bufs, *so + po, pn);
        if (to != res + po * es) out(res + po * es, to, pn * es);
        if (comm->bg) FR_CHECK(comm->bg(comm, comm->bg_arg));
    }
    *slice = res;
    *round = R;
    return FR_SUCCESS;
}

fr_status_t fr_shm_ag_chunk(struct fr_comm *comm, const fr_call_t *call, char *recv, size_t n, uint64_t R,
                     int have_own, fr_copy_fn copy_out)
{
    fr_shm_t *s = comm->shm;
    const int l = s->lsize, me = s->lrank;
    const size_t es = fr_dtype_size(call->dtype);
    char *bufs = red_bufs(s, call, R, n);
    fr_shm_post(s, FR_SHM_F_REDUCED, R);
    for (int k = 0; k < l; k++) {
        int j = (me + k) % l;   /* my own slice first: it is ready */
        size_t jo, jl;
        fr_block(n, l, j, &jo, &jl);
        if (j == me && have_own) continue;
        if (j != me) FR_CHECK(fr_shm_wait_one(comm, j, FR_SHM_F_REDUCED, R));
        FR_CHECK(copy_bg(comm, copy_out, recv + jo * es, bufs + (size_t)j * s->red_slot + jo * es, jl * es));
    }
    return FR_SUCCESS;
}

/* The next slot of a bcast ring whose @p nbuf slots of @p stride bytes
 * at @p base are used in turn (*n counts the uses, last[] the round that
 * used each slot last): it becomes round R's, and is free once round
 * *free_at is done everywhere. */
static char *ring_slot(char *base, size_t stride, size_t nbuf, uint64_t *n, uint64_t *last, uint64_t R,
                       uint64_t *free_at)
{
    size_t k = (size_t)((*n)++ % nbuf);
    *free_at = last[k];
    last[k] = R;
    return base + k * stride;
}

/* How many slots of the large ring a chunk of @p n bytes of a message of
 * @p total takes turns in. A message of FR_SHM_BCAST_NBUF chunks or more
 * has all of them, to stream through (two would stall it); a shorter one
 * has as many as fit in BCAST_SPAN bytes (two at least), so that a run of
 * such messages keeps writing the same few megabytes, which stay cached
 * when other collectives run between them. */
#define BCAST_SPAN ((size_t)2 * 1024 * 1024)
static size_t bcast_slots(size_t n, size_t total)
{
    if (!n || total / n >= FR_SHM_BCAST_NBUF) return FR_SHM_BCAST_NBUF;
    size_t k = BCAST_SPAN / n;
    return k < 2 ? 2 : k > FR_SHM_BCAST_NBUF ? FR_SHM_BCAST_NBUF : k;
}

fr_status_t fr_shm_bcast_chunk(struct fr_comm *comm, int root, char *data, size_t n, size_t total,
                               fr_copy_fn copy_out)
{
    fr_shm_t *s = comm->shm;
    /* (callers cut chunks to fit: one that does not would overrun its slot) */
    if (n > FR_SHM_BSMALL && n > fr_shm_bcast_max(s))
        return FR_ERROR(FR_ERR_INTERNAL, "shm bcast: a chunk of %zu bytes is longer than the %zu-byte slot", n,
                        fr_shm_bcast_max(s));
    uint64_t R = ++s->round[FR_SHM_F_BREADY], free_at;
    char *slot, *at;
    if (n <= FR_SHM_BTINY) {
        slot = ring_slot(s->btiny, FR_SHM_BTINY_SLOT, FR_SHM_BTINY_NBUF, &s->btiny_n, s->btiny_round, R, &free_at);
        at = slot + sizeof(uint64_t);
    } else if (n <= FR_SHM_BSMALL) {
        slot = ring_slot(s->bsmall, FR_SHM_BSMALL_SLOT, FR_SHM_BSMALL_NBUF, &s->bsmall_n, s->bsmall_round, R,
                         &free_at);
        at = fr_shm_slot_data(slot, n);
    } else {
        slot = ring_slot(s->bc, s->bc_slot, bcast_slots(n, total), &s->bc_n, s->bc_round, R, &free_at);
        at = fr_shm_slot_data(slot, n);
        fr_shm_ready(s->bc, s->bc_slot, FR_SHM_BCAST_NBUF,
                     rotate_reach((size_t)(at - slot), n, fr_shm_bcast_max(s) - n, ROTATE_BELOW), &s->bc_ready);
        /* (rotated by this ring's own count of uses, which picked the slot:
         * R counts the other rings' chunks too) */
        at += rotate(s->bc_n - 1, FR_SHM_BCAST_NBUF, n, fr_shm_bcast_max(s) - n, ROTATE_BELOW);
    }
    if (s->lrank == root) {
        /* what the flags said last time often shows the slot free already,
         * and then no line moves */
        if (free_at && s->back_seen < free_at) {
            FR_CHECK(fr_shm_wait_all(comm, FR_SHM_F_BACK, free_at));
            s->back_seen = fr_shm_flag_min(s, FR_SHM_F_BACK);
        }
        fr_shm_put(s, at, data, n);
        fr_shm_slot_post(slot, R);
    } else {
        FR_CHECK(fr_shm_wait_slot(comm, root, slot, FR_SHM_F_BREADY, R));
        copy_out(data, at, n);
    }
    fr_shm_post(s, FR_SHM_F_BACK, R);
    return FR_SUCCESS;
}

size_t fr_shm_chunk_elems(const struct fr_comm *comm, const fr_call_t *call, size_t def_chunk)
{
    const size_t es = fr_dtype_size(call->dtype);
    return fr_alg_chunk_elems(call, def_chunk, es, comm->shm->red_slot / es);
}

fr_status_t fr_shm_allreduce_chunks(struct fr_comm *comm, const fr_call_t *call, size_t def_chunk,
                                    fr_slice_fn between)
{
    /* A result larger than this rank's share of the cache is written with
     * streaming stores: it saves reading the destination lines first. */
    fr_copy_fn copy_out = fr_shm_copy_for(comm, call);
    const size_t es = fr_dtype_size(call->dtype), cel = fr_shm_chunk_elems(comm, call, def_chunk);
    unsigned k = 0;
    for (size_t off = 0; off < call->count; off += cel, k++) {
        size_t n = call->count - off < cel ? call->count - off : cel, so, sl;
        uint64_t R;
        char *slice;
        char *recv = (char *)call->recvbuf + off * es;
        /* without a step between, this rank's slice is reduced straight
         * into recv (a step between changes it in the segment) */
        FR_CHECK(fr_shm_rs_chunk(comm, call, (const char *)call->sendbuf + off * es, n, between ? NULL : recv,
                                 &slice, &R, &so, &sl));
        if (between) FR_CHECK(between(comm, call, slice, sl, k));
        FR_CHECK(fr_shm_ag_chunk(comm, call, recv, n, R, !between, copy_out));
    }
    return FR_SUCCESS;
}

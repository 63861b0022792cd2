/* The node's shared-memory segment: created by local rank 0, mapped by the
 * node's ranks; a memfd, never named, or where that cannot be shared a
 * /dev/shm name unlinked as soon as all have mapped it (one a job killed
 * before then left is swept by the node's next: shm_sweep.c). It holds a control area of flags, one per rank
 * and cache line, and data slots used by the shm algorithms. */
#ifndef FR_SHM_H
#define FR_SHM_H

#include <stdint.h>
#include <stddef.h>
#include "comm.h"
#include "copy.h"

#define FR_CACHELINE 64

typedef struct fr_shm_flag {
    volatile uint64_t v;
    char pad[FR_CACHELINE - sizeof(uint64_t)];
} fr_shm_flag_t;

/* Flags per rank, each a counter of rounds that only grows. Those of the
 * small allreduce and of the bcast rings live in the header of the slot
 * they publish (below), so a reader's first miss brings a small message's
 * data with it: FR_SHM_F_SMALL and FR_SHM_F_BREADY only index s->round,
 * and their lines in the flag area go unused. */
enum { FR_SHM_F_SMALL = 0, FR_SHM_F_ARRIVE, FR_SHM_F_REDUCED, FR_SHM_F_BREADY, FR_SHM_F_BACK,
       FR_SHM_F_ZDESC, FR_SHM_F_ZSEEN, FR_SHM_F_ZDONE, FR_SHM_F_ZFAIL, FR_SHM_F_ZAVAIL, FR_SHM_NFLAGS };
/* The zero-copy calls (algorithms/shm_zcopy.c): FR_SHM_F_ZDESC indexes
 * s->round only (the round lives in the descriptor's first word); ZSEEN
 * is the last round whose descriptors a rank no longer needs, ZDONE the
 * last round a rank finished its part of, ZFAIL the last round in which it
 * could not map a peer's buffer; ZAVAIL counts the chunks a hier bcast's
 * node leader has in its buffer (s->round[FR_SHM_F_ZAVAIL], the chunks of
 * every such call so far, is the same on the node's ranks). */
#define FR_SHM_ZC_DESC  128   /* bytes of one descriptor: two lines */
#define FR_SHM_ZC_NDESC 16    /* descriptors of each rank in turn */
#define FR_SHM_SMALL   16384          /* data bytes per rank in each of the two small slots */
/* A slot that carries its own flag starts with a header line: its first
 * word is the last round published in the slot. Data of up to
 * FR_SHM_INLINE bytes follows the word in the same line; longer data starts
 * at the next line, so it stays aligned for the vector loops. */
#define FR_SHM_HDR     FR_CACHELINE
#define FR_SHM_INLINE  (FR_CACHELINE - sizeof(uint64_t))
/* Bytes per slot, header included, of the small allreduce and the small
 * bcast ring. */
#define FR_SHM_SMALL_SLOT  ((size_t)FR_SHM_HDR + FR_SHM_SMALL)
/* A small allreduce whose data fits in the header line (FR_SHM_INLINE
 * bytes) takes the next of FR_SHM_TINY_NR lines of each rank every round,
 * so the line a rank writes was last read by the others that many rounds
 * ago (algorithms/allreduce_shm.c says what it gained). */
#define FR_SHM_TINY_NR     256
#define FR_SHM_BSMALL_SLOT ((size_t)FR_SHM_HDR + FR_SHM_BSMALL)
#define FR_SHM_BCAST_NBUF 8           /* chunks in flight in the bcast ring */
/* Bcast chunks of up to FR_SHM_BSMALL bytes go through a deeper ring of
 * their own, so a root can run that many small broadcasts ahead of ranks
 * that wait for a core; its 256 slots put the lines a root writes 4 MiB of
 * slots behind the ones readers may still hold (docs/performance.md,
 * "Design decisions"). */
#define FR_SHM_BSMALL      16384
#define FR_SHM_BSMALL_NBUF 256
/* Chunks of up to FR_SHM_BTINY bytes go through a ring of slots of
 * FR_SHM_BTINY_SLOT bytes (the round word and the data), four to a line:
 * a reader behind the root gets four broadcasts with one line, as a
 * point-to-point fast box packs small messages. */
#define FR_SHM_BTINY       8
#define FR_SHM_BTINY_SLOT  16
#define FR_SHM_BTINY_NBUF  512
/* Buffers of the chunked allreduce. A rank reuses buffer R % 3 at round R
 * once every rank of the node has arrived at round R-1: by then each has
 * finished the allgather of round R-3, also when hier allreduce runs the
 * allgather of round R-1 only after the reduce-scatter of round R. */
#define FR_SHM_NCLASS 4   /* size classes of timed puts (fr_shm_put) */
#define FR_SHM_RED_NBUF 3

typedef struct fr_shm {
    void          *base;
    size_t         size;
    int            lrank, lsize;
    fr_shm_flag_t *flags;     /* [lsize * FR_SHM_NFLAGS] */
    char          *small;     /* [2][lsize][FR_SHM_SMALL_SLOT]: one-shot small allreduce */
    char          *small_tiny; /* [lsize][FR_SHM_TINY_NR] lines: the same for data in a header line */
    char          *small_prev; /* where the last small allreduce's slots start, */
    size_t         small_prev_stride; /* and the bytes from one rank's slot to the next */
    char          *red;       /* [FR_SHM_RED_NBUF][lsize][red_slot]: chunked large allreduce */
    size_t         red_slot;  /* bytes per rank per buffer */
    size_t         red_ready; /* bytes of every red slot mapped so far (fr_shm_ready) */
    char          *bc;        /* [FR_SHM_BCAST_NBUF][bc_slot]: bcast ring (slots with a header) */
    uint64_t       bc_n;      /* large bcast chunks so far (the same on every local rank) */
    uint64_t       bc_round[FR_SHM_BCAST_NBUF]; /* the bcast round that last used each large slot */
    size_t         bc_slot;   /* bytes per bcast slot, header included */
    size_t         bc_ready;  /* bytes of every bcast slot mapped so far (fr_shm_ready) */
    char          *bsmall;    /* [FR_SHM_BSMALL_NBUF][FR_SHM_BSMALL_SLOT]: the small bcast ring */
    uint64_t       bsmall_n;  /* small bcast chunks so far (the same on every local rank) */
    uint64_t       bsmall_round[FR_SHM_BSMALL_NBUF]; /* the bcast round that last used each small slot */
    char          *btiny;     /* [FR_SHM_BTINY_NBUF][FR_SHM_BTINY_SLOT]: the tiny bcast ring */
    uint64_t       btiny_n;   /* tiny bcast chunks so far (the same on every local rank) */
    uint64_t       btiny_round[FR_SHM_BTINY_NBUF]; /* the bcast round that last used each tiny slot */
    uint64_t       round[FR_SHM_NFLAGS]; /* this rank's local copy of its flag counters */
    uint64_t       back_seen; /* bcast root: the least 'bcast-done' round the flags showed */
    /* How this rank writes data that other ranks read (fr_shm_put): */
    int            stream_mode;  /* FASTREDUCE_SHM_STREAM: -1 auto, 0 never, 1 always */
    int            streaming;    /* auto: streaming stores now */
    unsigned       probe[FR_SHM_NCLASS]; /* auto: puts of each size class left before the next one made
                                            the other way */
    unsigned       slow_puts;    /* auto: timed plain puts in a row that ran slow */
    unsigned       gap;          /* auto, streaming: puts of a class between plain probes now */
    double         slow_ratio;   /* auto: a plain put is slow past this many times a streaming one */
    double         stream_ref[FR_SHM_NCLASS];  /* auto: ns/byte of a streaming put of each size class
                                                  (the faster of the last two; 0 before the first) */
    double         stream_last[FR_SHM_NCLASS]; /* auto: the last one's */
    char          *tmp;          /* FR_SHM_TMP bytes: a reduction's output before a streaming put */
    char          *zdesc;        /* [lsize][FR_SHM_ZC_NDESC][FR_SHM_ZC_DESC]: zero-copy descriptors */
    uint64_t       zseen_min;    /* the least ZSEEN round the flags showed last */
    int            zc_ok;        /* the node's ranks open each other's memfds (zero-copy possible) */
    int            cma_on;       /* bcasts of private buffers go by cma here (agreed: fr_shm_create) */
    int32_t        pid;          /* this process's id, as its zero-copy descriptors give it */
    char         **zptr;         /* [2][lsize]: a zero-copy call's inputs and outputs as this rank maps them */
    const void   **zin;          /* [lsize], in zptr's block: a slice's inputs, in the order reduced */
    void         **zout;         /* [lsize], in zptr's block: a slice's outputs */
} fr_shm_t;

/* How this rank writes the result of @p call: with streaming stores from
 * its share of the machine's last-level caches (fr_stream_min). */
static inline fr_copy_fn fr_shm_copy_for(const struct fr_comm *comm, const fr_call_t *call)
{
    return fr_copy_for(call->bytes, fr_stream_min(comm->llc_share));
}

/* Puts of fewer bytes are plain and untimed. */
#define FR_SHM_PUT_MIN 4096
#define FR_SHM_TMP     16384

/* Copy @p n bytes of this rank's into the segment, for other ranks to read.
 * The lines written were read by them in an earlier round, so an ordinary
 * store must first take each line back from the reader's cache. Near the
 * reader (a shared L3) that is cheap; across dies or sockets it runs three
 * to twenty times slower than a copy. In auto mode every put is timed; the
 * first of each size class and then every FR_SHM_PROBE-th of the class is
 * made the other way: streaming stores (no line is fetched) while plain,
 * plain while streaming. When two plain puts in a row
 * ran slower than s->slow_ratio (FR_SHM_SLOW in settings.h, or R of
 * FASTREDUCE_SHM_STREAM=auto:R) times a streaming put of their size class,
 * the next ones stream; a plain probe that is not slow ends that (while
 * streaming, the probes come after 4 puts of a class, then 8, 16, 32, 64). */
void fr_shm_put(fr_shm_t *s, void *dst, const void *src, size_t n);
/* Whether puts are streaming now (a reduction's output then goes into the
 * segment with streaming stores too, from the result or from s->tmp). */
static inline int fr_shm_streaming(const fr_shm_t *s)
{
    return s->stream_mode == 1 || (s->stream_mode < 0 && s->streaming);
}

/* Collective over comm->mpi (every rank: FASTREDUCE_SHM_SIZE is rank 0's,
 * into comm->shm_size) and comm->node_comm. Leaves comm->shm NULL (and
 * succeeds) when the node has one rank. */
fr_status_t fr_shm_create(struct fr_comm *comm);
void fr_shm_destroy(struct fr_comm *comm);

/* Named segments (shm_sweep.c): their creator holds fr_shm_named_lock on
 * one (0 or an errno value) while it lives, and fr_shm_sweep, once a
 * process, unlinks those of /dev/shm whose lock nobody holds. */
int fr_shm_named_lock(int fd);
void fr_shm_sweep(void);

static inline volatile uint64_t *fr_shm_flag(fr_shm_t *s, int lrank, int which)
{
    return &s->flags[lrank * FR_SHM_NFLAGS + which].v;
}

/* Wait until flag @p which of every local rank is >= @p value (spin, then
 * yield); FR_ERR_TIMED_OUT, naming the ranks behind, past FASTREDUCE_TIMEOUT. */
fr_status_t fr_shm_wait_all(struct fr_comm *comm, int which, uint64_t value);
/* Wait until flag @p which of local rank @p lrank is >= @p value. */
fr_status_t fr_shm_wait_one(struct fr_comm *comm, int lrank, int which, uint64_t value);
/* Wait until the header word of slot @p base + r * @p stride is >= @p value
 * for every local rank r: flag @p which, kept in the slots. */
fr_status_t fr_shm_wait_slots(struct fr_comm *comm, char *base, size_t stride, int which, uint64_t value);
/* The same for the one slot @p slot, published by local rank @p lrank. */
fr_status_t fr_shm_wait_slot(struct fr_comm *comm, int lrank, char *slot, int which, uint64_t value);

/* Where the data of @p n bytes sits in a slot with a header. */
static inline char *fr_shm_slot_data(char *slot, size_t n)
{
    return slot + (n <= FR_SHM_INLINE ? sizeof(uint64_t) : FR_SHM_HDR);
}
/* Publish round @p value in a slot's header (a release store, after the data). */
static inline void fr_shm_slot_post(char *slot, uint64_t value)
{
    __atomic_store_n((volatile uint64_t *)slot, value, __ATOMIC_RELEASE);
}
/* Bytes one bcast slot carries. */
static inline size_t fr_shm_bcast_max(const fr_shm_t *s) { return s->bc_slot - FR_SHM_HDR; }
/* The least of fr_shm_bcast_max over any node (with 2 ranks; larger nodes
 * have larger slots), from comm->shm_size alone, which fr_shm_create took
 * from the communicator's rank 0: the same on every node, so nodes of
 * different sizes (or environments) cut a message into the same chunks. */
size_t fr_shm_bcast_cap(const struct fr_comm *comm);

/* The least value of flag @p which over the local ranks, as read now. */
static inline uint64_t fr_shm_flag_min(fr_shm_t *s, int which)
{
    uint64_t m = UINT64_MAX;
    for (int r = 0; r < s->lsize; r++) {
        uint64_t v = __atomic_load_n(fr_shm_flag(s, r, which), __ATOMIC_ACQUIRE);
        if (v < m) m = v;
    }
    return m;
}

/* Publish this rank's flag (a release store). */
static inline void fr_shm_post(fr_shm_t *s, int which, uint64_t value)
{
    __atomic_store_n(fr_shm_flag(s, s->lrank, which), value, __ATOMIC_RELEASE);
}

/* The allreduce buffers of round @p R: [lsize][red_slot]. */
static inline char *fr_shm_red(const fr_shm_t *s, uint64_t R)
{
    return s->red + (size_t)(R % FR_SHM_RED_NBUF) * (size_t)s->lsize * s->red_slot;
}

/* Map now, in this process, the first @p reach bytes of each of the
 * @p nslots slots of @p stride bytes from @p base, past the *ready bytes
 * already mapped (*ready grows to @p reach). The large areas are mapped
 * only when a call first needs them; mapping what the calls of one size
 * will reach at once costs less than a fault at each new page, and keeps
 * those faults out of the calls that follow. */
void fr_shm_ready(char *base, size_t stride, size_t nslots, size_t reach, size_t *ready);

#endif

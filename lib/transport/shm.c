/* The node's shared-memory segment (see shm.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "shm.h"
#include "trace.h"
#include "settings.h"
#include "log.h"
#include "wait.h"
#include "copy.h"
#include "cma.h"


/* FASTREDUCE_SHM_STREAM=auto: a plain put is slow past twice the time of a
 * streaming put of its size class (auto:R sets another factor): with the
 * cores on one die plain puts cost at most about a streaming one, across
 * dies several times (fr_corepair measures both; docs/performance.md). */
#define FR_SHM_PROBE 64u
#define FR_SHM_PROBE_FIRST 4u

/* A put's size class: [4K,16K) 0, [16K,64K) 1, [64K,256K) 2, from 256K 3
 * (a small put's time per byte is larger, so each class has its own
 * reference). */
static unsigned put_class(size_t n)
{
    unsigned c = 0;
    for (size_t m = n / ((size_t)FR_SHM_PUT_MIN * 4); m && c + 1 < FR_SHM_NCLASS; m /= 4) c++;
    return c;
}

void fr_shm_put(fr_shm_t *s, void *dst, const void *src, size_t n)
{
    if (n < FR_SHM_PUT_MIN || s->stream_mode == 0) {
        fr_copy(dst, src, n);
        return;
    }
    if (s->stream_mode == 1) {
        fr_copy_stream(dst, src, n);
        return;
    }
    /* every FR_SHM_PROBE-th put of a class is made the other way, to time
     * it; a class's first put streams, which gives it its reference */
    const unsigned c = put_class(n);
    int probe;
    if (s->stream_ref[c] == 0) {
        probe = !s->streaming;
        s->probe[c] = FR_SHM_PROBE;
    } else if ((probe = --s->probe[c] == 0)) {
        s->probe[c] = FR_SHM_PROBE;
    }
    const int stream = s->streaming != probe;
    uint64_t t0 = fr_now_ns();
    if (stream) fr_copy_stream(dst, src, n);
    else fr_copy(dst, src, n);
    double dt = (double)(fr_now_ns() - t0);
    if (stream) {
        /* the reference: the faster of the class's last two (one may have
         * been preempted) */
        double r = dt > 0 ? dt / (double)n : 1e-6;
        s->stream_ref[c] = s->stream_last[c] > 0 && s->stream_last[c] < r ? s->stream_last[c] : r;
        s->stream_last[c] = r;
        return;
    }
    /* (the 200 ns absorb a first miss or two on the smallest puts) */
    int slow = dt > s->slow_ratio * s->stream_ref[c] * (double)n + 200.0;
    /* two slow puts in a row before streaming: one may have been preempted */
    s->slow_puts = slow ? s->slow_puts + 1 : 0;
    int streaming = s->streaming ? slow : s->slow_puts >= 2;
    /* Streaming, the plain probes come after 4 puts of a class, then 8,
     * 16, 32 and 64 while they stay slow: a switch that two preempted or
     * otherwise unlucky puts caused is undone soon. */
    if (streaming && !s->streaming) {
        s->gap = FR_SHM_PROBE_FIRST;
        for (unsigned k = 0; k < FR_SHM_NCLASS; k++) s->probe[k] = s->gap;
    } else if (streaming) {
        s->gap = s->gap < FR_SHM_PROBE / 2 ? s->gap * 2 : FR_SHM_PROBE;
        s->probe[c] = s->gap;
    }
    if (streaming != s->streaming)
        FR_TRACE(FR_SUB_SHM, "shm: a plain put of %zu bytes took %.0f ns (%.3f ns/byte, a streaming one %.3f): "
                 "%s stores from now", n, dt, dt / (double)n, s->stream_ref[c], streaming ? "streaming" : "plain");
    s->streaming = streaming;
}

static const char *const flag_name[FR_SHM_NFLAGS] = {
    [FR_SHM_F_SMALL] = "small", [FR_SHM_F_ARRIVE] = "arrive", [FR_SHM_F_REDUCED] = "reduced",
    [FR_SHM_F_BREADY] = "bcast-ready", [FR_SHM_F_BACK] = "bcast-done", [FR_SHM_F_ZDESC] = "zero-copy descriptor",
    [FR_SHM_F_ZSEEN] = "zero-copy descriptors read", [FR_SHM_F_ZDONE] = "zero-copy done",
    [FR_SHM_F_ZFAIL] = "zero-copy failed", [FR_SHM_F_ZAVAIL] = "zero-copy chunks in",
};

/* The flags a wait reads: local rank r's is the word at base + r * stride. */
typedef struct {
    char *base;
    size_t stride;
    const char *name;
} flags_t;

static volatile uint64_t *flag_at(const flags_t *f, int lrank)
{
    return (volatile uint64_t *)(f->base + (size_t)lrank * f->stride);
}

/* A flag wait timed out: the message names the ranks among local ranks
 * [lo, hi) whose flag is still below @p value. */
static fr_status_t shm_timeout(struct fr_comm *comm, int lo, int hi, const flags_t *f, uint64_t value)
{
    int late[64], n = 0;
    char peers[256], step[96];
    for (int r = 0; r < comm->size && n < 64; r++)
        if (comm->rank_node[r] == comm->node && comm->rank_local[r] >= lo && comm->rank_local[r] < hi &&
            __atomic_load_n(flag_at(f, comm->rank_local[r]), __ATOMIC_ACQUIRE) < value)
            late[n++] = r;
    if (n) fr_rank_list(late, n, peers, sizeof peers);
    snprintf(step, sizeof step, "shared-memory flag '%s', round %lu", f->name, (unsigned long)value);
    return fr_wait_timeout(comm, step, n ? peers : "no rank (they answered as the clock ran out)");
}

/* Wait until the flag of local ranks [lo, hi) is at least @p value. */
static fr_status_t wait_range(struct fr_comm *comm, int lo, int hi, const flags_t *f, uint64_t value)
{
    fr_wait_t w = FR_WAIT_INIT;
    for (int r = lo; r < hi; r++) {
        volatile uint64_t *p = flag_at(f, r);
        while (__atomic_load_n(p, __ATOMIC_ACQUIRE) < value) {
            if (comm->bg) FR_CHECK(comm->bg(comm, comm->bg_arg));
            if (fr_wait_poll(comm, &w)) return shm_timeout(comm, r, hi, f, value);
        }
        w.start_ns = 0;  /* (a raised flag is progress: the timeout counts from it) */
    }
    fr_wait_done(&w);
    return FR_SUCCESS;
}

static flags_t area_flags(fr_shm_t *s, int which)
{
    return (flags_t){(char *)fr_shm_flag(s, 0, which), FR_SHM_NFLAGS * sizeof(fr_shm_flag_t), flag_name[which]};
}

fr_status_t fr_shm_wait_one(struct fr_comm *comm, int lrank, int which, uint64_t value)
{
    flags_t f = area_flags(comm->shm, which);
    return wait_range(comm, lrank, lrank + 1, &f, value);
}

fr_status_t fr_shm_wait_all(struct fr_comm *comm, int which, uint64_t value)
{
    flags_t f = area_flags(comm->shm, which);
    return wait_range(comm, 0, comm->shm->lsize, &f, value);
}

fr_status_t fr_shm_wait_slots(struct fr_comm *comm, char *base, size_t stride, int which, uint64_t value)
{
    flags_t f = {base, stride, flag_name[which]};
    return wait_range(comm, 0, comm->shm->lsize, &f, value);
}

fr_status_t fr_shm_wait_slot(struct fr_comm *comm, int lrank, char *slot, int which, uint64_t value)
{
    flags_t f = {slot, 0, flag_name[which]};
    return wait_range(comm, lrank, lrank + 1, &f, value);
}

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Bytes of one bcast slot, header included, from the per-rank size and the
 * node's ranks (the slot grows with them). */
static size_t bcast_slot(uint64_t per_rank, size_t lsize)
{
    return align_up(per_rank * lsize / FR_SHM_BCAST_NBUF, 4096);
}

/* Sizes of the areas, identical on every rank of the node. */
static size_t layout(fr_shm_t *s, size_t per_rank)
{
    size_t l = (size_t)s->lsize, off = 0;
    size_t flags = align_up(l * FR_SHM_NFLAGS * sizeof(fr_shm_flag_t), 4096);
    s->red_slot = align_up(per_rank / FR_SHM_RED_NBUF, 4096);
    s->bc_slot = bcast_slot(per_rank, l);
    off = flags;
    size_t small_off = off; off += align_up(2 * l * FR_SHM_SMALL_SLOT, 4096);
    size_t tiny_off = off;  off += align_up(l * FR_SHM_TINY_NR * FR_CACHELINE, 4096);
    size_t red_off = off;   off += FR_SHM_RED_NBUF * l * s->red_slot;
    size_t bc_off = off;    off += FR_SHM_BCAST_NBUF * s->bc_slot;
    size_t bs_off = off;    off += align_up(FR_SHM_BSMALL_NBUF * FR_SHM_BSMALL_SLOT, 4096);
    size_t bt_off = off;    off += align_up(FR_SHM_BTINY_NBUF * FR_SHM_BTINY_SLOT, 4096);
    size_t zd_off = off;    off += align_up(l * FR_SHM_ZC_NDESC * FR_SHM_ZC_DESC, 4096);
    if (s->base) {
        s->flags = (fr_shm_flag_t *)s->base;
        s->small = (char *)s->base + small_off;
        s->small_tiny = (char *)s->base + tiny_off;
        s->red = (char *)s->base + red_off;
        s->bc = (char *)s->base + bc_off;
        s->bsmall = (char *)s->base + bs_off;
        s->btiny = (char *)s->base + bt_off;
        s->zdesc = (char *)s->base + zd_off;
    }
    return off;
}

/* What the creator of the segment tells the node's other ranks. */
typedef struct {
    int err;
    long pid;
    int fd;
    char name[80];
    unsigned long long size, dev, ino;   /* the file it made: bytes, fstat's st_dev and st_ino */
} seg_msg_t;

/* Whether @p fd, which a rank opened by the way @p m names, is the file the
 * creator made: 0, or the errno that fails this way in (ESTALE for another
 * file: /proc/PID/fd/N names one of a process of this rank's own PID
 * namespace where the creator's is another). *bytes: the file's size. */
static int same_file(int fd, const seg_msg_t *m, unsigned long long *bytes)
{
    struct stat st;
    if (fstat(fd, &st) != 0) return errno;
    *bytes = (unsigned long long)st.st_size;
    return (unsigned long long)st.st_dev == m->dev && (unsigned long long)st.st_ino == m->ino ? 0 : ESTALE;
}

/* map_segment's failures other than an errno value */
enum { SEG_MPI = -1, SEG_SIZE = -2 };

/* Create (local rank 0) and map (every local rank) the segment, by memfd
 * or by name. Returns 0, an errno value (the same on every rank), SEG_MPI
 * if MPI failed, or SEG_SIZE if a rank found the segment of another size
 * than its own layout's (*made: the creator's size). */
static int map_segment(struct fr_comm *comm, fr_shm_t *s, int use_memfd, size_t *made)
{
    seg_msg_t msg;
    memset(&msg, 0, sizeof msg);
    int fd = -1, err = 0, bad_size = 0;
    if (s->lrank == 0) {
        struct stat st;
        if (use_memfd) {
            fd = memfd_create("fastreduce", MFD_CLOEXEC);
        } else {
            static unsigned counter;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            snprintf(msg.name, sizeof msg.name, "/fastreduce-%ld-%u-%lx", (long)getpid(),
                     __atomic_fetch_add(&counter, 1u, __ATOMIC_RELAXED),  /* (threads may create at once) */
                     (unsigned long)ts.tv_nsec);
            fd = shm_open(msg.name, O_CREAT | O_EXCL | O_RDWR, 0600);
            if (fd >= 0 && (err = fr_shm_named_lock(fd)) != 0) {   /* (held until the unlink) */
                close(fd);
                fd = -1;
                shm_unlink(msg.name);
            }
        }
        /* A memfd only gets its size: its pages come at first touch (see
         * prefault). A named segment lives in /dev/shm, which may be full,
         * and is reserved whole, so that no touch of it is a SIGBUS. */
        if (fd < 0) err = err ? err : errno;
        else if (use_memfd) err = ftruncate(fd, (off_t)s->size) == 0 ? 0 : errno;
        else err = posix_fallocate(fd, 0, (off_t)s->size);
        if (fd >= 0 && !err && fstat(fd, &st) != 0) err = errno;
        if (fd >= 0 && err) {
            close(fd);
            fd = -1;
            if (!use_memfd) shm_unlink(msg.name);
        } else if (fd >= 0) {
            msg.dev = (unsigned long long)st.st_dev;
            msg.ino = (unsigned long long)st.st_ino;
        }
        msg.err = err;
        msg.pid = (long)getpid();
        msg.fd = fd;
        msg.size = s->size;
    }
    if (PMPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, 0, comm->node_comm) != MPI_SUCCESS) {
        if (fd >= 0) close(fd);
        if (s->lrank == 0 && !use_memfd && !err) shm_unlink(msg.name);
        return SEG_MPI;
    }
    if (msg.err) return msg.err;
    *made = (size_t)msg.size;
    if (s->lrank != 0) {
        char path[64];
        unsigned long long bytes = 0;
        if (use_memfd) snprintf(path, sizeof path, "/proc/%ld/fd/%d", msg.pid, msg.fd);
        fd = use_memfd ? open(path, O_RDWR | O_CLOEXEC) : shm_open(msg.name, O_RDWR, 0600);
        if (fd < 0) err = errno;
        else if ((err = same_file(fd, &msg, &bytes)) != 0) {
            FR_INFO(FR_SUB_SHM, "shm: %s is not the segment local rank 0 made (%s)", use_memfd ? path : msg.name,
                    strerror(err));
        } else if (msg.size != s->size || bytes != msg.size) {
            bad_size = 1;   /* (mapped, its end would be a SIGBUS or its areas another rank's) */
        }
        if (err || bad_size) {
            if (fd >= 0) close(fd);
            fd = -1;
        }
    }
    if (fd >= 0) {
        s->base = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (s->base == MAP_FAILED) { err = errno; s->base = NULL; }
    }
    /* Everyone has mapped it (or failed): the creator's descriptor, which the
     * others opened through /proc, may close, and a named segment is
     * unlinked now. */
    int mine[2] = { err, bad_size }, any[2] = { 0, 0 };
    int rc = PMPI_Allreduce(mine, any, 2, MPI_INT, MPI_MAX, comm->node_comm);
    if (fd >= 0) close(fd);
    if (s->lrank == 0 && !use_memfd) shm_unlink(msg.name);
    if (rc == MPI_SUCCESS && !any[0] && !any[1]) {
        /* (the ranks opened the creator's memfd: they can open each other's buffers alike) */
        s->zc_ok = use_memfd;
        return 0;
    }
    if (s->base) munmap(s->base, s->size);
    s->base = NULL;
    return rc != MPI_SUCCESS ? SEG_MPI : any[1] ? SEG_SIZE : any[0];
}

/* Map the pages of [from, to) of the segment now (writable, as a store
 * would). Where the kernel cannot (MADV_POPULATE_WRITE is Linux 5.14), a
 * read of each page maps it; a page left out only costs a fault later. */
static void populate(char *from, char *to)
{
#ifdef MADV_POPULATE_WRITE
    if (madvise(from, (size_t)(to - from), MADV_POPULATE_WRITE) == 0) return;
#endif
    for (volatile char *p = from; p < to; p += 4096) (void)*p;
}

void fr_shm_ready(char *base, size_t stride, size_t nslots, size_t reach, size_t *ready)
{
    const uintptr_t page = 4096;
    if (reach > stride) reach = stride;
    if (reach <= *ready) return;
    for (size_t k = 0; k < nslots; k++) {
        uintptr_t from = (uintptr_t)(base + k * stride + *ready) & ~(page - 1);
        uintptr_t to = ((uintptr_t)(base + k * stride + reach) + page - 1) & ~(page - 1);
        populate((char *)from, (char *)to);
    }
    *ready = reach;
}

/* The flags and the rings of small messages are mapped at creation, so
 * that no small call takes a page fault; the large allreduce and bcast
 * buffers (most of the segment) are mapped by the first calls that use
 * them, so a communicator that never moves a large message never pays for
 * them. */
static void prefault(fr_shm_t *s)
{
    populate((char *)s->base, s->red);
    populate(s->bsmall, (char *)s->base + s->size);
}

/* FASTREDUCE_SHM_STREAM as the communicator read it: -1 auto, 0 plain,
 * 1 streaming; auto's ratio in *slow (a malformed value has warned and
 * means auto). */
static int stream_setting(const struct fr_comm *comm, double *slow)
{
    *slow = comm->set.shm_slow;
    return comm->set.shm_stream == FR_STREAM_AUTO ? -1 : comm->set.shm_stream == FR_STREAM_STREAMING;
}

/* The number a file starts with; 0 when it cannot be read or is not one. */
static uint64_t file_number(const char *path)
{
    unsigned long long v = 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    if (fscanf(f, "%llu", &v) != 1) v = 0;
    fclose(f);
    return v;
}

/* Bytes of memory this node can still give (MemAvailable, and no more than
 * the cgroup's limit less its use where there is one); 0 when unknown. */
static uint64_t memory_available(void)
{
    uint64_t avail = 0, kb;
    char line[128];
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", (unsigned long long *)&kb) == 1) avail = kb * 1024;
        fclose(f);
    }
    uint64_t max = file_number("/sys/fs/cgroup/memory.max"), cur = file_number("/sys/fs/cgroup/memory.current");
    if (max) {   /* ("max" reads as 0: no limit) */
        uint64_t room = cur < max ? max - cur : 0;
        if (!avail || room < avail) avail = room;
    }
    return avail;
}

/* Local rank 0 sees whether the node can hold the segment: more than half
 * the memory available there is refused (filling memfd pages beyond what
 * the node has brings the kernel's OOM killer, not an error). The answer
 * is shared with the node's ranks; FR_SUCCESS or FR_ERR_NO_MEMORY (or MPI). */
static fr_status_t check_fits(struct fr_comm *comm, const fr_shm_t *s, uint64_t per_rank, size_t size)
{
    unsigned long long v[2] = { 0, 0 };   /* too big, bytes available */
    if (s->lrank == 0) {
        v[1] = memory_available();
        v[0] = size == SIZE_MAX || (v[1] && (uint64_t)size > v[1] / 2);
    }
    if (PMPI_Bcast(v, 2, MPI_UNSIGNED_LONG_LONG, 0, comm->node_comm) != MPI_SUCCESS)
        return FR_ERROR(FR_ERR_MPI, "shm: an MPI call failed before sharing the node's segment");
    char what[48];
    if (size == SIZE_MAX) snprintf(what, sizeof what, "a segment of over a PiB");
    else snprintf(what, sizeof what, "a %zu-byte segment", size);
    if (v[0])
        return FR_ERROR(FR_ERR_NO_MEMORY, "shm: FASTREDUCE_SHM_SIZE=%llu bytes a rank makes %s for this node's "
                        "%d ranks, more than half of the %llu bytes of memory available there; set a smaller "
                        "FASTREDUCE_SHM_SIZE", (unsigned long long)per_rank, what, s->lsize, v[1]);
    return FR_SUCCESS;
}

static uint64_t per_rank_size(const struct fr_comm *comm)
{
    uint64_t per_rank = comm->set.shm_size;   /* (settings refuse less than the least) */
    return per_rank < FR_SHM_SIZE_MIN ? FR_SHM_SIZE_MIN : per_rank;
}

/* FASTREDUCE_SHM_SIZE as the communicator's rank 0 reads it (a malformed
 * value warns there and means the default), broadcast over comm->mpi: the
 * segment's layout and fr_shm_bcast_cap follow it, so they are the same on
 * every rank even where ranks were launched with different environments.
 * A rank whose own value differs warns, once. Collective; 0 if MPI failed. */
static uint64_t agreed_size(const struct fr_comm *comm)
{
    static int warned;
    unsigned long long own = per_rank_size(comm), v = own;
    if (PMPI_Bcast(&v, 1, MPI_UNSIGNED_LONG_LONG, 0, comm->mpi) != MPI_SUCCESS) return 0;
    if (v != own && !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED)) {
        int src = comm->set.src[FR_S_SHM_SIZE];
        char txt[32];
        fr_setting_text(&comm->set, FR_S_SHM_SIZE, txt, sizeof txt);
        FR_WARN(FR_SUB_SHM, "shm: FASTREDUCE_SHM_SIZE is %llu bytes on this rank (%s%s) but %llu on the "
                "communicator's rank 0; every rank uses rank 0's %llu, so that all lay out the shared segment alike",
                own, src == FR_FROM_ENV ? "set to " : "", src == FR_FROM_ENV ? txt : src == FR_FROM_DEFAULT ? "unset"
                : "malformed", v, v);
    }
    return (uint64_t)v;
}

size_t fr_shm_bcast_cap(const struct fr_comm *comm)
{
    return bcast_slot(comm->shm_size, 2) - FR_SHM_HDR;
}

fr_status_t fr_shm_create(struct fr_comm *comm)
{
    comm->shm = NULL;
    /* (before any return: every rank of comm->mpi takes part) */
    uint64_t per_rank = comm->shm_size = agreed_size(comm);
    if (!per_rank) return FR_ERROR(FR_ERR_MPI, "shm: an MPI call failed before sharing the node's segment");
    double slow_ratio;
    int stream_mode = stream_setting(comm, &slow_ratio);
    if (comm->local_size < 2) return FR_SUCCESS;
    fr_shm_t *s = calloc(1, sizeof *s);
    char *tmp = aligned_alloc(4096, FR_SHM_TMP);
    /* (zptr, zin and zout in one block: pointers of one size and alignment) */
    char **zptr = calloc(4 * (size_t)comm->local_size, sizeof *zptr);
    _Static_assert(4 * sizeof *zptr >= FR_CMA_SCRATCH, "zptr serves as fr_cma_probe's scratch");
    /* the node's ranks agree first, so none goes on alone */
    int nomem = !s || !tmp || !zptr, any = 0;
    int rc = PMPI_Allreduce(&nomem, &any, 1, MPI_INT, MPI_MAX, comm->node_comm);
    if (rc != MPI_SUCCESS || any) {
        free(s);
        free(tmp);
        free(zptr);
        return rc != MPI_SUCCESS ? FR_ERROR(FR_ERR_MPI, "shm: an MPI call failed before sharing the node's segment")
                                 : FR_ERROR(FR_ERR_NO_MEMORY, "shm: out of memory on %s rank of this node",
                                            nomem ? "this" : "another");
    }
    s->lrank = comm->local_rank;
    s->lsize = comm->local_size;
    s->stream_mode = stream_mode;
    s->slow_ratio = slow_ratio;
    s->tmp = tmp;
    s->zptr = zptr;
    s->zin = (const void **)(void *)(zptr + 2 * comm->local_size);
    s->zout = (void **)(void *)(zptr + 3 * comm->local_size);
    s->pid = (int32_t)getpid();
    /* (a size no node has: kept from overflowing the layout's sums) */
    s->size = per_rank > ((uint64_t)1 << 50) / (uint64_t)s->lsize ? SIZE_MAX : layout(s, per_rank);
    fr_status_t fits = check_fits(comm, s, per_rank, s->size);
    if (fits != FR_SUCCESS) {
        free(s->tmp);
        free(s->zptr);
        free(s);
        return fits;
    }

    /* First an anonymous memfd, which peers open through /proc/PID/fd/N:
     * it never has a name, so nothing can be left behind whatever happens.
     * Where that is refused or finds another file (another PID namespace:
     * same_file), or there is no memfd, a POSIX segment that is unlinked as
     * soon as every rank has mapped it. */
    size_t made = 0;
    if (s->lrank == 0) fr_shm_sweep();
    int err = map_segment(comm, s, 1, &made);
    if (err && err != SEG_SIZE) {
        FR_INFO(FR_SUB_SHM, "shm: memfd sharing failed (%s); using a /dev/shm segment", strerror(err));
        err = map_segment(comm, s, 0, &made);
    }
    if (err) {
        size_t size = s->size;
        free(s->tmp);
        free(s->zptr);
        free(s);
        if (err == SEG_SIZE && made != size)
            return FR_ERROR(FR_ERR_INTERNAL, "shm: local rank 0 made the node's segment of %zu bytes, where this "
                            "rank's layout needs %zu (do the node's ranks run the same libfastreduce?)", made, size);
        if (err == SEG_SIZE)
            return FR_ERROR(FR_ERR_INTERNAL, "shm: another rank of this node found the node's segment of %zu bytes "
                            "not the size its layout needs", size);
        if (err < 0) return FR_ERROR(FR_ERR_MPI, "shm: an MPI call failed while sharing the node's segment");
        return FR_ERROR(FR_ERR_SYSTEM, "shm: cannot share a %zu-byte segment among the node's ranks: %s",
                        size, strerror(err));
    }
    layout(s, per_rank);
    prefault(s);
    /* (zptr is not in use yet: the probe's scratch) */
    int cma_mode = fr_cma_probe(comm, s->zptr);
    /* Ranks sharing cores use cma only when told always: there a reader
     * waits for a core while the root, which cannot run ahead, idles. Both
     * inputs are agreed over the node, so every rank decides alike. */
    s->cma_on = cma_mode == FR_CMA_ALWAYS || (cma_mode == FR_CMA_ON && !comm->oversubscribed);
    comm->shm = s;
    const char *cma = s->cma_on ? "yes" : cma_mode ? "unused, the ranks outnumber the cores" : "no";
    FR_INFO(FR_SUB_SHM, "shm segment of %zu bytes for %d local ranks (allreduce slot %zu, bcast slot %zu); "
            "stores into it: %s; bcasts of private buffers read by cma: %s; results of %zu bytes or more are "
            "streamed (last-level cache share %zu)", s->size, s->lsize, s->red_slot, s->bc_slot,
            s->stream_mode < 0 ? "auto" : s->stream_mode ? "streaming" : "plain", cma, fr_stream_min(comm->llc_share),
            comm->llc_share);
    return FR_SUCCESS;
}

void fr_shm_destroy(struct fr_comm *comm)
{
    fr_shm_t *s = comm->shm;
    if (!s) return;
    if (s->base) munmap(s->base, s->size);
    free(s->tmp);
    free(s->zptr);
    free(s);
    comm->shm = NULL;
}

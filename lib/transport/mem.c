/* Memory the node's ranks share (mem.h, fr_mem_alloc in fastreduce.h).
 * Every allocation is its own memfd, kept open while it lives, so that a
 * peer can open it through /proc/PID/fd/N (the way the node's segment is
 * shared) and no name is ever left anywhere. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "mem.h"
#include "log.h"
#include "settings.h"

typedef struct {
    char    *base;
    size_t   size;
    int      fd;
    uint64_t ino, dev;
} own_t;

/* This process's allocations, sorted by address. */
static pthread_mutex_t own_lock = PTHREAD_MUTEX_INITIALIZER;
static own_t *own;
static size_t n_own, cap_own;
static uint64_t n_frees;
static void (*free_hook)(void *base, size_t size);

void fr_mem_on_free(void (*fn)(void *base, size_t size))
{
    __atomic_store_n(&free_hook, fn, __ATOMIC_RELEASE);
}

/* The index of the allocation holding @p p, or -1 (own_lock held). */
static long own_index(const char *p)
{
    size_t lo = 0, hi = n_own;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p < own[mid].base) hi = mid;
        else if (p >= own[mid].base + own[mid].size) lo = mid + 1;
        else return (long)mid;
    }
    return -1;
}

static fr_status_t own_insert(const own_t *a)
{
    if (n_own == cap_own) {
        size_t cap = cap_own ? 2 * cap_own : 16;
        own_t *n = realloc(own, cap * sizeof *n);
        if (!n) return FR_ERROR(FR_ERR_NO_MEMORY, "fr_mem_alloc: out of memory for the list of allocations");
        own = n;
        cap_own = cap;
    }
    size_t at = 0;
    while (at < n_own && own[at].base < a->base) at++;
    memmove(own + at + 1, own + at, (n_own - at) * sizeof *own);
    own[at] = *a;
    __atomic_store_n(&n_own, n_own + 1, __ATOMIC_RELAXED);   /* (fr_mem_find reads it without the lock) */
    return FR_SUCCESS;
}

/* Huge pages are taken for buffers of at least this many bytes (the
 * default huge page size on x86-64; a buffer is rounded up to a whole one). */
#define HUGE_MIN ((size_t)2 << 20)

/* FASTREDUCE_HUGE_PAGES as it is now. */
static int huge_wanted(void)
{
    fr_settings_t s = {0};
    fr_settings_load(&s, NULL, -1, fr_settings_when(FR_WHEN_ALLOC));
    int on = s.huge_pages != 0;
    fr_settings_free(&s);
    return on;
}

/* A memfd of huge pages of at least @p bytes, mapped and populated (so that
 * a pool without enough free pages fails here, not at a touch): 1 with *a
 * filled, 0 when there are none to have (no pool, or too few free). */
static int huge_alloc(size_t bytes, own_t *a)
{
    struct stat st;
    size_t size = (bytes + HUGE_MIN - 1) / HUGE_MIN * HUGE_MIN;
    int fd = memfd_create("fastreduce-mem", MFD_CLOEXEC | MFD_HUGETLB);
    if (fd < 0) return 0;
    void *b = MAP_FAILED;
    if (ftruncate(fd, (off_t)size) == 0 && fstat(fd, &st) == 0)
        b = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (b == MAP_FAILED) {
        close(fd);
        return 0;
    }
    *a = (own_t){.base = b, .size = size, .fd = fd, .ino = (uint64_t)st.st_ino, .dev = (uint64_t)st.st_dev};
    return 1;
}

/* A memfd of ordinary pages of @p size bytes, mapped: 0 with *a filled, or
 * the errno that failed. Its pages come at first touch. */
static int plain_alloc(size_t size, own_t *a)
{
    struct stat st;
    int err = 0;
    *a = (own_t){.size = size, .fd = memfd_create("fastreduce-mem", MFD_CLOEXEC)};
    if (a->fd < 0) return errno;
    if (ftruncate(a->fd, (off_t)size) != 0 || fstat(a->fd, &st) != 0) err = errno;
    if (!err) {
        a->ino = (uint64_t)st.st_ino;
        a->dev = (uint64_t)st.st_dev;
        a->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, a->fd, 0);
        if (a->base == MAP_FAILED) err = errno;
    }
    if (err) {
        close(a->fd);
        return err;
    }
    /* (transparent huge pages where the site lets shared memory have them) */
    (void)madvise(a->base, size, MADV_HUGEPAGE);
    return 0;
}

fr_status_t fr_mem_alloc(size_t bytes, void **ptr)
{
    if (!ptr) return FR_ERROR(FR_ERR_NULL_POINTER, "fr_mem_alloc: ptr is NULL");
    *ptr = NULL;
    if (!bytes) return FR_SUCCESS;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    /* (a memfd's size is an off_t: past its largest, ftruncate would fail as a system error) */
    if (bytes > (size_t)INT64_MAX - HUGE_MIN)
        return FR_ERROR(FR_ERR_NO_MEMORY, "fr_mem_alloc: %zu bytes is more than the address space", bytes);
    own_t a;
    int err = 0;
    /* Huge pages where the site reserved them: a peer streaming through a
     * large buffer misses the TLB 512 times less (docs/performance.md,
     * "Zero-copy"); otherwise ordinary pages. */
    if (!(bytes >= HUGE_MIN && huge_wanted() && huge_alloc(bytes, &a)))
        err = plain_alloc((bytes + page - 1) / page * page, &a);
    if (err == EMFILE || err == ENFILE || err == ENOMEM || err == ENOSPC || err == EFBIG)
        return FR_ERROR(FR_ERR_NO_MEMORY, "fr_mem_alloc: cannot allocate %zu bytes of shared memory: %s%s", bytes,
                        strerror(err), err == EMFILE ? " (every allocation holds a file descriptor: raise "
                        "ulimit -n)" : "");
    if (err) return FR_ERROR(FR_ERR_SYSTEM, "fr_mem_alloc: cannot make a memfd of %zu bytes: %s", bytes, strerror(err));
    pthread_mutex_lock(&own_lock);
    fr_status_t st = own_insert(&a);
    pthread_mutex_unlock(&own_lock);
    if (st != FR_SUCCESS) {
        munmap(a.base, a.size);
        close(a.fd);
        return st;
    }
    *ptr = a.base;
    return FR_SUCCESS;
}

fr_status_t fr_mem_free(void *ptr)
{
    if (!ptr) return FR_SUCCESS;
    pthread_mutex_lock(&own_lock);
    long i = own_index(ptr);
    if (i < 0 || own[i].base != (char *)ptr) {
        pthread_mutex_unlock(&own_lock);
        return FR_ERROR(FR_ERR_INVALID_ARG, "fr_mem_free: %p is not an address fr_mem_alloc gave%s", ptr,
                        i < 0 ? " (or it was freed already)" : " (it lies inside one: pass its start)");
    }
    own_t a = own[i];
    memmove(own + i, own + i + 1, (n_own - (size_t)i - 1) * sizeof *own);
    __atomic_store_n(&n_own, n_own - 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&own_lock);
    void (*hook)(void *, size_t) = __atomic_load_n(&free_hook, __ATOMIC_ACQUIRE);
    if (hook) hook(a.base, a.size);
    munmap(a.base, a.size);
    close(a.fd);
    /* Counted once the descriptor is closed: a peer that sees the new count
     * sweeps and finds the file gone. (Counted before, a peer could sweep
     * in between, keep the mapping and never sweep again.) */
    __atomic_add_fetch(&n_frees, 1, __ATOMIC_RELEASE);
    return FR_SUCCESS;
}

size_t fr_mem_live(void)
{
    return __atomic_load_n(&n_own, __ATOMIC_RELAXED);
}

int fr_mem_find(const void *p, size_t bytes, fr_mem_ref_t *ref)
{
    if (!bytes || !p) return 0;
    /* (no allocation yet: the common case of private buffers takes no lock) */
    if (!__atomic_load_n(&n_own, __ATOMIC_RELAXED)) return 0;
    const char *c = p;
    pthread_mutex_lock(&own_lock);
    long i = own_index(c);
    int in = i >= 0 && bytes <= (size_t)(own[i].base + own[i].size - c);
    if (in) *ref = (fr_mem_ref_t){.ino = own[i].ino, .dev = own[i].dev, .size = own[i].size,
                                  .off = (uint64_t)(c - own[i].base), .fd = own[i].fd};
    pthread_mutex_unlock(&own_lock);
    return in;
}

int fr_mem_shared(const void *ptr, size_t bytes)
{
    fr_mem_ref_t ref;
    return fr_mem_find(ptr, bytes, &ref);
}

uint64_t fr_mem_frees(void) { return __atomic_load_n(&n_frees, __ATOMIC_ACQUIRE); }

/* ---- peers' allocations ------------------------------------------------ */

typedef struct {
    long     pid;
    int      fd;
    uint64_t ino, dev;
    size_t   size;
    char    *base;
} peer_map_t;

typedef struct {
    long     pid;
    uint64_t frees;     /* the owner's count of frees when its mappings were last checked */
} peer_owner_t;

static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;
static peer_map_t *maps;
static size_t n_maps, cap_maps;
static peer_owner_t *owners;
static size_t n_owners, cap_owners;

/* Whether descriptor @p m->fd of process @p m->pid is still its memfd. */
static int still_there(const peer_map_t *m)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%ld/fd/%d", m->pid, m->fd);
    return stat(path, &st) == 0 && (uint64_t)st.st_ino == m->ino && (uint64_t)st.st_dev == m->dev;
}

/* Drop the mappings of @p pid (every process when pid < 0) whose
 * allocation is gone (peer_lock held). */
static void sweep(long pid)
{
    size_t k = 0;
    for (size_t i = 0; i < n_maps; i++) {
        peer_map_t *m = &maps[i];
        if ((pid < 0 || m->pid == pid) && !still_there(m)) {
            munmap(m->base, m->size);
            continue;
        }
        maps[k++] = *m;
    }
    n_maps = k;
}

/* Grow *arr of *cap elements of @p es bytes to hold one more than @p n. */
static int grow(void **arr, size_t *cap, size_t n, size_t es)
{
    if (n < *cap) return 1;
    size_t c = *cap ? 2 * *cap : 16;
    void *a = realloc(*arr, c * es);
    if (!a) return 0;
    *arr = a;
    *cap = c;
    return 1;
}

/* Map allocation @p ref of @p pid (peer_lock held): NULL on failure. */
static char *map_new(long pid, const fr_mem_ref_t *ref)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%ld/fd/%d", pid, (int)ref->fd);
    if (!grow((void **)&maps, &cap_maps, n_maps, sizeof *maps)) return NULL;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        FR_INFO(FR_SUB_SHM, "zero-copy: cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    char *base = NULL;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_ino != ref->ino || (uint64_t)st.st_dev != ref->dev ||
        (uint64_t)st.st_size < ref->size) {
        FR_INFO(FR_SUB_SHM, "zero-copy: %s is not the allocation of %llu bytes the peer described", path,
                (unsigned long long)ref->size);
    } else {
        /* Not populated: the pages fault in as calls touch them. Populating
         * would allocate every page the owner never touched, of a large
         * allocation used in part, and charge them to this process. */
        base = mmap(NULL, ref->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (base == MAP_FAILED) {
            FR_INFO(FR_SUB_SHM, "zero-copy: cannot map %llu bytes of %s: %s", (unsigned long long)ref->size, path,
                    strerror(errno));
            base = NULL;
        }
    }
    close(fd);
    if (base)
        maps[n_maps++] = (peer_map_t){.pid = pid, .fd = ref->fd, .ino = ref->ino, .dev = ref->dev,
                                      .size = ref->size, .base = base};
    return base;
}

char *fr_mem_peer(long pid, uint64_t frees, const fr_mem_ref_t *ref)
{
    char *base = NULL;
    pthread_mutex_lock(&peer_lock);
    size_t o = 0;
    while (o < n_owners && owners[o].pid != pid) o++;
    if (o == n_owners) {
        if (!grow((void **)&owners, &cap_owners, n_owners, sizeof *owners)) goto out;
        owners[n_owners++] = (peer_owner_t){.pid = pid, .frees = frees};
    } else if (owners[o].frees != frees) {
        sweep(pid);
        owners[o].frees = frees;
    }
    for (size_t i = 0; i < n_maps && !base; i++)
        if (maps[i].pid == pid && maps[i].ino == ref->ino && maps[i].dev == ref->dev && maps[i].size == ref->size)
            base = maps[i].base;
    if (!base) base = map_new(pid, ref);
out:
    pthread_mutex_unlock(&peer_lock);
    return base ? base + ref->off : NULL;
}

void fr_mem_peer_sweep(void)
{
    pthread_mutex_lock(&peer_lock);
    sweep(-1);
    size_t k = 0;
    for (size_t i = 0; i < n_owners; i++) {
        int used = 0;
        for (size_t j = 0; j < n_maps && !used; j++) used = maps[j].pid == owners[i].pid;
        if (used) owners[k++] = owners[i];
    }
    n_owners = k;
    pthread_mutex_unlock(&peer_lock);
}

/* At exit, the mappings and lists go (what the program did not free of
 * its own allocations stays its own). */
__attribute__((destructor)) static void peer_cleanup(void)
{
    for (size_t i = 0; i < n_maps; i++) munmap(maps[i].base, maps[i].size);
    free(maps);
    free(owners);
    maps = NULL;
    owners = NULL;
    n_maps = n_owners = cap_maps = cap_owners = 0;
}

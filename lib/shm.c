/* The node's shared-memory segment (see shm.h). */
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
#include "settings.h"
#include "log.h"

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void fr_backoff(uint64_t *polls, uint64_t spin)
{
    if (++*polls > spin) sched_yield();
    else cpu_relax();
}

void fr_shm_wait_one(fr_shm_t *s, int lrank, int which, uint64_t value, uint64_t spin)
{
    volatile uint64_t *f = fr_shm_flag(s, lrank, which);
    uint64_t polls = 0;
    while (__atomic_load_n(f, __ATOMIC_ACQUIRE) < value) fr_backoff(&polls, spin);
}

void fr_shm_wait_all(fr_shm_t *s, int which, uint64_t value, uint64_t spin)
{
    for (int r = 0; r < s->lsize; r++) fr_shm_wait_one(s, r, which, value, spin);
}

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Sizes of the areas, identical on every rank of the node. */
static size_t layout(fr_shm_t *s, size_t per_rank)
{
    size_t l = (size_t)s->lsize, off = 0;
    size_t flags = align_up(l * FR_SHM_NFLAGS * sizeof(fr_shm_flag_t), 4096);
    s->red_slot = align_up(per_rank / 2, 4096);
    s->bc_slot = align_up(per_rank * l / FR_SHM_BCAST_NBUF, 4096);
    off = flags;
    size_t small_off = off; off += align_up(2 * l * FR_SHM_SMALL, 4096);
    size_t red_off = off;   off += 2 * l * s->red_slot;
    size_t bc_off = off;    off += FR_SHM_BCAST_NBUF * s->bc_slot;
    if (s->base) {
        s->flags = (fr_shm_flag_t *)s->base;
        s->small = (char *)s->base + small_off;
        s->red = (char *)s->base + red_off;
        s->bc = (char *)s->base + bc_off;
    }
    return off;
}

fr_status_t fr_shm_create(struct fr_comm *comm)
{
    comm->shm = NULL;
    if (comm->local_size < 2) return FR_SUCCESS;
    fr_shm_t *s = calloc(1, sizeof *s);
    if (!s) return FR_ERROR(FR_ERR_NO_MEMORY, "shm: out of memory");
    s->lrank = comm->local_rank;
    s->lsize = comm->local_size;
    uint64_t per_rank = fr_env_size("FASTREDUCE_SHM_SIZE");
    if (per_rank < 65536) per_rank = 65536;
    s->size = layout(s, per_rank);

    char name[96] = {0};
    int err = 0, fd = -1;
    if (s->lrank == 0) {
        static unsigned counter;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        snprintf(name, sizeof name, "/fastreduce-%ld-%u-%lx", (long)getpid(), counter++,
                 (unsigned long)ts.tv_nsec);
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0) err = errno;
        else if ((err = posix_fallocate(fd, 0, (off_t)s->size)) != 0) {
            close(fd);
            fd = -1;
            shm_unlink(name);
        }
    }
    /* Local rank 0 tells the others the name, or that it failed. */
    struct { int err; char name[96]; } msg;
    msg.err = err;
    memcpy(msg.name, name, sizeof name);
    if (PMPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, 0, comm->node_comm) != MPI_SUCCESS) {
        if (fd >= 0) { close(fd); shm_unlink(name); }
        free(s);
        return FR_ERROR(FR_ERR_MPI, "shm: MPI_Bcast of the segment name failed");
    }
    if (msg.err) {
        size_t size = s->size;
        free(s);
        return FR_ERROR(FR_ERR_SYSTEM, "shm: cannot create a %zu-byte segment in /dev/shm: %s",
                        size, strerror(msg.err));
    }
    if (s->lrank != 0) {
        fd = shm_open(msg.name, O_RDWR, 0600);
        if (fd < 0) err = errno;
    }
    if (fd >= 0) {
        s->base = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (s->base == MAP_FAILED) { err = errno; s->base = NULL; }
        close(fd);
    }
    /* Everyone has mapped it (or failed): unlink it now, so a rank killed
     * later leaves nothing behind in /dev/shm. */
    int any_err = 0;
    int rc = PMPI_Allreduce(&err, &any_err, 1, MPI_INT, MPI_MAX, comm->node_comm);
    if (s->lrank == 0) shm_unlink(msg.name);
    if (rc != MPI_SUCCESS || any_err) {
        if (s->base) munmap(s->base, s->size);
        free(s);
        return FR_ERROR(rc != MPI_SUCCESS ? FR_ERR_MPI : FR_ERR_SYSTEM,
                        "shm: mapping the node's segment failed: %s", strerror(any_err ? any_err : EIO));
    }
    layout(s, per_rank);
    comm->shm = s;
    FR_INFO(FR_SUB_SHM, "shm segment of %zu bytes for %d local ranks (allreduce slot %zu, bcast chunk %zu)",
            s->size, s->lsize, s->red_slot, s->bc_slot);
    return FR_SUCCESS;
}

void fr_shm_destroy(struct fr_comm *comm)
{
    fr_shm_t *s = comm->shm;
    if (!s) return;
    if (s->base) munmap(s->base, s->size);
    free(s);
    comm->shm = NULL;
}

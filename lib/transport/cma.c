/* The trial copies and the reads of cma.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <mpi.h>
#include "cma.h"
#include "log.h"
#include "settings.h"

int fr_cma_read(int32_t pid, uint64_t remote, void *local, size_t n)
{
    /* (a read may stop short, at a page the kernel could not pin at once) */
    while (n) {
        struct iovec l = { local, n }, r = { (void *)(uintptr_t)remote, n };
        ssize_t got = process_vm_readv((pid_t)pid, &l, 1, &r, 1, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            int err = got < 0 ? errno : EFAULT;
            FR_INFO(FR_SUB_SHM, "cma: cannot copy %zu bytes at 0x%llx of process %d to %p: %s", n,
                    (unsigned long long)remote, (int)pid, local, strerror(err));
            return err;
        }
        local = (char *)local + got;
        remote += (uint64_t)got;
        n -= (size_t)got;
    }
    return 0;
}

/* A rank's entry: where its trial word lies and what it holds. The word
 * is the rank's local index in its low bits over a value from the clock,
 * so a rank that reads itself where it meant a peer (ranks in PID
 * namespaces of their own share pids, and without address randomisation
 * addresses too) finds another word than the peer's. */
typedef struct { int64_t pid; uint64_t addr, word; } peer_t;
_Static_assert(sizeof(peer_t) == FR_CMA_SCRATCH, "a peer's entry fills its scratch");

int fr_cma_probe(struct fr_comm *comm, void *scratch)
{
    const int l = comm->local_size;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    /* (on the stack: the peers read it before the last collective below, which this rank is in until then) */
    volatile uint64_t word = ((uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec) << 16 |
                             (uint64_t)comm->local_rank;
    peer_t mine = { getpid(), (uint64_t)(uintptr_t)&word, word }, *all = scratch;
    int ok = comm->set.cma;
    if (PMPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, comm->node_comm) !=
        MPI_SUCCESS)
        ok = FR_CMA_OFF;
    for (int r = 0; ok && r < l; r++) {
        if (r == comm->local_rank) continue;
        uint64_t got = 0;
        int err = fr_cma_read((int32_t)all[r].pid, all[r].addr, &got, sizeof got);
        if (err || got != all[r].word) {
            FR_INFO(FR_SUB_SHM, "cma: cannot read local rank %d's memory (%s): bcasts of private buffers copy "
                    "through the node's segment", r, err ? strerror(err) : "found another word");
            ok = FR_CMA_OFF;
        }
    }
    int every = 0;
    if (PMPI_Allreduce(&ok, &every, 1, MPI_INT, MPI_MIN, comm->node_comm) != MPI_SUCCESS) every = 0;
    return every;
}

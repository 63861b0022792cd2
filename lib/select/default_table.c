/* The built-in tuning table, used when no override matches a call. The
 * format is in docs/tuning.md; how these rules were measured is in its
 * section "The built-in default table" (benchmarks/sweep.sh). */
#include "tune.h"

const char fr_default_table[] =
    "# fastreduce tuning table v1\n"
    "# source: built-in default, measured 2026-12-02 on a 2-core AMD EPYC virtual machine (docs/tuning.md)\n"
    "# collective  memory  nodes  ppn    bytes      algorithm\n"
    /* one node: shared memory was fastest at every size, at 1, 2 and 4 ranks */
    "allreduce     host    1      *      *          shm\n"
    /* across nodes (faked with FASTREDUCE_NODE_SIZE=1): latency-bound sizes
     * want the fewest steps, mid sizes the ring, the largest Rabenseifner */
    /* several nodes of 2+ ranks (2 x 2 faked, UCX on TCP, benchmarks/hier.sh):
     * the hierarchical algorithms win from 8M (allreduce) and 8K (bcast) */
    "allreduce     host    2-inf  2-inf  8M-inf     hier\n"
    "allreduce     host    2-inf  *      0-64K      recursive_doubling\n"
    "allreduce     host    2-inf  *      64K-8M     ring\n"
    "allreduce     host    2-inf  *      8M-inf     rabenseifner\n"
    /* device buffers: NCCL with its own choice until a site's table says
     * ring or tree; what NCCL cannot serve goes through host memory */
    "allreduce     cuda    *      *      *          nccl\n"
    "allreduce     cuda    *      *      *          staged\n"
    "allreduce     *       *      *      *          mpi\n"
    "bcast         host    1      *      *          shm\n"
    "bcast         host    2-inf  2-inf  8K-inf     hier\n"
    "bcast         host    2-inf  *      0-512K     binomial\n"
    "bcast         host    2-inf  *      512K-inf   pipeline\n"
    "bcast         cuda    *      *      *          nccl\n"
    "bcast         cuda    *      *      *          staged\n"
    "bcast         *       *      *      *          mpi\n";

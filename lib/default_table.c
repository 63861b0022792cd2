/* The built-in tuning table, used when no override matches a call. The
 * format is in docs/tuning.md; the lead retunes it from measurements. */
#include "tune.h"

const char fr_default_table[] =
    "# fastreduce tuning table v1\n"
    "# source: built-in default (initial values, not measured)\n"
    "# collective  memory  nodes  ppn    bytes      algorithm\n"
    /* allreduce: shared memory within one node, then by size across nodes */
    "allreduce     host    1      2-inf  *          shm\n"
    "allreduce     host    2-inf  *      0-16K      recursive_doubling\n"
    "allreduce     host    2-inf  *      16K-1M     rabenseifner\n"
    "allreduce     host    2-inf  *      1M-inf     ring\n"
    "allreduce     *       *      *      *          mpi\n"
    /* bcast: the same shape */
    "bcast         host    1      2-inf  *          shm\n"
    "bcast         host    2-inf  *      0-32K      binomial\n"
    "bcast         host    2-inf  *      32K-inf    scatter_allgather\n"
    "bcast         *       *      *      *          mpi\n";

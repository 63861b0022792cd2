/* Every algorithm, in one list: adding one is its file, its line here and
 * its file in Makefile.am. Everything else that lists algorithms (the
 * tuner's candidates and tie order, the forced-algorithm tests, the docs'
 * tables through fastreduce-info) reads this list, in this order. */
#include <string.h>
#include "registry.h"

#define ALGORITHMS(X)                   \
    X(allreduce_ring)                   \
    X(allreduce_recursive_doubling)     \
    X(allreduce_rabenseifner)           \
    X(allreduce_tree)                   \
    X(allreduce_shm)                    \
    X(allreduce_hier)                   \
    X(allreduce_mpi)                    \
    X(bcast_binomial)                   \
    X(bcast_scatter_allgather)          \
    X(bcast_pipeline)                   \
    X(bcast_shm)                        \
    X(bcast_hier)                       \
    X(bcast_mpi)                        \
    X(allreduce_nccl)                   \
    X(allreduce_nccl_ring)              \
    X(allreduce_nccl_tree)              \
    X(allreduce_staged)                 \
    X(bcast_nccl)                       \
    X(bcast_nccl_ring)                  \
    X(bcast_staged)

#define DECLARE(n) extern const fr_alg_t fr_alg_##n;
#define ENTRY(n) &fr_alg_##n,
ALGORITHMS(DECLARE)

const fr_alg_t *const fr_algs[] = { ALGORITHMS(ENTRY) };
const int fr_nalgs = sizeof fr_algs / sizeof fr_algs[0];

int fr_alg_lookup(int coll, const char *name)
{
    for (int i = 0; i < fr_nalgs; i++)
        if ((coll < 0 || (int)fr_algs[i]->coll == coll) && !strcmp(fr_algs[i]->name, name)) return i;
    return -1;
}

const char *fr_alg_name(int i)
{
    return i >= 0 && i < fr_nalgs ? fr_algs[i]->name : "(not chosen yet)";
}

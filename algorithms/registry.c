/* Every algorithm, in one list. Adding one: a file here and a line below. */
#include <string.h>
#include "comm.h"

extern const fr_alg_t fr_alg_allreduce_ring, fr_alg_allreduce_recursive_doubling,
    fr_alg_allreduce_rabenseifner, fr_alg_allreduce_tree, fr_alg_allreduce_shm, fr_alg_allreduce_hier,
    fr_alg_allreduce_mpi,
    fr_alg_bcast_binomial, fr_alg_bcast_scatter_allgather, fr_alg_bcast_pipeline, fr_alg_bcast_shm,
    fr_alg_bcast_hier, fr_alg_bcast_mpi,
    fr_alg_allreduce_nccl, fr_alg_allreduce_nccl_ring, fr_alg_allreduce_nccl_tree, fr_alg_allreduce_staged,
    fr_alg_bcast_nccl, fr_alg_bcast_nccl_ring, fr_alg_bcast_staged;

const fr_alg_t *const fr_algs[] = {
    &fr_alg_allreduce_ring,
    &fr_alg_allreduce_recursive_doubling,
    &fr_alg_allreduce_rabenseifner,
    &fr_alg_allreduce_tree,
    &fr_alg_allreduce_shm,
    &fr_alg_allreduce_hier,
    &fr_alg_allreduce_mpi,
    &fr_alg_bcast_binomial,
    &fr_alg_bcast_scatter_allgather,
    &fr_alg_bcast_pipeline,
    &fr_alg_bcast_shm,
    &fr_alg_bcast_hier,
    &fr_alg_bcast_mpi,
    &fr_alg_allreduce_nccl,
    &fr_alg_allreduce_nccl_ring,
    &fr_alg_allreduce_nccl_tree,
    &fr_alg_allreduce_staged,
    &fr_alg_bcast_nccl,
    &fr_alg_bcast_nccl_ring,
    &fr_alg_bcast_staged,
};
const int fr_nalgs = sizeof fr_algs / sizeof fr_algs[0];

int fr_alg_lookup(int coll, const char *name)
{
    for (int i = 0; i < fr_nalgs; i++)
        if ((coll < 0 || (int)fr_algs[i]->coll == coll) && !strcmp(fr_algs[i]->name, name)) return i;
    return -1;
}

const char *fr_coll_name(fr_coll_t coll)
{
    return coll == FR_COLL_ALLREDUCE ? "allreduce" : coll == FR_COLL_BCAST ? "bcast" : "?";
}

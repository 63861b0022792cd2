/* The algorithms a multi-rank test forces in turn, read from the registry
 * (algorithms/registry.c) so that a new algorithm is forced without the
 * tests naming it. A test leaves algorithms out by their traits
 * (fr_alg_t.traits), each exclusion with its reason where it is made. */
#ifndef FR_TEST_FORCED_H
#define FR_TEST_FORCED_H

#include <stdio.h>
#include <string.h>
#include "internal.h"

#define TU_MAX_FORCED 32

/* The host algorithms of @p coll, in registry order, but those with any of
 * the traits @p leave_out, into @p out (TU_MAX_FORCED at most); returns
 * how many. Rank 0 prints the list as "@p test forces COLL: NAME ...". */
static inline int tu_forced(const char *test, fr_coll_t coll, unsigned leave_out, const fr_alg_t **out)
{
    int n = 0, rank = 0;
    for (int i = 0; i < fr_nalgs && n < TU_MAX_FORCED; i++) {
        const fr_alg_t *a = fr_algs[i];
        if (a->coll == coll && (a->mem_types & FR_MEM_HOST) && !(a->traits & leave_out)) out[n++] = a;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        printf("%s forces %s:", test, fr_coll_name(coll));
        for (int i = 0; i < n; i++) printf(" %s", out[i]->name);
        printf("\n");
    }
    return n;
}

/* The fr_config_t.algo that forces @p a for its own collective only: its
 * name, or "COLL=NAME" where the other collective has an algorithm of that
 * name too (shm, hier, mpi), which the bare name would force as well. */
static inline const char *tu_force_spec(const fr_alg_t *a, char *buf, size_t len)
{
    int other = a->coll == FR_COLL_ALLREDUCE ? FR_COLL_BCAST : FR_COLL_ALLREDUCE;
    if (fr_alg_lookup(other, a->name) >= 0) snprintf(buf, len, "%s=%s", fr_coll_name(a->coll), a->name);
    else snprintf(buf, len, "%s", a->name);
    return buf;
}

#endif

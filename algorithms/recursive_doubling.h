/* Recursive-doubling allreduce over n virtual positions (n a power of two),
 * each mapped to a communicator rank: in round t, position v exchanges its
 * whole current vector with position v ^ 2^t and reduces the two, so after
 * log2(n) rounds every position holds the reduction of all n inputs.
 * Both ends of an exchange reduce with the lower position's operand first,
 * so they compute the same bits; round t uses step number step + t
 * (mod 2^16). */
#ifndef FR_RECURSIVE_DOUBLING_H
#define FR_RECURSIVE_DOUBLING_H

#include "comm.h"

/* The virtual positions and their communicator ranks. */
typedef struct fr_rank_map {
    int n;                                 /* positions, a power of two */
    int me;                                /* this rank's position, in [0, n) */
    int (*rank)(const void *arg, int v);   /* the communicator rank of position v */
    const void *arg;
} fr_rank_map_t;

/* Allreduce of @p count elements (call->dtype, call->op) of @p src into
 * @p buf (src may be buf) among the ranks of @p map, first step number
 * @p step. @p tmp holds count elements. */
fr_status_t fr_rd_allreduce(struct fr_comm *comm, const fr_call_t *call, void *buf, const void *src,
                            size_t count, void *tmp, const fr_rank_map_t *map, unsigned step);

#endif

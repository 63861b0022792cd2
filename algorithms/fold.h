/* The fold of a non-power-of-two rank count onto p, the largest power of
 * two <= size, for algorithms that pair ranks by bits. With rem = size - p,
 * ranks below 2*rem pair up as (2i, 2i+1): the even one sends its input to
 * the odd one, which reduces it (even operand first), takes part as virtual
 * rank i and at the end sends the result back; ranks from 2*rem on are
 * virtual ranks r - rem.
 * Both ends derive the pairing from rank and size alone; virtual ranks keep
 * the order of the ranks, so an operand order chosen by virtual rank is the
 * order of the ranks. */
#ifndef FR_FOLD_H
#define FR_FOLD_H

#include "comm.h"

typedef struct fr_fold {
    int p, rem;
    int vrank;    /* virtual rank in [0, p), or -1 for a rank folded away */
} fr_fold_t;

void fr_fold_init(fr_fold_t *f, int rank, int size);

/* The communicator rank of virtual rank @p v. */
int fr_fold_rank(const fr_fold_t *f, int v);

/* Fold in. *cur is the rank's current data (the input); after a reduction
 * it becomes call->recvbuf. @p tmp holds call->bytes. */
fr_status_t fr_fold_in(struct fr_comm *comm, fr_call_t *call, const fr_fold_t *f, void *tmp,
                       const void **cur, unsigned step);

/* Fold out: the odd rank of each pair sends the result to the even one. */
fr_status_t fr_fold_out(struct fr_comm *comm, fr_call_t *call, const fr_fold_t *f, unsigned step);

#endif

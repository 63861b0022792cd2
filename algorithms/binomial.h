/* One pass down a binomial tree rooted at call->root, over ranks relative to
 * the root: a rank receives its subtree's bytes from the rank that differs in
 * its lowest set bit, then sends each child subtree its bytes, largest first.
 * Both ends compute a subtree's byte range with the same fr_subtree_fn, so
 * they agree on every length and skip the same empty ranges. */
#ifndef FR_BINOMIAL_H
#define FR_BINOMIAL_H

#include "comm.h"

/* The bytes a binomial subtree of relative ranks [lo, hi) needs (hi may
 * pass n). */
typedef void (*fr_subtree_fn)(const fr_call_t *call, int n, int lo, int hi, size_t *off, size_t *len);

/* The pass over @p buf with step number @p step. */
fr_status_t fr_binomial_pass(struct fr_comm *comm, const fr_call_t *call, char *buf,
                             fr_subtree_fn range, unsigned step);

#endif

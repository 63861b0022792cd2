/* A chunked pass around a ring of n ranks: block i of the vector (fr_block()
 * of n) belongs to ring position i, and at step t a rank sends block
 * (pos - t) to the right and receives block (pos - t - 1) from the left,
 * reducing what arrives during the first rs_steps steps (reduce-scatter) and
 * only copying it during the next ag_steps (allgather). Each step is cut
 * into chunks, and a chunk's reduction overlaps the transfer of the next.
 * Both ends cut every block into chunks at the same element offsets, so they
 * compute the same lengths and skip the same empty chunks; step t uses step
 * number tag + t (mod 2^16) for all its chunks, safe because UCX keeps their
 * order. */
#ifndef FR_RING_PASS_H
#define FR_RING_PASS_H

#include "comm.h"
#include "p2p.h"

typedef struct fr_ring {
    int         pos, n;        /* place in the ring, ring length (>= 2) */
    int         left, right;   /* communicator ranks of the neighbours */
    char       *buf;           /* the vector */
    const char *src;           /* reduce-scatter input (== buf when in place) */
    size_t      count, elsize;
    fr_dtype_t  dtype;
    fr_op_t     op;
    int         rs_steps, ag_steps;
    size_t      chunk;         /* elements per chunk, >= 1 */
    char       *tmp;           /* 2 * chunk elements when rs_steps > 0 */
    unsigned    tag;
} fr_ring_t;

/* A ring pass that runs while other work is done: fr_ring_start posts its
 * first round, fr_ring_advance moves it on (waiting, or only as far as
 * the transfers already done allow); it is finished when r == total. */
typedef struct fr_ring_prog {
    fr_ring_t g;
    size_t    m, total, r;   /* chunks per step, rounds, the round in flight */
    fr_req_t  rq[2][2];
} fr_ring_prog_t;

fr_status_t fr_ring_start(struct fr_comm *comm, const fr_ring_t *g, fr_ring_prog_t *x);

/* @p block: wait for the rest; else return as soon as a round is pending. */
fr_status_t fr_ring_advance(struct fr_comm *comm, fr_ring_prog_t *x, int block);

/* The whole pass, waiting. */
fr_status_t fr_ring_run(struct fr_comm *comm, const fr_ring_t *g);

#endif

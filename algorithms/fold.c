/* The non-power-of-two fold (fold.h). */
#include "fold.h"
#include "alg_util.h"

void fr_fold_init(fr_fold_t *f, int rank, int size)
{
    int p = 1;
    while (p <= size / 2) p <<= 1;
    f->p = p;
    f->rem = size - p;
    if (rank < 2 * f->rem) f->vrank = (rank % 2) ? rank / 2 : -1;
    else f->vrank = rank - f->rem;
}

int fr_fold_rank(const fr_fold_t *f, int v)
{
    return v < f->rem ? 2 * v + 1 : v + f->rem;
}

fr_status_t fr_fold_in(struct fr_comm *comm, fr_call_t *call, const fr_fold_t *f, void *tmp,
                       const void **cur, unsigned step)
{
    int r = comm->rank;
    if (r >= 2 * f->rem) return FR_SUCCESS;
    if (f->vrank < 0)
        return fr_p2p_send(comm, r + 1, *cur, call->bytes, FR_ALG_STEP(step));
    FR_CHECK(fr_p2p_recv(comm, r - 1, tmp, call->bytes, FR_ALG_STEP(step)));
    fr_reduce3(call->recvbuf, tmp, *cur, call->count, call->dtype, call->op);
    *cur = call->recvbuf;
    return FR_SUCCESS;
}

fr_status_t fr_fold_out(struct fr_comm *comm, fr_call_t *call, const fr_fold_t *f, unsigned step)
{
    int r = comm->rank;
    if (r >= 2 * f->rem) return FR_SUCCESS;
    if (f->vrank < 0)
        return fr_p2p_recv(comm, r + 1, call->recvbuf, call->bytes, FR_ALG_STEP(step));
    return fr_p2p_send(comm, r - 1, call->recvbuf, call->bytes, FR_ALG_STEP(step));
}

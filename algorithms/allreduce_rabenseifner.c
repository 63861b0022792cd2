/* Rabenseifner allreduce: a recursive-halving reduce-scatter (each round a
 * rank keeps half of its current range of blocks and sends the other half to
 * its partner) then a recursive-doubling allgather of the reduced blocks.
 * Non-power-of-two rank counts are folded first (fold.h). Each block's
 * final value is computed by one rank and then copied, so results are
 * bit-identical on every rank. Bandwidth-optimal for large messages. */
#include "alg_util.h"
#include "fold.h"

#define RAB_STEP_FOLD   0
#define RAB_STEP_FIRST  1     /* halving and doubling rounds use 1 .. 2*log2(p) */
#define RAB_STEP_UNFOLD 128

/* Element offset of block @p i of @p p (i == p gives count). */
static fr_status_t rab_run(fr_call_t *call, struct fr_comm *comm)
{
    if (call->count == 0) return FR_SUCCESS;
    if (comm->size == 1) { fr_alg_copy_input(call); return FR_SUCCESS; }

    size_t es = fr_dtype_size(call->dtype), n = call->count;
    char *tmp = fr_comm_scratch(comm, fr_alg_scratch_message(call, comm));
    if (!tmp) return FR_ERR_INTERNAL;
    char *out = call->recvbuf;
    fr_fold_t f;
    fr_fold_init(&f, comm->rank, comm->size);
    const void *cur = call->sendbuf;

    FR_CHECK(fr_fold_in(comm, call, &f, tmp, &cur, RAB_STEP_FOLD));
    if (f.vrank >= 0) {
        int p = f.p, v = f.vrank, lo = 0, hi = p;
        unsigned step = RAB_STEP_FIRST;
        /* reduce-scatter by recursive halving: ends with block v */
        for (int mask = p / 2; mask >= 1; mask >>= 1, step++) {
            int pv = v ^ mask, peer = fr_fold_rank(&f, pv), mid = lo + mask;
            int klo = (v & mask) ? mid : lo, khi = (v & mask) ? hi : mid;
            int slo = (v & mask) ? lo : mid, shi = (v & mask) ? mid : hi;
            size_t ko = fr_block_start(n, p, klo), kl = fr_block_start(n, p, khi) - ko;
            size_t so = fr_block_start(n, p, slo), sl = fr_block_start(n, p, shi) - so;
            const char *c = cur;
            FR_CHECK(fr_alg_xchg(comm, peer, c + so * es, sl * es, tmp, kl * es, step));
            if (kl)
                fr_alg_reduce_ordered(out + ko * es, c + ko * es, tmp, pv < v, kl, call->dtype,
                                      call->op);
            cur = out;  /* the kept range, the only one used from now on, is in out */
            lo = klo;
            hi = khi;
        }
        /* allgather by recursive doubling */
        for (int mask = 1; mask < p; mask <<= 1, step++) {
            int pv = v ^ mask, peer = fr_fold_rank(&f, pv);
            int mine = v & ~(mask - 1), theirs = pv & ~(mask - 1);
            size_t mo = fr_block_start(n, p, mine), ml = fr_block_start(n, p, mine + mask) - mo;
            size_t to = fr_block_start(n, p, theirs), tl = fr_block_start(n, p, theirs + mask) - to;
            FR_CHECK(fr_alg_xchg(comm, peer, out + mo * es, ml * es, out + to * es, tl * es, step));
        }
    }
    return fr_fold_out(comm, call, &f, RAB_STEP_UNFOLD);
}

const fr_alg_t fr_alg_allreduce_rabenseifner = {
    .name = "rabenseifner",
    .coll = FR_COLL_ALLREDUCE,
    .mem_types = FR_MEM_HOST,
    .check = fr_alg_check_host,
    .run = rab_run,
    .scratch = fr_alg_scratch_message,
    .desc = "recursive-halving reduce-scatter, recursive-doubling allgather; extra ranks folded onto partners",
    .needs = FR_NEEDS_UCX,
    .tie_rank = 2,
};

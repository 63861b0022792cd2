/* Recursive-doubling allreduce: log2(p) rounds of pairwise exchange of the
 * whole vector between ranks whose virtual ranks differ in one bit
 * (recursive_doubling.h). With a non-power-of-two rank count the extra ranks
 * first fold their input onto a partner and get the result back last
 * (fold.h). Both ends of an exchange reduce with the lower rank's operand
 * first, so every rank ends with the same bits. Suits small messages:
 * latency log2(p), no chunking. */
#include "alg_util.h"
#include "fold.h"
#include "recursive_doubling.h"

#define RD_STEP_FOLD   0
#define RD_STEP_FIRST  1      /* rounds use 1 .. log2(p) */
#define RD_STEP_UNFOLD 64

/* The rank map's rank(): the fold's virtual ranks, which keep the order of
 * the ranks, so the lower position is the lower rank. */
static int fold_rank(const void *f, int v)
{
    return fr_fold_rank(f, v);
}

static fr_status_t rd_run(fr_call_t *call, struct fr_comm *comm)
{
    if (call->count == 0) return FR_SUCCESS;
    if (comm->size == 1) { fr_alg_copy_input(call); return FR_SUCCESS; }

    void *tmp = fr_comm_scratch(comm, fr_alg_scratch_message(call, comm));
    if (!tmp) return FR_ERR_INTERNAL;
    fr_fold_t f;
    fr_fold_init(&f, comm->rank, comm->size);
    const void *cur = call->sendbuf;

    FR_CHECK(fr_fold_in(comm, call, &f, tmp, &cur, RD_STEP_FOLD));
    if (f.vrank >= 0) {
        fr_rank_map_t map = {.n = f.p, .me = f.vrank, .rank = fold_rank, .arg = &f};
        FR_CHECK(fr_rd_allreduce(comm, call, call->recvbuf, cur, call->count, tmp, &map, RD_STEP_FIRST));
    }
    return fr_fold_out(comm, call, &f, RD_STEP_UNFOLD);
}

const fr_alg_t fr_alg_allreduce_recursive_doubling = {
    .name = "recursive_doubling",
    .coll = FR_COLL_ALLREDUCE,
    .mem_types = FR_MEM_HOST,
    .check = fr_alg_check_host,
    .run = rd_run,
    .scratch = fr_alg_scratch_message,
    .desc = "pairwise exchange of the whole vector in log2(p) rounds; extra ranks folded onto partners",
    .needs = FR_NEEDS_UCX,
    .tie_rank = 0,
};

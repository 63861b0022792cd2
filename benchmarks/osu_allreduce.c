/* The allreduce part of the osu-style benchmarks (fr_osu_allreduce,
 * fr_osu_iallreduce): the calls, blocking and non-blocking, the busbw
 * factor and validation. The drivers are osu_common.c and osu_nb.c. See
 * docs/benchmarks.md. */
#include "osu_common.h"
#include "internal.h"

static fr_status_t ar_run_fr(osu_ctx_t *c)
{
    return fr_allreduce(c->sbuf, c->rbuf, c->count, c->o->dtype, c->o->op, c->comm);
}

static int ar_run_mpi(osu_ctx_t *c)
{
    return MPI_Allreduce(c->ms, c->mr, (int)c->count, c->o->mpi_dtype, c->o->mpi_op, c->mpi_comm);
}

static fr_status_t ar_start_fr(osu_ctx_t *c, fr_request_t *req)
{
    return fr_iallreduce(c->sbuf, c->rbuf, c->count, c->o->dtype, c->o->op, c->comm, req);
}

static int ar_start_mpi(osu_ctx_t *c, MPI_Request *req)
{
    return MPI_Iallreduce(c->ms, c->mr, (int)c->count, c->o->mpi_dtype, c->o->mpi_op, c->mpi_comm, req);
}

static const char *ar_algorithm(osu_ctx_t *c, char *label, size_t len)
{
    return fr_allreduce_choice(c->comm, c->count, c->o->dtype, c->o->op,
                               c->o->device ? FR_MEM_CUDA : FR_MEM_HOST, label, len);
}

static double ar_busbw_factor(int n)
{
    return n > 1 ? 2.0 * (n - 1) / n : 0.0;
}

/* How many distinct small values an input takes so that every partial result
 * stays an exact integer of the type (1..8). */
static size_t value_range(const osu_opts_t *o, int n)
{
    double k = osu_exact_limit(o->dtype) / n - (o->op == FR_AVG ? 1 : 0);
    return k < 1 ? 1 : k > 8 ? 8 : (size_t)k;
}

/* Rank r's input element i for round seed: small positive integers, so the
 * exact result is representable in every type whatever the reduction order. */
static double input(fr_op_t op, size_t r, int n, size_t i, int seed, size_t k)
{
    switch (op) {
    case FR_SUM:  return 1.0 + (double)((i + 3 * r + (size_t)seed) % k);
    case FR_PROD: return (i + r + (size_t)seed) % 3 == 0 && r < 12 ? 2.0 : 1.0;   /* product <= 16 */
    case FR_MIN:
    case FR_MAX:  return 1.0 + (double)((7 * i + 5 * r + (size_t)seed) % 100);
    default: {    /* FR_AVG: base + d(r), the d(r) summing to 0 over ranks */
        double base = 1.0 + (double)((i + (size_t)seed) % k);
        double d = r % 2 ? -1.0 : (r + 1 < (size_t)n ? 1.0 : 0.0);
        return base + d;
    }
    }
}

static double expected(fr_op_t op, int n, size_t i, int seed, size_t k)
{
    double acc = input(op, 0, n, i, seed, k);
    for (size_t r = 1; r < (size_t)n; r++) {
        double v = input(op, r, n, i, seed, k);
        switch (op) {
        case FR_PROD: acc *= v; break;
        case FR_MIN:  acc = v < acc ? v : acc; break;
        case FR_MAX:  acc = v > acc ? v : acc; break;
        default:      acc += v; break;
        }
    }
    return op == FR_AVG ? acc / n : acc;   /* the sum is n * base: exact */
}

static void ar_fill(osu_ctx_t *c, int seed)
{
    const osu_opts_t *o = c->o;
    size_t k = value_range(o, c->nranks);
    for (size_t i = 0; i < c->count; i++)
        osu_set(c->hs, i, o->dtype, input(o->op, (size_t)c->rank, c->nranks, i, seed, k));
    osu_poison(c->hr, c->count * c->esize);
}

static size_t ar_check(osu_ctx_t *c, int seed)
{
    const osu_opts_t *o = c->o;
    size_t k = value_range(o, c->nranks), wrong = 0;
    for (size_t i = 0; i < c->count; i++)
        if (osu_get(c->hr, i, o->dtype) != expected(o->op, c->nranks, i, seed, k)) wrong++;
    return wrong;
}

const osu_coll_t osu_allreduce = {
    .kind = OSU_ALLREDUCE,
    .title = "Allreduce",
    .run_fr = ar_run_fr,
    .run_mpi = ar_run_mpi,
    .start_fr = ar_start_fr,
    .start_mpi = ar_start_mpi,
    .algorithm = ar_algorithm,
    .busbw_factor = ar_busbw_factor,
    .fill = ar_fill,
    .check = ar_check,
};

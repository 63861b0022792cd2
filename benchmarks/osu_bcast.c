/* The broadcast part of the osu-style benchmarks (fr_osu_bcast,
 * fr_osu_ibcast): the calls, blocking and non-blocking, the busbw factor
 * and validation. The drivers are osu_common.c and osu_nb.c. See
 * docs/benchmarks.md. */
#include "osu_common.h"
#include "internal.h"

static fr_status_t bc_run_fr(osu_ctx_t *c)
{
    return fr_bcast(c->sbuf, c->count, c->o->dtype, c->o->root, c->comm);
}

static int bc_run_mpi(osu_ctx_t *c)
{
    return MPI_Bcast(c->ms, (int)c->count, c->o->mpi_dtype, c->o->root, c->mpi_comm);
}

static fr_status_t bc_start_fr(osu_ctx_t *c, fr_request_t *req)
{
    return fr_ibcast(c->sbuf, c->count, c->o->dtype, c->o->root, c->comm, req);
}

static int bc_start_mpi(osu_ctx_t *c, MPI_Request *req)
{
    return MPI_Ibcast(c->ms, (int)c->count, c->o->mpi_dtype, c->o->root, c->mpi_comm, req);
}

static const char *bc_algorithm(osu_ctx_t *c, char *label, size_t len)
{
    return fr_bcast_choice(c->comm, c->count, c->o->dtype, c->o->root,
                           c->o->device ? FR_MEM_CUDA : FR_MEM_HOST, label, len);
}

static double bc_busbw_factor(int n)
{
    (void)n;
    return 1.0;
}

/* Element i of the root's message in round seed: 1..100, exact in every type. */
static double message(size_t i, int seed)
{
    return 1.0 + (double)((13 * i + 7 * (size_t)seed) % 100);
}

/* The root's buffer holds the message, the others' are poisoned. */
static void bc_fill(osu_ctx_t *c, int seed)
{
    const osu_opts_t *o = c->o;
    if (c->rank == o->root)
        for (size_t i = 0; i < c->count; i++) osu_set(c->hs, i, o->dtype, message(i, seed));
    else
        osu_poison(c->hs, c->count * c->esize);
}

static size_t bc_check(osu_ctx_t *c, int seed)
{
    const osu_opts_t *o = c->o;
    size_t wrong = 0;
    for (size_t i = 0; i < c->count; i++)
        if (osu_get(c->hs, i, o->dtype) != message(i, seed)) wrong++;
    return wrong;
}

const osu_coll_t osu_bcast = {
    .kind = OSU_BCAST,
    .title = "Bcast",
    .run_fr = bc_run_fr,
    .run_mpi = bc_run_mpi,
    .start_fr = bc_start_fr,
    .start_mpi = bc_start_mpi,
    .algorithm = bc_algorithm,
    .busbw_factor = bc_busbw_factor,
    .fill = bc_fill,
    .check = bc_check,
};

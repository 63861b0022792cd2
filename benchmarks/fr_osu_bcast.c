/* fr_osu_bcast: OSU-style latency test of fr_bcast(). The driver is
 * osu_common.c; this file holds the broadcast-specific parts: the calls, the
 * busbw factor and validation. See docs/benchmarks.md. */
#include "osu_common.h"
#include "internal.h"

static fr_status_t bc_run_fr(osu_ctx_t *c)
{
    return fr_bcast(c->sbuf, c->count, c->o->dtype, c->o->root, c->comm);
}

static int bc_run_mpi(osu_ctx_t *c)
{
    return MPI_Bcast(c->sbuf, (int)c->count, c->o->mpi_dtype, c->o->root, c->mpi_comm);
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

static size_t bc_validate(osu_ctx_t *c, int seed)
{
    const osu_opts_t *o = c->o;
    size_t wrong = 0;
    if (c->rank == o->root)
        for (size_t i = 0; i < c->count; i++) osu_set(c->hs, i, o->dtype, message(i, seed));
    else
        osu_poison(c->hs, c->count * c->esize);
    osu_upload(c);
    if (fr_bcast(c->sbuf, c->count, o->dtype, o->root, c->comm) != FR_SUCCESS)
        return (size_t)-1;
    osu_download(c);
    for (size_t i = 0; i < c->count; i++)
        if (osu_get(c->hs, i, o->dtype) != message(i, seed)) wrong++;
    return wrong;
}

static const osu_coll_t bcast = {
    .kind = OSU_BCAST,
    .title = "Bcast",
    .run_fr = bc_run_fr,
    .run_mpi = bc_run_mpi,
    .algorithm = bc_algorithm,
    .busbw_factor = bc_busbw_factor,
    .validate = bc_validate,
};

int main(int argc, char **argv)
{
    return osu_main(argc, argv, &bcast);
}

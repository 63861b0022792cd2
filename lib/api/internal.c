/* The tools' accessors (see internal.h). */
#include "internal.h"
#include "shm_zcopy.h"

fr_comm_facts_t fr_comm_facts(const struct fr_comm *comm)
{
    return (fr_comm_facts_t){
        .size = comm->size, .nnodes = comm->nnodes, .ppn = comm->ppn,
        .fingerprint = comm->fingerprint[0] ? comm->fingerprint : "unknown", .nccl_ready = comm->nccl_state == 1,
    };
}

const fr_table_t *fr_comm_table(const struct fr_comm *comm) { return &comm->table; }

const fr_settings_t *fr_comm_settings(const struct fr_comm *comm) { return &comm->set; }

int fr_comm_cma_bcast_range(const struct fr_comm *comm, size_t *lo, size_t *hi)
{
    return fr_shm_cma_bcast_range(comm, lo, hi);
}

size_t fr_comm_zero_copy_min(const struct fr_comm *comm, fr_coll_t coll)
{
    /* (the sizes at which the shm algorithms look for shared buffers) */
    for (size_t b = 1; b && b <= ((size_t)1 << 40); b *= 2) {
        fr_call_t call = {.coll = coll, .bytes = b, .count = b, .dtype = FR_UINT8, .mem = FR_MEM_HOST};
        if (coll == FR_COLL_ALLREDUCE ? fr_shm_zc_allreduce_size(comm, &call) : fr_shm_zc_bcast_size(comm, &call))
            return b;
    }
    return 0;
}

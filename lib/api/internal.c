/* The tools' accessors (see internal.h). */
#include "internal.h"

fr_comm_facts_t fr_comm_facts(const struct fr_comm *comm)
{
    return (fr_comm_facts_t){
        .size = comm->size, .nnodes = comm->nnodes, .ppn = comm->ppn,
        .fingerprint = comm->fingerprint[0] ? comm->fingerprint : "unknown", .nccl_ready = comm->nccl_state == 1,
    };
}

const fr_table_t *fr_comm_table(const struct fr_comm *comm) { return &comm->table; }

const fr_settings_t *fr_comm_settings(const struct fr_comm *comm) { return &comm->set; }

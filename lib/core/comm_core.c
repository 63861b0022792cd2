/* What the communicator's data offers every layer: its scratch buffer, the
 * collectives' names. */
#include <stdlib.h>
#include "comm.h"
#include "log.h"

fr_status_t fr_comm_scratch_grow(struct fr_comm *comm, size_t bytes)
{
    if (bytes <= comm->scratch_size) return FR_SUCCESS;
    void *q = NULL;
    if (posix_memalign(&q, 64, bytes))
        return FR_ERROR(FR_ERR_NO_MEMORY, "no memory for %zu bytes of the algorithm's scratch", bytes);
    free(comm->scratch);
    comm->scratch = q;
    comm->scratch_size = bytes;
    return FR_SUCCESS;
}

void fr_comm_scratch_drop(struct fr_comm *comm)
{
    free(comm->scratch);
    comm->scratch = NULL;
    comm->scratch_size = 0;
}

void *fr_comm_scratch(struct fr_comm *comm, size_t bytes)
{
    if (bytes <= comm->scratch_size) return comm->scratch;
    FR_ERROR(FR_ERR_INTERNAL, "the algorithm %s takes %zu bytes of scratch but reserved %zu (fr_alg_t.scratch)",
             comm->cur_alg ? comm->cur_alg : "?", bytes, comm->scratch_size);
    return NULL;
}

const char *fr_coll_name(fr_coll_t coll)
{
    return coll == FR_COLL_ALLREDUCE ? "allreduce" : coll == FR_COLL_BCAST ? "bcast" : "?";
}

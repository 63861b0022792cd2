/* What the communicator's data offers every layer: its scratch buffer, the
 * collectives' names. */
#include <stdlib.h>
#include "comm.h"
#include "log.h"

void *fr_comm_scratch(struct fr_comm *comm, size_t bytes)
{
    if (bytes <= comm->scratch_size) return comm->scratch;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes)) {
        FR_ERROR(FR_ERR_NO_MEMORY, "cannot allocate %zu bytes of scratch", bytes);
        return NULL;
    }
    free(comm->scratch);
    comm->scratch = p;
    comm->scratch_size = bytes;
    return p;
}

const char *fr_coll_name(fr_coll_t coll)
{
    return coll == FR_COLL_ALLREDUCE ? "allreduce" : coll == FR_COLL_BCAST ? "bcast" : "?";
}

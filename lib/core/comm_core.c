/* What the communicator's data offers every layer: its scratch buffer, the
 * collectives' names. */
#include <stdlib.h>
#include "comm.h"
#include "log.h"

/* A grow-only buffer *p of *size bytes, made at least @p bytes. */
static void *grow(void **p, size_t *size, size_t bytes, const char *what)
{
    if (bytes <= *size) return *p;
    void *q = NULL;
    if (posix_memalign(&q, 64, bytes)) {
        FR_ERROR(FR_ERR_NO_MEMORY, "cannot allocate %zu bytes of %s", bytes, what);
        return NULL;
    }
    free(*p);
    *p = q;
    *size = bytes;
    return q;
}

void *fr_comm_scratch(struct fr_comm *comm, size_t bytes)
{
    return grow(&comm->scratch, &comm->scratch_size, bytes, "scratch");
}

const char *fr_coll_name(fr_coll_t coll)
{
    return coll == FR_COLL_ALLREDUCE ? "allreduce" : coll == FR_COLL_BCAST ? "bcast" : "?";
}

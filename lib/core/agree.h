/* Agreement among the ranks of an MPI communicator on an outcome, with no
 * bound on the wait (the bounded form is fr_agree_bounded, lib/transport/wait.h). */
#ifndef FR_AGREE_H
#define FR_AGREE_H

#include <mpi.h>
#include "fastreduce.h"

/* FR_SUCCESS when MPI is initialized and not finalized. */
fr_status_t fr_mpi_ready(void);
/* Collective: every rank learns whether any rank's @p st failed. */
fr_status_t fr_agree(MPI_Comm comm, fr_status_t st, const char *what);
/* fr_agree's outcome once the worst status of all ranks, @p worst, is known. */
fr_status_t fr_agreed(fr_status_t st, int worst, const char *what);

#endif

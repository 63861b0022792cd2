/* libfastreduce-mpi.so: the PMPI interposer. Its MPI_Allreduce and
 * MPI_Bcast take the place of the MPI library's (LD_PRELOAD, or linked
 * before it) and are FR_Allreduce and FR_Bcast: what fastreduce can serve
 * (a predefined type and op on an intra-communicator; any datatype for
 * bcast) goes to fr_allreduce / fr_bcast on a communicator cached on the
 * MPI one, with the algorithm the table picks; the rest goes to
 * PMPI_Allreduce / PMPI_Bcast unchanged. FASTREDUCE_DISABLE and
 * FASTREDUCE_STATS apply (lib/api/mpi_stats.h). It uses the public header
 * only: the library exports nothing else. */
#include <mpi.h>
#include "fastreduce.h"

/* (FR_API: exported whatever mpi.h declares, as the library hides the rest) */
FR_API int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm)
{
    return FR_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

FR_API int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    return FR_Bcast(buffer, count, datatype, root, comm);
}

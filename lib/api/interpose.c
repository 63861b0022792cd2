/* libfastreduce-mpi.so: the PMPI interposer. Its MPI_Allreduce,
 * MPI_Bcast, MPI_Iallreduce, MPI_Ibcast, MPI_Alloc_mem and MPI_Free_mem
 * (memory of fr_mem_alloc, so that collectives on it go zero-copy) and
 * MPI_Comm_free (the cached communicator destroyed at the free) and
 * MPI_Request_get_status (which polls a served request) take
 * the place of the MPI
 * library's (LD_PRELOAD, or linked before it) and are FR_Allreduce,
 * FR_Bcast, FR_Iallreduce and FR_Ibcast: what fastreduce can serve (a
 * predefined type and op on an intra-communicator; any datatype for
 * bcast) goes to fastreduce on a communicator cached on the MPI one, with
 * the algorithm the table picks, the non-blocking calls as generalized
 * requests where MPI gives a correct way to complete them (fastreduce.h);
 * the rest goes to the PMPI_ call unchanged. FASTREDUCE_DISABLE and
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

FR_API int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                          MPI_Comm comm, MPI_Request *request)
{
    return FR_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

FR_API int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request)
{
    return FR_Ibcast(buffer, count, datatype, root, comm, request);
}

FR_API int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void *baseptr)
{
    return FR_Alloc_mem(size, info, baseptr);
}

FR_API int MPI_Free_mem(void *base)
{
    return FR_Free_mem(base);
}

FR_API int MPI_Comm_free(MPI_Comm *comm)
{
    return FR_Comm_free(comm);
}

FR_API int MPI_Request_get_status(MPI_Request request, int *flag, MPI_Status *status)
{
    return FR_Request_get_status(request, flag, status);
}

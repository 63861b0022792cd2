/* bcast "mpi": the MPI library's own MPI_Bcast of the bytes (through PMPI). */
#include <limits.h>
#include "alg_util.h"
#include "comm.h"
#include "log.h"

static fr_status_t run(fr_call_t *call, fr_comm_t comm)
{
    size_t done = 0;
    do {
        size_t n = call->bytes - done;
        if (n > (size_t)INT_MAX) n = (size_t)INT_MAX;
        if (PMPI_Bcast((char *)call->recvbuf + done, (int)n, MPI_BYTE, call->root, comm->mpi) != MPI_SUCCESS)
            return FR_ERROR(FR_ERR_MPI, "MPI_Bcast failed");
        done += n;
    } while (done < call->bytes);
    return FR_SUCCESS;
}

const fr_alg_t fr_alg_bcast_mpi = {
    .name = "mpi", .coll = FR_COLL_BCAST, .mem_types = FR_MEM_HOST, .check = fr_alg_check_host, .run = run,
    .desc = "the MPI library's MPI_Bcast (reference and fallback)",
};

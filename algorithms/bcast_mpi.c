/* bcast "mpi": the MPI library's own MPI_Bcast of the bytes (through PMPI).
 * Under FASTREDUCE_TIMEOUT: MPI_Ibcast of a private copy, tested until done
 * or timed out (as allreduce "mpi"). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "alg_util.h"
#include "alg.h"
#include "log.h"
#include "wait.h"

static fr_status_t bounded(fr_call_t *call, fr_comm_t comm, char *buf, int n)
{
    if (!n) return FR_SUCCESS;
    char *tmp = malloc((size_t)n);
    if (!tmp) return FR_ERROR(FR_ERR_NO_MEMORY, "bcast mpi: no memory for a %d-byte copy", n);
    int root = comm->rank == call->root;
    if (root) memcpy(tmp, buf, (size_t)n);
    MPI_Request req;
    if (PMPI_Ibcast(tmp, n, MPI_BYTE, call->root, comm->mpi, &req) != MPI_SUCCESS) {
        free(tmp);
        return FR_ERROR(FR_ERR_MPI, "MPI_Ibcast failed");
    }
    FR_CHECK(fr_wait_mpi_block(comm, &req, "MPI_Ibcast", tmp));
    if (!root) memcpy(buf, tmp, (size_t)n);
    free(tmp);
    return FR_SUCCESS;
}

static fr_status_t run(fr_call_t *call, fr_comm_t comm)
{
    size_t done = 0;
    do {
        size_t n = call->bytes - done;
        if (n > (size_t)INT_MAX) n = (size_t)INT_MAX;
        char *buf = (char *)call->recvbuf + done;
        if (comm->timeout_ns) FR_CHECK(bounded(call, comm, buf, (int)n));
        else if (PMPI_Bcast(buf, (int)n, MPI_BYTE, call->root, comm->mpi) != MPI_SUCCESS)
            return FR_ERROR(FR_ERR_MPI, "MPI_Bcast failed");
        done += n;
    } while (done < call->bytes);
    return FR_SUCCESS;
}

const fr_alg_t fr_alg_bcast_mpi = {
    .name = "mpi", .coll = FR_COLL_BCAST, .mem_types = FR_MEM_HOST, .check = fr_alg_check_host, .run = run,
    .desc = "the MPI library's MPI_Bcast (reference and last resort)",
    .traits = FR_ALG_MPI | FR_ALG_LAST_RESORT, .tie_rank = 5,
};

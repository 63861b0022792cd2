/* allreduce "mpi": the MPI library's own MPI_Allreduce (through PMPI, so the
 * interposer never calls itself); the reference and the last fallback. */
#include <limits.h>
#include <string.h>
#include "alg_util.h"
#include "comm.h"
#include "log.h"
#include "mpi_api.h"
#include "reduce.h"

static fr_status_t run(fr_call_t *call, fr_comm_t comm)
{
    MPI_Datatype type;
    MPI_Op op;
    fr_mpi_handles(call->dtype, call->op, &type, &op);
    size_t es = fr_dtype_size(call->dtype), done = 0;
    int inplace = call->sendbuf == call->recvbuf;
    do {
        size_t n = call->count - done;
        if (n > (size_t)INT_MAX) n = (size_t)INT_MAX;
        const void *s = inplace ? MPI_IN_PLACE : (const char *)call->sendbuf + done * es;
        if (PMPI_Allreduce(s, (char *)call->recvbuf + done * es, (int)n, type, op, comm->mpi) != MPI_SUCCESS)
            return FR_ERROR(FR_ERR_MPI, "MPI_Allreduce failed");
        done += n;
    } while (done < call->count);
    return FR_SUCCESS;
}

const fr_alg_t fr_alg_allreduce_mpi = {
    .name = "mpi", .coll = FR_COLL_ALLREDUCE, .mem_types = FR_MEM_HOST, .check = fr_alg_check_host, .run = run,
    .desc = "the MPI library's MPI_Allreduce (reference and fallback; counts above INT_MAX in pieces)",
};

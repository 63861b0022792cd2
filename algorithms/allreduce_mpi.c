/* allreduce "mpi": the MPI library's own MPI_Allreduce (through PMPI, so the
 * interposer never calls itself); the reference and the last fallback.
 * Under FASTREDUCE_TIMEOUT it runs as MPI_Iallreduce on private copies,
 * tested until done or timed out: a collective request cannot be cancelled,
 * so on a timeout the copies stay with MPI (leaked) and the user's buffers
 * are free again. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "alg_util.h"
#include "alg.h"
#include "log.h"
#include "mpi_types.h"
#include "reduce.h"
#include "wait.h"

static fr_status_t bounded(fr_call_t *call, fr_comm_t comm, const void *s, void *r, int n, MPI_Datatype type,
                           MPI_Op op)
{
    size_t bytes = (size_t)n * fr_dtype_size(call->dtype);
    if (!bytes) return FR_SUCCESS;
    char *in = malloc(2 * bytes);
    if (!in) return FR_ERROR(FR_ERR_NO_MEMORY, "allreduce mpi: no memory for the %zu-byte copies", 2 * bytes);
    char *out = in + bytes;
    memcpy(in, s == MPI_IN_PLACE ? r : s, bytes);
    MPI_Request req;
    if (PMPI_Iallreduce(in, out, n, type, op, comm->mpi, &req) != MPI_SUCCESS) {
        free(in);
        return FR_ERROR(FR_ERR_MPI, "MPI_Iallreduce failed");
    }
    FR_CHECK(fr_wait_mpi_block(comm, &req, "MPI_Iallreduce", in));
    memcpy(r, out, bytes);
    free(in);
    return FR_SUCCESS;
}

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
        void *r = (char *)call->recvbuf + done * es;
        if (comm->timeout_ns) FR_CHECK(bounded(call, comm, s, r, (int)n, type, op));
        else if (PMPI_Allreduce(s, r, (int)n, type, op, comm->mpi) != MPI_SUCCESS)
            return FR_ERROR(FR_ERR_MPI, "MPI_Allreduce failed");
        done += n;
    } while (done < call->count);
    return FR_SUCCESS;
}

const fr_alg_t fr_alg_allreduce_mpi = {
    .name = "mpi", .coll = FR_COLL_ALLREDUCE, .mem_types = FR_MEM_HOST, .check = fr_alg_check_host, .run = run,
    .desc = "the MPI library's MPI_Allreduce (reference and last resort; counts above INT_MAX in pieces)",
    .traits = FR_ALG_MPI | FR_ALG_LAST_RESORT, .tie_rank = 6,
};

/* Agreement on an outcome among an MPI communicator's ranks. */
#include <mpi.h>
#include "agree.h"
#include "log.h"

fr_status_t fr_mpi_ready(void)
{
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!init || fin)
        return FR_ERROR(FR_ERR_NOT_INITIALIZED, "MPI is %s", fin ? "already finalized" : "not initialized");
    return FR_SUCCESS;
}

/* Every rank learns whether any rank failed; a rank that did not fail
 * itself gets FR_ERR_MPI-free wording naming the remote failure. */
fr_status_t fr_agree(MPI_Comm comm, fr_status_t st, const char *what)
{
    int mine = (int)st, worst = 0;
    if (PMPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS)
        return FR_ERROR(FR_ERR_MPI, "%s: MPI_Allreduce failed while agreeing on the outcome", what);
    return fr_agreed(st, worst, what);
}

fr_status_t fr_agreed(fr_status_t st, int worst, const char *what)
{
    if (st != FR_SUCCESS) return st;
    if (worst != FR_SUCCESS)
        return FR_ERROR((fr_status_t)worst, "%s failed on another rank: %s", what, fr_strerror((fr_status_t)worst));
    return FR_SUCCESS;
}

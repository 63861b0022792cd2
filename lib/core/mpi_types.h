/* fastreduce's datatypes and ops as MPI handles: what the mpi algorithms
 * pass to the MPI library, and what an MPI-signature call is read as. */
#ifndef FR_MPI_TYPES_H
#define FR_MPI_TYPES_H

#include <mpi.h>
#include "fastreduce.h"

/* Reference-counted creation of the user MPI_Ops for float16/bfloat16. */
fr_status_t fr_mpi_ops_get(void);
void fr_mpi_ops_put(void);

/* The MPI datatype and op that compute @p op on @p dtype (FR_AVG as a sum). */
void fr_mpi_handles(fr_dtype_t dtype, fr_op_t op, MPI_Datatype *type, MPI_Op *mop);

/* fr datatype for a predefined MPI datatype; -1 if there is none. */
int fr_dtype_from_mpi(MPI_Datatype type);

#endif

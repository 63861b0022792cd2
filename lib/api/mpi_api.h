/* The FR_Allreduce / FR_Bcast wrappers as the interposer calls them. */
#ifndef FR_MPI_API_H
#define FR_MPI_API_H

#include <mpi.h>
#include "fastreduce.h"

/* How one MPI-signature call went (for the interposer's statistics). */
typedef struct fr_mpi_served {
    int         served;   /* 1: fastreduce ran it; 0: passed to PMPI_* */
    const char *what;     /* served: the algorithm; passed: why ("datatype", "op", "communicator", ...) */
    double      bytes;    /* served: the message size */
    int         nranks;   /* served: the communicator's size */
    double      setup;    /* seconds this call spent making the communicator's fr_comm_t (0: it was cached);
                             a call it declined is passed on (what: "fastreduce declined ...") */
} fr_mpi_served_t;

/* FR_Allreduce / FR_Bcast, saying in *how (if not NULL) what happened.
 * Calls fastreduce cannot serve go to PMPI_Allreduce / PMPI_Bcast
 * unchanged; fastreduce's failures come back as MPI error classes. */
int fr_mpi_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                     fr_mpi_served_t *how);
int fr_mpi_bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, fr_mpi_served_t *how);
/* How many fr_comm_t the MPI-signature calls made for MPI communicators,
 * and how many of those were destroyed (with their MPI communicator). */
void fr_mpi_cache_counts(unsigned long *created, unsigned long *freed);

#endif

/* What the MPI-signature calls (FR_Allreduce, FR_Bcast, and MPI_Allreduce
 * and MPI_Bcast through the interposer) do with FASTREDUCE_DISABLE=1 (pass
 * everything to the MPI library) and FASTREDUCE_STATS=1 (print at
 * MPI_Finalize, rank 0 of MPI_COMM_WORLD, through the logger, each
 * (collective, algorithm or reason for passing, ranks): calls, bytes, total
 * and mean time, busbw, and apart from them the communicators made inside
 * those calls; a call's time leaves its set-up out). */
#ifndef FR_MPI_STATS_H
#define FR_MPI_STATS_H

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

/* FASTREDUCE_DISABLE and FASTREDUCE_STATS as bits, read at the first call. */
enum { FR_MPI_DISABLED = 1, FR_MPI_STATS = 2 };
int fr_mpi_mode(void);

/* Count call @p h (bcast or allreduce) that took @p secs with its set-up. */
void fr_mpi_stats_record(int bcast, const fr_mpi_served_t *h, double secs, int count, MPI_Datatype type,
                         MPI_Comm comm);
/* Print the summary (rank 0 of MPI_COMM_WORLD only). */
void fr_mpi_stats_print(void);

/* How many fr_comm_t the MPI-signature calls made for MPI communicators,
 * and how many of those were destroyed (with their MPI communicator). */
void fr_mpi_cache_counts(unsigned long *created, unsigned long *freed);

#endif

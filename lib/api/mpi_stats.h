/* What the MPI-signature calls (FR_Allreduce, FR_Bcast, FR_Iallreduce,
 * FR_Ibcast, and the MPI calls the interposer makes them) do with
 * FASTREDUCE_DISABLE=1 (pass everything to the MPI library) and
 * FASTREDUCE_STATS=1 (print at MPI_Finalize, rank 0 of MPI_COMM_WORLD,
 * through the logger, each (call, algorithm or reason for passing, ranks):
 * calls, bytes, total and mean time, busbw, and apart from them the
 * communicators made inside those calls; a call's time leaves its set-up
 * out, and a non-blocking call's is that of its start). */
#ifndef FR_MPI_STATS_H
#define FR_MPI_STATS_H

#include <mpi.h>
#include "fastreduce.h"

/* The kinds of MPI-signature call, as the summary names them. */
typedef enum { FR_MPI_ALLREDUCE = 0, FR_MPI_BCAST, FR_MPI_IALLREDUCE, FR_MPI_IBCAST, FR_MPI_ALLOC_MEM, FR_MPI_FREE_MEM,
               FR_MPI_KINDS } fr_mpi_kind_t;

/* How one MPI-signature call went (for the interposer's statistics). */
typedef struct fr_mpi_served {
    int         mode;     /* fr_mpi_mode() when the call began */
    double      t0;       /* when it began (with FASTREDUCE_STATS) */
    int         served;   /* 1: fastreduce ran it; 0: passed to PMPI_* */
    const char *what;     /* served: the algorithm; passed: why ("datatype", "op", "communicator", ...) */
    const char *via;      /* a served non-blocking call: how MPI completes its request; else NULL */
    int         zcopy;    /* served: it went zero-copy (fr_last_zero_copy) */
    double      bytes;    /* served: the message size */
    int         nranks;   /* served: the communicator's size */
    double      setup;    /* seconds this call spent making the communicator's fr_comm_t (0: it was cached);
                             a call it declined is passed on (what: "fastreduce declined ...") */
} fr_mpi_served_t;

/* FASTREDUCE_DISABLE and FASTREDUCE_STATS as bits, read at the first call. */
enum { FR_MPI_DISABLED = 1, FR_MPI_STATS = 2 };
int fr_mpi_mode(void);

/* Count call @p h of kind @p kind, begun at h->t0 (fr_mpi_call_begin,
 * lib/api/mpi_api.h), when statistics are kept. */
void fr_mpi_call_end(fr_mpi_kind_t kind, const fr_mpi_served_t *h, int count, MPI_Datatype type, MPI_Comm comm);
/* Print the summary (rank 0 of MPI_COMM_WORLD only). */
void fr_mpi_stats_print(void);

/* How many fr_comm_t the MPI-signature calls made for MPI communicators,
 * and how many of those were destroyed (with their MPI communicator). */
void fr_mpi_cache_counts(unsigned long *created, unsigned long *freed);

#endif

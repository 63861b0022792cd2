/* When the ranks arrive at their collectives: each rank's clock against
 * its communicator's rank 0, measured at fr_comm_create, and the late-rank
 * report built from the arrival times at fr_comm_destroy (lib/api/arrival.c). */
#ifndef FR_API_ARRIVAL_H
#define FR_API_ARRIVAL_H

#include <stdint.h>
#include <mpi.h>
#include "fastreduce.h"

/* The arrivals of the last FR_ARRIVAL_CALLS calls are kept (8 bytes each). */
#define FR_ARRIVAL_CALLS (1u << 18)

typedef struct fr_arrival {
    int64_t  offset_ns;     /* added to this rank's clock gives rank 0's */
    uint64_t uncertainty_ns;  /* the largest over the ranks: half the best round trip */
    double  *at;            /* [FR_ARRIVAL_CALLS]: call seq's start on rank 0's clock, at[seq % N]; NULL: off */
    /* the report's reductions, posted at destroy */
    struct fr_arrival_red *red;
} fr_arrival_t;

/* Measure @p a's offset over @p mpi (collective; rank 0 answers each rank
 * in turn, @p rounds round trips each, and keeps the shortest). */
fr_status_t fr_arrival_sync(fr_arrival_t *a, MPI_Comm mpi, int rounds);
/* Keep the arrivals from now on, with what the report will need
 * (collective: every rank keeps them or none; FR_ERR_NO_MEMORY on the
 * rank that lacked the memory). */
fr_status_t fr_arrival_keep(fr_arrival_t *a, MPI_Comm mpi);
/* Call @p seq started at local time @p t_ns. */
static inline void fr_arrival_note(fr_arrival_t *a, uint64_t seq, uint64_t t_ns)
{
    if (a->at) a->at[seq % FR_ARRIVAL_CALLS] = (double)((int64_t)t_ns + a->offset_ns);
}
/* Post the report's reductions of the @p ncalls calls so far (collective,
 * non-blocking, nothing allocated). */
void fr_arrival_post(fr_arrival_t *a, MPI_Comm mpi, uint64_t ncalls);
/* Wait for them; rank 0 prints the report of communicator @p key through the logger. */
void fr_arrival_report(fr_arrival_t *a, MPI_Comm mpi, const char *key);
/* Free what @p a holds. */
void fr_arrival_free(fr_arrival_t *a);

#endif

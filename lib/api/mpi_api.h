/* What the MPI-signature calls share: the blocking ones (FR_Allreduce,
 * FR_Bcast: lib/api/mpi_api.c) and the non-blocking ones (FR_Iallreduce,
 * FR_Ibcast: lib/api/mpi_nb.c). The fastreduce communicator cached on an
 * MPI communicator, why a call goes to the MPI library instead, MPI error
 * classes, and a bcast through packed bytes. */
#ifndef FR_API_MPI_API_H
#define FR_API_MPI_API_H

#include <mpi.h>
#include "comm.h"
#include "mpi_stats.h"

/* Who may run a cached communicator's requests, agreed over its ranks
 * when it is made (each bit set only where every rank has it): a
 * non-blocking call is served or passed alike on every rank, whatever
 * each process was started with. */
enum {
    FR_MPI_CAN_THREAD = 1,     /* FASTREDUCE_PROGRESS=thread: a progress thread runs them */
    FR_MPI_CAN_MULTIPLE = 2,   /* MPI_THREAD_MULTIPLE: that thread may call MPI */
    FR_MPI_HAS_THREAD = 4,     /* the progress thread is made (where a request could be served) */
};

/* The value of the attribute a cached MPI communicator carries. */
typedef struct fr_mpi_cached {
    fr_comm_t comm;       /* NULL once destroyed, or if creation failed */
    int       can;        /* FR_MPI_CAN_* */
    int       started;    /* a non-blocking call was served on it (set alike on every rank): when the MPI
                             communicator is freed, its requests are completed before comm is destroyed */
    int       no_ucx;     /* a blocking call found that UCX cannot be set up on comm (alike on every rank) */
    struct fr_mpi_cached *next;
} fr_mpi_cached_t;

/* A call the MPI-signature layer serves, as its reasons found it. */
typedef struct fr_mpi_call {
    fr_mpi_cached_t *cached;   /* the MPI communicator's entry */
    fr_comm_t        fc;       /* its communicator */
    int              dtype;    /* allreduce: the fr_dtype_t and fr_op_t of the MPI datatype and op */
    int              op;
    MPI_Count        size;     /* bcast: the datatype's size */
    double           setup;    /* seconds spent making fc in this call (0: it was cached) */
} fr_mpi_call_t;

/* Begin a call's statistics: h->mode and h->t0, the rest "passed,
 * FASTREDUCE_DISABLE=1" until the call says otherwise. */
void fr_mpi_call_begin(fr_mpi_served_t *h);

/* Why an allreduce / a bcast of these arguments goes to the MPI library;
 * NULL when fastreduce serves it (*c filled). A blocking call (@p nb 0)
 * makes the communicator at its first call on @p comm; a non-blocking one
 * only finds it (FR_MPI_NOT_SET_UP when there is none), since making it
 * is collective and a non-blocking call must not wait for the other
 * ranks. Every reason is the same on every rank of a correct program. */
const char *fr_mpi_allreduce_why(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                 MPI_Comm comm, int nb, fr_mpi_call_t *c);
const char *fr_mpi_bcast_why(void *buffer, int count, MPI_Datatype datatype, MPI_Comm comm, int nb,
                             fr_mpi_call_t *c);
#define FR_MPI_NOT_SET_UP "not set up by a blocking call yet"
/* The reason of a call passed because UCX, which its algorithm needs, cannot be set up. */
#define FR_MPI_NO_UCX "fastreduce has no UCX here"

/* 1 where MPI_Test can complete a served request itself (MPICH's
 * generalized-request poll, lib/api/mpi_nb.c); else only the progress
 * thread can, under MPI_THREAD_MULTIPLE. */
int fr_mpi_grequest_poll(void);

/* @p st as an MPI error class. */
int fr_mpi_error(fr_status_t st);
/* The same, given first to @p comm's error handler as MPI's own calls do. */
int fr_mpi_served_status(fr_status_t st, MPI_Comm comm);

/* A bcast of count x size bytes, the same on every rank whatever datatype
 * each names (see fr_mpi_bytes_begin in mpi_api.c). */
typedef struct fr_mpi_bytes {
    void        *buf;        /* what fastreduce broadcasts: the caller's buffer, or packed */
    size_t       bytes;
    char        *packed;     /* NULL where the datatype lies flat */
    void        *user;       /* the caller's buffer, count and datatype, to unpack into */
    int          count;
    MPI_Datatype type;
    MPI_Count    size;
    int          own_type;   /* type is a duplicate, freed at the end */
    int          unpack;     /* a rank other than the root unpacks at the end */
    MPI_Comm     comm;       /* the communicator MPI_Pack and MPI_Unpack are given */
    fr_status_t  pack_st;    /* the root's packing */
} fr_mpi_bytes_t;

/* Lay out a bcast of @p count elements of @p t (of @p size bytes) at
 * @p buffer on rank @p me of a communicator whose root is @p root: the
 * root packs a datatype that does not lie flat (into zeros if it cannot,
 * and takes part anyway); with @p keep_type, the others unpack at the end
 * through a duplicate of @p t (a non-blocking call's caller may free its
 * own before the request completes). FR_ERR_NO_MEMORY or FR_SUCCESS. */
fr_status_t fr_mpi_bytes_begin(fr_mpi_bytes_t *b, void *buffer, int count, MPI_Datatype t, MPI_Count size, int root,
                               int me, MPI_Comm comm, int keep_type);
/* After the bcast of @p b (@p st its status): unpack where needed and
 * free what begin made; the first failure. A zeroed @p b does nothing. */
fr_status_t fr_mpi_bytes_end(fr_mpi_bytes_t *b, fr_status_t st);

#endif

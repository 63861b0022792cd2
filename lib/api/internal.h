/* What the project's own programs (tools/: fastreduce-info, fastreduce-topo,
 * fastreduce-tune; benchmarks/) use of the library beyond the public
 * header: the one header they include. They read a communicator through
 * the accessors below and change its table only through fr_select_use,
 * never through its fields. */
#ifndef FR_INTERNAL_H
#define FR_INTERNAL_H

#include "fastreduce.h"
#include "api.h"
#include "comm.h"
#include "copy.h"
#include "device.h"
#include "hwtopo.h"
#include "log.h"
#include "registry.h"
#include "select.h"
#include "settings.h"
#include "tune.h"

/* A communicator's shape and what it was set up with. */
typedef struct fr_comm_facts {
    int         size, nnodes, ppn;   /* ranks, nodes, the most ranks on one node */
    const char *fingerprint;         /* the node's topology fingerprint, "unknown" when none */
    int         nccl_ready;          /* 1 once its NCCL communicator works */
} fr_comm_facts_t;

/* @p comm's facts (a valid communicator). */
fr_comm_facts_t fr_comm_facts(const struct fr_comm *comm);
/* The selection table @p comm uses (owned by it). */
const fr_table_t *fr_comm_table(const struct fr_comm *comm);
/* The settings @p comm was created with (owned by it). */
const fr_settings_t *fr_comm_settings(const struct fr_comm *comm);
/* The least message size of @p coll that goes zero-copy on @p comm where
 * the buffers are fr_mem_alloc's (every rank's for allreduce, the root's
 * for bcast); 0 when none can (no node of two ranks whose ranks open each
 * other's memfds). */
size_t fr_comm_zero_copy_min(const struct fr_comm *comm, fr_coll_t coll);
/* 1 where a bcast of a private root buffer of *lo to *hi bytes goes by cma
 * on this rank's node (the shm algorithm's one copy), else 0. */
int fr_comm_cma_bcast_range(const struct fr_comm *comm, size_t *lo, size_t *hi);

#endif

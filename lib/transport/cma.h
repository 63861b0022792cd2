/* Cross-memory attach (process_vm_readv): a rank copies straight out of a
 * peer's private memory in one kernel-assisted copy, where the kernel lets
 * the node's ranks read each other (same user, ptrace allowed, no seccomp
 * filter refusing the call). The shm bcast uses it for private root
 * buffers, whose copy path would take two copies through the segment. */
#ifndef FR_CMA_H
#define FR_CMA_H
#include <stddef.h>
#include <stdint.h>
#include "comm.h"

/* The bytes of fr_cma_probe's scratch per local rank. */
#define FR_CMA_SCRATCH 24
/* Collective over comm->node_comm: the least FASTREDUCE_CMA of the node's
 * ranks (fr_cma_mode_t), FR_CMA_OFF where a rank could not read another's
 * memory in a trial copy or an MPI call failed (the same on every rank of
 * the node). @p scratch holds FR_CMA_SCRATCH bytes per local rank. */
int fr_cma_probe(struct fr_comm *comm, void *scratch);

/* Copy @p n bytes at @p remote in process @p pid into @p local: 0, or the
 * errno value of the failure, logged (FASTREDUCE_DEBUG=INFO): the peer has
 * gone, or a page on either side cannot be pinned (memory the kernel keeps
 * from other processes, a device's mapping) or is not there. */
int fr_cma_read(int32_t pid, uint64_t remote, void *local, size_t n);

#endif

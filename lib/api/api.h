/* What the entry points share inside the API layer: handle checks,
 * dispatch of a call to its algorithm, and what a call chose. */
#ifndef FR_API_INTERNAL_H
#define FR_API_INTERNAL_H

#include "comm.h"

/* Check the arguments of an allreduce / bcast (the errors fr_allreduce and
 * fr_bcast return) and describe it in *call. */
fr_status_t fr_prepare_allreduce(const void *sendbuf, void *recvbuf, size_t count, fr_dtype_t dtype, fr_op_t op,
                                 fr_comm_t comm, fr_call_t *call);
fr_status_t fr_prepare_bcast(void *buf, size_t count, fr_dtype_t dtype, int root, fr_comm_t comm, fr_call_t *call);
/* Choose @p call's algorithm and run it (the per-call log line, the
 * communicator's sequence number, avg's division of host buffers; the NCCL
 * set-up at the first device call). */
fr_status_t fr_dispatch(struct fr_comm *comm, fr_call_t *call);
/* What fr_allreduce_algorithm / fr_bcast_algorithm (in @p mem) answer, as
 * a label written into @p label: the name, the rule's chunk where it is
 * not the algorithm's default, and the other parameters the rule sets
 * ("shm chunk=1M"); NULL as they. */
const char *fr_allreduce_choice(fr_comm_t comm, size_t count, fr_dtype_t dtype, fr_op_t op, fr_mem_t mem,
                                char *label, size_t len);
const char *fr_bcast_choice(fr_comm_t comm, size_t count, fr_dtype_t dtype, int root, fr_mem_t mem, char *label,
                            size_t len);
/* The algorithm of this thread's last fr_dispatch ("" before any), or of
 * its last blocking call that another thread ran (fr_last_algorithm_set,
 * with whether it went zero-copy, fr_last_zero_copy, and whether a bcast
 * went by cma, fr_last_cma: one copy from the root's private buffer, on
 * the root and on the ranks that read it). */
const char *fr_last_algorithm(void);
int fr_last_cma(void);
void fr_last_algorithm_set(const char *alg, int zcopy, int cma);

/* This machine's kernel boot id ("" where it cannot be read): processes
 * with the same one share their cores and their monotonic clock. */
void fr_boot_id(char *id, size_t len);

/* Validate a handle: FR_SUCCESS or FR_ERR_BAD_COMM with a message. */
fr_status_t fr_comm_check(const struct fr_comm *comm);
/* fr_comm_destroy of @p n communicators at once (collective over each; NULL
 * entries are skipped): the ranks may list them in different orders. */
fr_status_t fr_comm_destroy_many(fr_comm_t *comms, int n);

#endif

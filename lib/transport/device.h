/* Device (CUDA) buffers: telling them apart, the NCCL communicator of an
 * fr_comm_t, the host copies of the staged path. lib/device.c; every
 * function exists in every build and says "not built in" where it must. */
#ifndef FR_DEVICE_H
#define FR_DEVICE_H

#include <stddef.h>
#include "comm.h"

/* The memory type of @p p (NULL is host). Device memory is FR_MEM_CUDA;
 * host, pinned, managed and unknown pointers are FR_MEM_HOST. In a build
 * without CUDA a device pointer (found through the CUDA driver when the
 * process has loaded it) is refused with FR_ERR_NOT_SUPPORTED. */
fr_status_t fr_mem_of(const void *p, fr_mem_t *mem);

/* 1 when @p p is device memory that this build cannot serve: always 0 in
 * a build with CUDA (and then no driver call); without it, the driver is
 * opened first if no communicator has yet, and asked about @p p. */
int fr_mem_unserved(const void *p);

/* Open the CUDA driver library, if the node has one, to tell device
 * memory (once per process; fr_comm_create calls it). */
void fr_device_probe(void);
/* 1 once fr_device_probe found the driver: without it no pointer is device
 * memory, and the calls skip fr_mem_of. */
extern int fr_cuda_driver;
static inline fr_status_t fr_mem_of_fast(const void *p, fr_mem_t *mem)
{
    *mem = FR_MEM_HOST;
    return __atomic_load_n(&fr_cuda_driver, __ATOMIC_RELAXED) ? fr_mem_of(p, mem) : FR_SUCCESS;
}

/* Collective (every rank at the same call): the NCCL communicator of
 * @p comm, made once (the first device call, or fr_comm_create with
 * nccl_eager). On any rank's failure every rank records that NCCL is not
 * there (comm->nccl_state < 0, the reason logged once) and device buffers
 * take the host-staged path; FR_SUCCESS unless MPI itself fails.
 * @p dev is the GPU to use (-1: the rank's GPU from the topology, else the
 * current device). */
fr_status_t fr_device_setup(struct fr_comm *comm, int dev);
/* Free what fr_device_setup and the staged path made (comm destroy). */
void fr_device_destroy(struct fr_comm *comm);

/* The GPU holding @p p, or -1. */
int fr_device_of(const void *p);

/* Copies between device and host memory on @p stream (a cudaStream_t, NULL:
 * the legacy default stream), waited for; the _async one only enqueues. */
fr_status_t fr_device_copy(void *dst, const void *src, size_t bytes, void *stream);
fr_status_t fr_device_copy_async(void *dst, const void *src, size_t bytes, void *stream);
/* Wait for the work on @p stream. */
fr_status_t fr_device_sync(void *stream);
/* Wait for an NCCL call enqueued on @p stream: bounded by the
 * communicator's FASTREDUCE_TIMEOUT (then the NCCL communicator is aborted
 * and @p comm broken), and failing on an asynchronous NCCL error. */
fr_status_t fr_device_wait_nccl(struct fr_comm *comm, void *stream);
/* Make GPU @p dev the calling thread's current device (-1: leave it);
 * returns the device to give back to fr_device_restore, -1 where the
 * current one was not changed. A request run by the program's thread
 * inside fr_wait/fr_test must leave that thread's device as it found it. */
int fr_device_use(int dev);
void fr_device_restore(int prev);
/* A CUDA event recorded on @p stream after the work enqueued there: the
 * request path's sign that its device work is done. */
fr_status_t fr_device_event_record(void *stream, void **event);
/* 1 when @p event has completed (*st: FR_SUCCESS, or the CUDA error the
 * work ended with), 0 while it has not; never waits. */
int fr_device_event_done(void *event, fr_status_t *st);
void fr_device_event_free(void *event);
/* A pinned host buffer of at least @p bytes owned by the communicator. */
void *fr_device_stage(struct fr_comm *comm, size_t bytes);

#endif

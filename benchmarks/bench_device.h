/* The benchmarks' device buffers (benchmarks/bench_device.c), for
 * fastreduce-tune --memory cuda and fr_osu_* -d cuda: the rank's GPU, the
 * buffers, the copies. Without CUDA built in there are no device buffers
 * and every function says so. */
#ifndef FR_BENCH_DEVICE_H
#define FR_BENCH_DEVICE_H

#include <stddef.h>

/* Collective over MPI_COMM_WORLD's node: make this rank's GPU (its local
 * rank modulo the GPUs it sees) current and write it to *dev; 1 on
 * success, else 0 with why this rank has none in @p why. */
int bd_pick_gpu(int *dev, char *why, size_t len);
/* Collective: bd_pick_gpu, and 1 only when every rank has a GPU and the
 * build has NCCL, else 0 with the reason in @p why. */
int bd_gpus(int *dev, char *why, size_t len);
/* Device memory of @p bytes (NULL on failure), freed by bd_free. */
void *bd_alloc(size_t bytes);
void bd_free(void *p);
/* Copies between host and device memory; 0 on success. */
int bd_copy(void *dst, const void *src, size_t bytes);

#endif

/* The autotuner's device buffers (benchmarks/tune_device.c): whether every
 * rank has a GPU, the buffers, the copies. Without CUDA built in there are
 * no device buffers and every function says so. */
#ifndef FR_TUNE_DEVICE_H
#define FR_TUNE_DEVICE_H

#include <stddef.h>

/* Collective: pick this rank's GPU (its local rank modulo the GPUs it sees,
 * made current and written to *dev) and return 1 when every rank has one
 * and the build has NCCL, else 0 with the reason in @p why. */
int td_gpus(int *dev, char *why, size_t len);
/* Device memory of @p bytes (NULL on failure), freed by td_free. */
void *td_alloc(size_t bytes);
void td_free(void *p);
/* Copies between host and device memory; 0 on success. */
int td_copy(void *dst, const void *src, size_t bytes);

#endif

/* The benchmarks' device buffers; see bench_device.h. */
#include "config.h"
#include <stdio.h>
#include <mpi.h>
#include "bench_device.h"
#ifdef FR_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

int bd_pick_gpu(int *dev, char *why, size_t len)
{
    MPI_Comm node;
    int local = 0;
    *dev = -1;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
#ifdef FR_HAVE_CUDA
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n > 0 && (e = cudaSetDevice(local % n)) == cudaSuccess) {
        *dev = local % n;
        return 1;
    }
    (void)cudaGetLastError();
    snprintf(why, len, "%s", e != cudaSuccess ? cudaGetErrorString(e) : "none");
#else
    snprintf(why, len, "this build has no CUDA");
#endif
    return 0;
}

int bd_gpus(int *dev, char *why, size_t len)
{
    char here[160];
    int mine = bd_pick_gpu(dev, here, sizeof here), all = 0;
#if !defined(FR_HAVE_CUDA) || !defined(FR_HAVE_NCCL)
    snprintf(why, len, "this build has no %s", FR_BUILT_CUDA[0] == 'y' ? "NCCL" : "CUDA");
    mine = 0;
#endif
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
#if defined(FR_HAVE_CUDA) && defined(FR_HAVE_NCCL)
    if (!all) snprintf(why, len, "not every rank sees a GPU (here: %s)", mine ? "a GPU" : here);
#endif
    return all;
}

void *bd_alloc(size_t bytes)
{
#ifdef FR_HAVE_CUDA
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
#else
    (void)bytes;
    return NULL;
#endif
}

void bd_free(void *p)
{
#ifdef FR_HAVE_CUDA
    if (p) cudaFree(p);
#else
    (void)p;
#endif
}

int bd_copy(void *dst, const void *src, size_t bytes)
{
#ifdef FR_HAVE_CUDA
    return bytes && cudaMemcpy(dst, src, bytes, cudaMemcpyDefault) != cudaSuccess;
#else
    (void)dst, (void)src;
    return bytes != 0;
#endif
}

/* The autotuner's device buffers; see tune_device.h. */
#include "config.h"
#include <stdio.h>
#include <mpi.h>
#include "tune_device.h"
#ifdef FR_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

int td_gpus(int *dev, char *why, size_t len)
{
    int mine = 0, all = 0;
    *dev = -1;
#if defined(FR_HAVE_CUDA) && defined(FR_HAVE_NCCL)
    MPI_Comm node;
    int local = 0, n = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n > 0 && cudaSetDevice(local % n) == cudaSuccess) {
        mine = 1;
        *dev = local % n;
    }
    else (void)cudaGetLastError();
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all) snprintf(why, len, "not every rank sees a GPU (here: %s)", e != cudaSuccess ? cudaGetErrorString(e) :
                       n ? "a GPU" : "none");
#else
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    snprintf(why, len, "this build has no %s", FR_BUILT_CUDA[0] == 'y' ? "NCCL" : "CUDA");
#endif
    return all;
}

void *td_alloc(size_t bytes)
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

void td_free(void *p)
{
#ifdef FR_HAVE_CUDA
    if (p) cudaFree(p);
#else
    (void)p;
#endif
}

int td_copy(void *dst, const void *src, size_t bytes)
{
#ifdef FR_HAVE_CUDA
    return bytes && cudaMemcpy(dst, src, bytes, cudaMemcpyDefault) != cudaSuccess;
#else
    (void)dst, (void)src;
    return bytes != 0;
#endif
}

/* Device buffers: memory type, the NCCL communicator, host copies (device.h). */
#define _GNU_SOURCE 1 /* dladdr */
#include "config.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "device.h"
#include "log.h"
#include "nccl_plugin.h"
#ifdef FR_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#ifdef FR_HAVE_NCCL
#include <nccl.h>
#endif

#ifdef FR_HAVE_CUDA

static int ndevices;
static pthread_once_t count_once = PTHREAD_ONCE_INIT;

/* A process that sees no GPU holds no device pointer: host buffers then
 * cost no CUDA call at all. */
static void count_devices(void)
{
    if (cudaGetDeviceCount(&ndevices) != cudaSuccess) {
        ndevices = 0;
        (void)cudaGetLastError();
    }
}

static int attributes(const void *p, struct cudaPointerAttributes *a)
{
    pthread_once(&count_once, count_devices);
    if (!p || ndevices <= 0) return 0;
    if (cudaPointerGetAttributes(a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return a->type == cudaMemoryTypeDevice;
}

fr_status_t fr_mem_of(const void *p, fr_mem_t *mem)
{
    struct cudaPointerAttributes a;
    *mem = attributes(p, &a) ? FR_MEM_CUDA : FR_MEM_HOST;
    return FR_SUCCESS;
}

int fr_device_of(const void *p)
{
    struct cudaPointerAttributes a;
    return attributes(p, &a) ? a.device : -1;
}

static fr_status_t cuda_status(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return FR_SUCCESS;
    (void)cudaGetLastError();
    return FR_ERROR(FR_ERR_CUDA, "%s: %s", what, cudaGetErrorString(e));
}

fr_status_t fr_device_sync(void *stream)
{
    return cuda_status(cudaStreamSynchronize((cudaStream_t)stream), "cudaStreamSynchronize");
}

fr_status_t fr_device_copy(void *dst, const void *src, size_t bytes, void *stream)
{
    if (!bytes || dst == src) return FR_SUCCESS;
    FR_CHECK(cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream),
                         "cudaMemcpyAsync"));
    return fr_device_sync(stream);
}

void *fr_device_stage(struct fr_comm *comm, size_t bytes)
{
    if (bytes <= comm->stage_size && comm->stage) return comm->stage;
    if (comm->stage) cudaFreeHost(comm->stage);
    comm->stage = NULL;
    comm->stage_size = 0;
    if (cudaMallocHost(&comm->stage, bytes ? bytes : 1) != cudaSuccess) {
        (void)cudaGetLastError();
        comm->stage = NULL;
        FR_ERROR(FR_ERR_NO_MEMORY, "cudaMallocHost of %zu bytes for the host-staged path failed", bytes);
        return NULL;
    }
    comm->stage_size = bytes;
    return comm->stage;
}

#else /* no CUDA built in */

/* The CUDA driver's cuPointerGetAttribute, when the process has loaded the
 * driver (looked up again at every fr_comm_create: fr_device_probe). */
typedef int (*cu_attr_fn)(void *data, int attribute, unsigned long long ptr);
static cu_attr_fn cu_attr;

static void find_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h) cu_attr = (cu_attr_fn)(uintptr_t)dlsym(h, "cuPointerGetAttribute");
}
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;

fr_status_t fr_mem_of(const void *p, fr_mem_t *mem)
{
    *mem = FR_MEM_HOST;
    pthread_once(&driver_once, find_driver);
    if (!p || !cu_attr) return FR_SUCCESS;
    enum { ATTR_MEMORY_TYPE = 2, ATTR_IS_MANAGED = 8, MEMORYTYPE_DEVICE = 2 };
    unsigned type = 0;
    int managed = 0;
    if (cu_attr(&type, ATTR_MEMORY_TYPE, (unsigned long long)(uintptr_t)p) != 0 || type != MEMORYTYPE_DEVICE)
        return FR_SUCCESS;
    if (cu_attr(&managed, ATTR_IS_MANAGED, (unsigned long long)(uintptr_t)p) == 0 && managed) return FR_SUCCESS;
    return FR_ERROR(FR_ERR_NOT_SUPPORTED, "%p is device memory, and this libfastreduce was built without CUDA "
                    "(configure --with-cuda=DIR)", p);
}

int fr_device_of(const void *p) { return -1; }

static fr_status_t no_cuda(void)
{
    return FR_ERROR(FR_ERR_NOT_SUPPORTED, "libfastreduce was built without CUDA");
}
fr_status_t fr_device_sync(void *stream) { return no_cuda(); }
fr_status_t fr_device_copy(void *dst, const void *src, size_t bytes, void *stream) { return no_cuda(); }
void *fr_device_stage(struct fr_comm *comm, size_t bytes)
{
    no_cuda();
    return NULL;
}

#endif

#ifdef FR_HAVE_NCCL

/* NCCL_TUNER_PLUGIN, unless the user chose: our plugin beside this library
 * (the build tree's .libs, or the installed libdir), else by name. */
static void plugin_env(void)
{
    if (getenv("NCCL_TUNER_PLUGIN")) return;
    Dl_info info;
    char path[4096];
    if (dladdr((void *)(uintptr_t)fr_device_setup, &info) && info.dli_fname &&
        snprintf(path, sizeof path, "%s", info.dli_fname) < (int)sizeof path) {
        char *slash = strrchr(path, '/');
        if (slash && (size_t)(slash - path) + 40 < sizeof path) {
            strcpy(slash + 1, "libnccl-tuner-fastreduce.so");
            if (access(path, R_OK) == 0) {
                setenv("NCCL_TUNER_PLUGIN", path, 0);
                return;
            }
        }
    }
    setenv("NCCL_TUNER_PLUGIN", "fastreduce", 0);
}

static fr_status_t nccl_status(ncclResult_t r, const char *what)
{
    if (r == ncclSuccess) return FR_SUCCESS;
    return FR_ERROR(FR_ERR_CUDA, "%s: %s (%s)", what, ncclGetErrorString(r), ncclGetLastError(NULL));
}

/* This rank's part: the GPU, the unique id from rank 0, the communicator. */
static fr_status_t make_nccl(struct fr_comm *c, int dev, ncclComm_t *out)
{
    int n = 0;
    fr_status_t st = cuda_status(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
    if (st == FR_SUCCESS && n == 0) st = FR_ERROR(FR_ERR_NOT_SUPPORTED, "no GPU is visible to this rank");
    if (st == FR_SUCCESS && dev < 0) dev = c->gpu >= 0 && c->gpu < n ? c->gpu : -1;
    if (st == FR_SUCCESS && dev >= 0) st = cuda_status(cudaSetDevice(dev), "cudaSetDevice");
    FR_CHECK(fr_agree(c->mpi, st, "NCCL set-up (a GPU on every rank)"));
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (c->rank == 0) st = nccl_status(ncclGetUniqueId(&id), "ncclGetUniqueId");
    if (PMPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, c->mpi) != MPI_SUCCESS)
        return FR_ERROR(FR_ERR_MPI, "MPI_Bcast of the NCCL unique id failed");
    FR_CHECK(fr_agree(c->mpi, st, "ncclGetUniqueId"));
    plugin_env();
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    st = nccl_status(ncclCommInitRankConfig(out, c->size, id, c->rank, &cfg), "ncclCommInitRankConfig");
    fr_status_t all = fr_agree(c->mpi, st, "ncclCommInitRankConfig");
    if (all != FR_SUCCESS && st == FR_SUCCESS) {
        ncclCommAbort(*out);
        *out = NULL;
    }
    return all;
}

fr_status_t fr_device_setup(struct fr_comm *c, int dev)
{
    if (c->nccl_state) return FR_SUCCESS;
    int saved = -1;
    if (cudaGetDevice(&saved) != cudaSuccess) {
        saved = -1;
        (void)cudaGetLastError();
    }
    unsigned long before = fr_nccl_plugin_inits();
    ncclComm_t nc = NULL;
    fr_status_t st = make_nccl(c, dev, &nc);
    if (saved >= 0) cudaSetDevice(saved);
    if (st == FR_ERR_MPI) return st;
    if (st != FR_SUCCESS) {
        c->nccl_state = -1;
        if (c->rank == 0)
            FR_WARN(FR_SUB_NCCL, "no NCCL communicator (%s): device buffers take the host-staged path", fr_last_error());
        return FR_SUCCESS;
    }
    int tuned = fr_nccl_plugin_inits() > before, all = 0;
    if (PMPI_Allreduce(&tuned, &all, 1, MPI_INT, MPI_MIN, c->mpi) != MPI_SUCCESS) {
        ncclCommDestroy(nc);
        return FR_ERROR(FR_ERR_MPI, "MPI_Allreduce failed after the NCCL set-up");
    }
    c->nccl = nc;
    c->nccl_state = 1;
    c->nccl_tuned = all;
    if (c->rank == 0 && !all)
        FR_WARN(FR_SUB_NCCL, "NCCL_TUNER_PLUGIN=%s did not load fastreduce's tuner plugin on every rank: rules "
                "naming nccl_ring or nccl_tree fall to the next rule", getenv("NCCL_TUNER_PLUGIN"));
    FR_INFO(FR_SUB_NCCL, "NCCL communicator of %d ranks ready%s", c->size,
            all ? ", steered by fastreduce's tuner plugin" : "");
    return FR_SUCCESS;
}

#else /* no NCCL */

fr_status_t fr_device_setup(struct fr_comm *c, int dev)
{
    if (!c->nccl_state && c->rank == 0)
        FR_INFO(FR_SUB_NCCL, "built without NCCL: device buffers take the host-staged path");
    c->nccl_state = -1;
    return FR_SUCCESS;
}

#endif

void fr_device_probe(void)
{
#ifndef FR_HAVE_CUDA
    pthread_once(&driver_once, find_driver);
    if (!cu_attr) find_driver();
#endif
}

void fr_device_destroy(struct fr_comm *c)
{
#ifdef FR_HAVE_NCCL
    if (c->nccl) ncclCommDestroy((ncclComm_t)c->nccl);
#endif
#ifdef FR_HAVE_CUDA
    if (c->stage) cudaFreeHost(c->stage);
#endif
    c->nccl = NULL;
    c->stage = NULL;
    c->stage_size = 0;
}

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
#include "settings.h"
#include "wait.h"
#include "agree.h"
#ifdef FR_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#ifdef FR_HAVE_NCCL
#include <nccl.h>
#endif

/* The memory type, in every build, from the CUDA driver's
 * cuPointerGetAttribute (as UCX does; a driver call creates no context).
 * The driver library is opened once, at the first fr_comm_create or call
 * (opening it initialises nothing on the GPU): a node without it cannot
 * hold device memory, and its host buffers then cost nothing more than a
 * test of a pointer; where it exists, a host buffer costs one driver call. */
typedef int (*cu_attr_fn)(void *data, int attribute, unsigned long long ptr);
typedef int (*cu_ctx_fn)(void **ctx);
static cu_attr_fn cu_attr;
static cu_ctx_fn cu_ctx_current;
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;

int fr_cuda_driver;

static void open_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);  /* (kept open for the process) */
    if (h) {
        cu_attr = (cu_attr_fn)(uintptr_t)dlsym(h, "cuPointerGetAttribute");
        cu_ctx_current = (cu_ctx_fn)(uintptr_t)dlsym(h, "cuCtxGetCurrent");
    }
    __atomic_store_n(&fr_cuda_driver, cu_attr != NULL, __ATOMIC_RELEASE);
}

static cu_attr_fn driver(void)
{
    pthread_once(&driver_once, open_driver);
    return cu_attr;
}

enum { CU_ATTR_MEMORY_TYPE = 2, CU_ATTR_IS_MANAGED = 8, CU_ATTR_DEVICE_ORDINAL = 9, CU_MEMORYTYPE_DEVICE = 2 };

/* 1 when @p p is device (not managed) memory. */
static int on_device(const void *p)
{
    cu_attr_fn f = p ? driver() : NULL;
    unsigned type = 0;
    int managed = 0;
    if (!f || f(&type, CU_ATTR_MEMORY_TYPE, (unsigned long long)(uintptr_t)p) != 0 || type != CU_MEMORYTYPE_DEVICE)
        return 0;
    return !(f(&managed, CU_ATTR_IS_MANAGED, (unsigned long long)(uintptr_t)p) == 0 && managed);
}

fr_status_t fr_mem_of(const void *p, fr_mem_t *mem)
{
    *mem = on_device(p) ? FR_MEM_CUDA : FR_MEM_HOST;
#ifndef FR_HAVE_CUDA
    if (*mem == FR_MEM_CUDA) {
        *mem = FR_MEM_HOST;
        return FR_ERROR(FR_ERR_NOT_SUPPORTED, "%p is device memory, and this libfastreduce was built without CUDA "
                        "(configure --with-cuda=DIR)", p);
    }
#endif
    return FR_SUCCESS;
}

int fr_cuda_support(void)
{
#ifdef FR_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

int fr_mem_unserved(const void *p)
{
#ifdef FR_HAVE_CUDA
    (void)p;
    return 0;
#else
    return on_device(p);   /* (which opens the driver, if no communicator has yet) */
#endif
}

int fr_device_of(const void *p)
{
    int dev = -1;
    if (!on_device(p) || driver()(&dev, CU_ATTR_DEVICE_ORDINAL, (unsigned long long)(uintptr_t)p) != 0) return -1;
    return dev;
}

void fr_device_probe(void) { (void)driver(); }

#ifdef FR_HAVE_CUDA

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

fr_status_t fr_device_copy_async(void *dst, const void *src, size_t bytes, void *stream)
{
    if (!bytes || dst == src) return FR_SUCCESS;
    return cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream), "cudaMemcpyAsync");
}

fr_status_t fr_device_copy(void *dst, const void *src, size_t bytes, void *stream)
{
    FR_CHECK(fr_device_copy_async(dst, src, bytes, stream));
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

int fr_device_use(int dev)
{
    int cur = -1;
    if (dev < 0) return -1;
    if (cudaGetDevice(&cur) != cudaSuccess) {
        (void)cudaGetLastError();
        cur = -1;
    }
    if (cur == dev) return -1;
    if (cudaSetDevice(dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return cur;
}

void fr_device_restore(int prev)
{
    if (prev >= 0 && cudaSetDevice(prev) != cudaSuccess) (void)cudaGetLastError();
}

fr_status_t fr_device_event_record(void *stream, void **event)
{
    cudaEvent_t e;
    *event = NULL;
    FR_CHECK(cuda_status(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags"));
    fr_status_t st = cuda_status(cudaEventRecord(e, (cudaStream_t)stream), "cudaEventRecord");
    if (st != FR_SUCCESS) {
        cudaEventDestroy(e);
        return st;
    }
    *event = e;
    return FR_SUCCESS;
}

int fr_device_event_done(void *event, fr_status_t *st)
{
    cudaError_t e = cudaEventQuery((cudaEvent_t)event);
    if (e == cudaErrorNotReady) return 0;
    *st = cuda_status(e, "cudaEventQuery after a request's device work");
    return 1;
}

void fr_device_event_free(void *event)
{
    if (event) cudaEventDestroy((cudaEvent_t)event);
}

#else /* no CUDA built in */

static fr_status_t no_cuda(void)
{
    return FR_ERROR(FR_ERR_NOT_SUPPORTED, "libfastreduce was built without CUDA");
}
fr_status_t fr_device_sync(void *stream) { return no_cuda(); }
fr_status_t fr_device_copy(void *dst, const void *src, size_t bytes, void *stream) { return no_cuda(); }
fr_status_t fr_device_copy_async(void *dst, const void *src, size_t bytes, void *stream) { return no_cuda(); }
void *fr_device_stage(struct fr_comm *comm, size_t bytes)
{
    no_cuda();
    return NULL;
}
int fr_device_use(int dev) { (void)dev; return -1; }
void fr_device_restore(int prev) { (void)prev; }
fr_status_t fr_device_event_record(void *stream, void **event)
{
    *event = NULL;
    return no_cuda();
}
int fr_device_event_done(void *event, fr_status_t *st)
{
    *st = no_cuda();
    return 1;
}
void fr_device_event_free(void *event) { (void)event; }

#endif

#ifdef FR_HAVE_NCCL

/* NCCL_TUNER_PLUGIN: our plugin beside this library (the build tree's
 * .libs, or the installed libdir), else by name; as FASTREDUCE_NCCL_TUNER
 * says (auto: not when the user named a tuner, nor a net plugin, which may
 * carry the platform's own tuner that ours would replace). */
static void plugin_env(struct fr_comm *c)
{
    /* (read now, not at fr_comm_create: a program may set it before its first device call) */
    fr_settings_load(&c->set, NULL, c->rank, fr_settings_when(FR_WHEN_NCCL));
    int mode = c->set.nccl_tuner;
    if (fr_foreign_get(FR_F_NCCL_TUNER_PLUGIN) || mode == FR_NCCL_TUNER_OFF) return;
    if (mode == FR_NCCL_TUNER_AUTO && fr_foreign_get(FR_F_NCCL_NET_PLUGIN)) {
        if (c->rank == 0)
            FR_INFO(FR_SUB_NCCL, "NCCL_NET_PLUGIN is set: NCCL_TUNER_PLUGIN left alone (FASTREDUCE_NCCL_TUNER=1 "
                    "sets it anyway)");
        return;
    }
    Dl_info info;
    char path[4096];
    if (dladdr((void *)(uintptr_t)fr_device_setup, &info) && info.dli_fname &&
        snprintf(path, sizeof path, "%s", info.dli_fname) < (int)sizeof path) {
        char *slash = strrchr(path, '/');
        if (slash && (size_t)(slash - path) + 40 < sizeof path) {
            strcpy(slash + 1, "libnccl-tuner-fastreduce.so");
            if (access(path, R_OK) == 0) {
                fr_foreign_offer(FR_F_NCCL_TUNER_PLUGIN, path);
                return;
            }
        }
    }
    fr_foreign_offer(FR_F_NCCL_TUNER_PLUGIN, "fastreduce");
}

static fr_status_t nccl_status(ncclResult_t r, const char *what)
{
    if (r == ncclSuccess) return FR_SUCCESS;
    return FR_ERROR(FR_ERR_CUDA, "%s: %s (%s)", what, ncclGetErrorString(r), ncclGetLastError(NULL));
}

/* The GPU for the communicator: @p dev (the first buffer's), else for
 * nccl_eager the topology's (the local rank's share of the visible GPUs
 * when CUDA_VISIBLE_DEVICES renumbers them), else the current one. */
static fr_status_t pick_gpu(const struct fr_comm *c, int dev, int *out)
{
    int n = 0;
    FR_CHECK(cuda_status(cudaGetDeviceCount(&n), "cudaGetDeviceCount"));
    if (n == 0) return FR_ERROR(FR_ERR_NOT_SUPPORTED, "no GPU is visible to this rank");
    if (dev < 0 && fr_foreign_get(FR_F_CUDA_VISIBLE_DEVICES)) dev = c->local_rank % n;
    if (dev < 0 && c->gpu >= 0 && c->gpu < n) dev = c->gpu;
    if (dev < 0) FR_CHECK(cuda_status(cudaGetDevice(&dev), "cudaGetDevice"));
    *out = dev;
    return FR_SUCCESS;
}

/* Two ranks of a node on one GPU: NCCL refuses that, and when only some
 * ranks collide the others wait inside NCCL's set-up for good; so the ranks
 * compare their GPUs' PCI bus ids first. */
static fr_status_t gpus_distinct(const struct fr_comm *c, int dev)
{
    char mine[32] = "", *all = calloc((size_t)c->local_size, sizeof mine);
    if (!all) return FR_ERROR(FR_ERR_NO_MEMORY, "no memory for the GPUs' bus ids");
    fr_status_t st = cuda_status(cudaDeviceGetPCIBusId(mine, (int)sizeof mine, dev), "cudaDeviceGetPCIBusId");
    if (PMPI_Allgather(mine, (int)sizeof mine, MPI_CHAR, all, (int)sizeof mine, MPI_CHAR, c->node_comm) != MPI_SUCCESS)
        st = FR_ERROR(FR_ERR_MPI, "MPI_Allgather of the GPUs' bus ids failed");
    for (int i = 0; st == FR_SUCCESS && i < c->local_size; i++)
        if (i != c->local_rank && !strcmp(all + i * sizeof mine, mine))
            st = FR_ERROR(FR_ERR_NOT_SUPPORTED, "local ranks %d and %d share the GPU at %s (NCCL needs one GPU per "
                          "rank)", i < c->local_rank ? i : c->local_rank, i < c->local_rank ? c->local_rank : i, mine);
    free(all);
    return st;
}

/* This rank's part: the GPU, the unique id from rank 0, the communicator;
 * every step agreed, so no rank enters NCCL's set-up alone. */
static fr_status_t make_nccl(struct fr_comm *c, int dev, ncclComm_t *out)
{
    const char *nb = fr_foreign_get(FR_F_NCCL_COMM_BLOCKING);
    fr_status_t st = nb && !strcmp(nb, "0") ?
        FR_ERROR(FR_ERR_NOT_SUPPORTED, "NCCL_COMM_BLOCKING=0: fastreduce uses blocking NCCL communicators") :
        pick_gpu(c, dev, &dev);
    if (st == FR_SUCCESS) st = cuda_status(cudaSetDevice(dev), "cudaSetDevice");
    FR_CHECK(fr_agree(c->mpi, st, "NCCL set-up (a GPU on every rank)"));
    FR_CHECK(fr_agree(c->mpi, gpus_distinct(c, dev), "NCCL set-up (one GPU per rank)"));
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (c->rank == 0) st = nccl_status(ncclGetUniqueId(&id), "ncclGetUniqueId");
    if (PMPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, c->mpi) != MPI_SUCCESS)
        return FR_ERROR(FR_ERR_MPI, "MPI_Bcast of the NCCL unique id failed");
    FR_CHECK(fr_agree(c->mpi, st, "ncclGetUniqueId"));
    plugin_env(c);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 1;
    *out = NULL;
    st = nccl_status(ncclCommInitRankConfig(out, c->size, id, c->rank, &cfg), "ncclCommInitRankConfig");
    /* a failed init leaves a communicator behind; aborting it before agreeing
     * also closes its sockets, so a peer still inside NCCL's set-up fails
     * instead of waiting */
    if (st != FR_SUCCESS && *out) {
        ncclCommAbort(*out);
        *out = NULL;
    }
    fr_status_t all = fr_agree(c->mpi, st, "ncclCommInitRankConfig");
    if (all != FR_SUCCESS && *out) {
        ncclCommAbort(*out);
        *out = NULL;
    }
    return all;
}

/* The CUDA driver's current context, to leave a process that had none
 * without one (restoring "device 0" would make one there). */
static int has_context(void)
{
    void *ctx = NULL;
    (void)driver();
    return cu_ctx_current && cu_ctx_current(&ctx) == 0 && ctx;
}

fr_status_t fr_device_setup(struct fr_comm *c, int dev)
{
    if (c->nccl_state) return FR_SUCCESS;
    int saved = -1;
    if (has_context() && cudaGetDevice(&saved) != cudaSuccess) {
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
                "naming nccl_ring or nccl_tree fall to the next rule", fr_foreign_get(FR_F_NCCL_TUNER_PLUGIN) ?
                fr_foreign_get(FR_F_NCCL_TUNER_PLUGIN) : "(unset)");
    if (c->rank == 0)
        FR_INFO(FR_SUB_NCCL, "NCCL communicator of %d ranks ready%s", c->size,
                all ? ", steered by fastreduce's tuner plugin" : "");
    return FR_SUCCESS;
}

fr_status_t fr_device_wait_nccl(struct fr_comm *c, void *stream)
{
    if (!c->timeout_ns) return fr_device_sync(stream);
    /* Bounded: poll the stream, and NCCL for an error a peer's failure
     * raises; past the timeout abort the NCCL communicator (its kernels
     * stop) and break ours. */
    fr_wait_t w = FR_WAIT_INIT;
    for (;;) {
        cudaError_t e = cudaStreamQuery((cudaStream_t)stream);
        if (e == cudaSuccess) return FR_SUCCESS;
        if (e != cudaErrorNotReady) return cuda_status(e, "cudaStreamQuery");
        ncclResult_t async = ncclSuccess;
        if (c->nccl && ncclCommGetAsyncError((ncclComm_t)c->nccl, &async) == ncclSuccess && async != ncclSuccess &&
            async != ncclInProgress) {
            fr_status_t st = nccl_status(async, "NCCL (asynchronous error)");
            ncclCommAbort((ncclComm_t)c->nccl);
            c->nccl = NULL;
            return st;
        }
        if (fr_wait_poll(c, &w)) {
            if (c->nccl) ncclCommAbort((ncclComm_t)c->nccl);
            c->nccl = NULL;
            return fr_wait_timeout(c, "the NCCL kernel on the stream (NCCL communicator aborted)",
                                   "every rank of the communicator (NCCL does not say which)");
        }
    }
}

#else /* no NCCL */

fr_status_t fr_device_wait_nccl(struct fr_comm *c, void *stream)
{
    (void)c;
    return fr_device_sync(stream);
}

fr_status_t fr_device_setup(struct fr_comm *c, int dev)
{
    if (!c->nccl_state && c->rank == 0)
        FR_INFO(FR_SUB_NCCL, "built without NCCL: device buffers take the host-staged path");
    c->nccl_state = -1;
    return FR_SUCCESS;
}

#endif


void fr_device_destroy(struct fr_comm *c)
{
#ifdef FR_HAVE_NCCL
    /* (a broken communicator's peers may be gone: abort, which does not wait for them) */
    if (c->nccl) {
        if (c->broken) ncclCommAbort((ncclComm_t)c->nccl);
        else ncclCommDestroy((ncclComm_t)c->nccl);
    }
#endif
#ifdef FR_HAVE_CUDA
    if (c->stage) cudaFreeHost(c->stage);
#endif
    c->nccl = NULL;
    c->stage = NULL;
    c->stage_size = 0;
}

/* nccl_plugin_load: a program that uses NCCL only (no MPI, no fastreduce
 * call): one process, a communicator over every visible GPU made with
 * ncclCommInitRank, one allreduce of 4 KiB and one of 64 MiB on each. Run
 * it with NCCL_TUNER_PLUGIN=fastreduce NCCL_DEBUG=INFO
 * NCCL_DEBUG_SUBSYS=INIT,TUNING (tests/gpu/gpu_check.sh does) to see NCCL
 * load libnccl-tuner-fastreduce.so and the plugin's decisions in NCCL's log.
 * Exit 77 without a GPU. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(what, ok) do { if (!(ok)) { fprintf(stderr, "nccl_plugin_load: %s failed\n", what); return 1; } } while (0)

int main(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("SKIP: nccl_plugin_load: no GPU\n");
        return 77;
    }
    if (n > 8) n = 8;
    ncclUniqueId id;
    ncclComm_t comm[8];
    cudaStream_t s[8];
    void *buf[8];
    const size_t sizes[2] = { 4096, 64u << 20 };
    CK("ncclGetUniqueId", ncclGetUniqueId(&id) == ncclSuccess);
    CK("ncclGroupStart", ncclGroupStart() == ncclSuccess);
    for (int i = 0; i < n; i++) {
        CK("cudaSetDevice", cudaSetDevice(i) == cudaSuccess);
        CK("ncclCommInitRank", ncclCommInitRank(&comm[i], n, id, i) == ncclSuccess);
    }
    CK("ncclGroupEnd (init)", ncclGroupEnd() == ncclSuccess);
    for (int i = 0; i < n; i++) {
        CK("cudaSetDevice", cudaSetDevice(i) == cudaSuccess);
        CK("cudaMalloc", cudaMalloc(&buf[i], sizes[1]) == cudaSuccess);
        CK("cudaStreamCreate", cudaStreamCreate(&s[i]) == cudaSuccess);
    }
    for (int k = 0; k < 2; k++) {
        CK("ncclGroupStart", ncclGroupStart() == ncclSuccess);
        for (int i = 0; i < n; i++)
            CK("ncclAllReduce", ncclAllReduce(buf[i], buf[i], sizes[k] / 4, ncclFloat32, ncclSum, comm[i], s[i]) ==
                                    ncclSuccess);
        CK("ncclGroupEnd (allreduce)", ncclGroupEnd() == ncclSuccess);
        for (int i = 0; i < n; i++) CK("cudaStreamSynchronize", cudaStreamSynchronize(s[i]) == cudaSuccess);
        printf("nccl_plugin_load: allreduce of %zu bytes on %d GPU(s) done\n", sizes[k], n);
    }
    for (int i = 0; i < n; i++) {
        ncclCommDestroy(comm[i]);
        cudaFree(buf[i]);
    }
    return 0;
}

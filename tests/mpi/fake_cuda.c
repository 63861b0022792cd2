/* A stand-in for the CUDA driver (built as libcuda.so.1 for
 * test_fakedev): it has no GPU, but its cuPointerGetAttribute calls one
 * address range, which nothing maps, device memory of two GPUs, so that what the
 * library does with a device pointer can be tried on a machine without
 * one. Every other driver entry point NCCL or the runtime would look for is
 * absent or fails, as on a machine whose driver finds no device. */
#include <stdint.h>

#define FAKE_DEV_LO 0x7e0000000000ull
#define FAKE_DEV_HI (FAKE_DEV_LO + (1ull << 30))
#define FAKE_DEV_GPU1 (FAKE_DEV_LO + (1ull << 29))   /* the upper half: a second GPU's memory */

enum { ATTR_MEMORY_TYPE = 2, ATTR_IS_MANAGED = 8, ATTR_DEVICE_ORDINAL = 9 };
enum { SUCCESS = 0, ERROR_INVALID_VALUE = 1, ERROR_NO_DEVICE = 100 };

int cuPointerGetAttribute(void *data, int attribute, unsigned long long ptr)
{
    if (ptr < FAKE_DEV_LO || ptr >= FAKE_DEV_HI) return ERROR_INVALID_VALUE;
    switch (attribute) {
    case ATTR_MEMORY_TYPE: *(unsigned *)data = 2; return SUCCESS;   /* CU_MEMORYTYPE_DEVICE */
    case ATTR_IS_MANAGED: *(int *)data = 0; return SUCCESS;
    case ATTR_DEVICE_ORDINAL: *(int *)data = ptr >= FAKE_DEV_GPU1 ? 1 : 0; return SUCCESS;
    default: return ERROR_INVALID_VALUE;
    }
}

int cuInit(unsigned flags) { (void)flags; return ERROR_NO_DEVICE; }
int cuDriverGetVersion(int *v) { *v = 13000; return SUCCESS; }
int cuDeviceGetCount(int *n) { *n = 0; return ERROR_NO_DEVICE; }
int cuCtxGetCurrent(void **ctx) { *ctx = 0; return SUCCESS; }

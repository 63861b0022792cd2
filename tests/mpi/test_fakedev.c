/* test_fakedev: device pointers on a machine without a GPU, through a
 * stand-in CUDA driver (mpi/fake_cuda.c, FR_TEST_FAKE_CUDA=its path) that
 * calls one unmapped address range device memory. Nothing may read that
 * memory: a build without CUDA refuses the pointer with
 * FR_ERR_NOT_SUPPORTED; a build with CUDA finds no usable GPU and fails the
 * call with the same status on every rank; a device and a host buffer
 * together are refused; host buffers keep working. */
#include "testutil.h"
#include <dlfcn.h>
#include "config.h"

#define FAKE_DEV ((void *)(uintptr_t)0x7e0000001000ull)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    tu_init("test_fakedev");
    int np = tu.size;
    const char *fake = getenv("FR_TEST_FAKE_CUDA");
    tu_begin("load the stand-in driver %s", fake ? fake : "(FR_TEST_FAKE_CUDA unset)");
    void *h = fake ? dlopen(fake, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!TU_CHECK(h, "dlopen: %s", fake ? dlerror() : "FR_TEST_FAKE_CUDA is not set")) {
        int rc = tu_finish();
        MPI_Finalize();
        return rc ? rc : 1;
    }
    fr_comm_t comm;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &comm);
    tu_begin("fr_comm_create");
    if (!tu_all(TU_CHECK(st == FR_SUCCESS, "%s", tu_status(st)))) {
        int rc = tu_finish();
        MPI_Finalize();
        return rc ? rc : 1;
    }
#ifdef FR_HAVE_CUDA
    const int built = 1;
#else
    const int built = 0;
#endif
    for (int k = 0; k < 3; k++) {
        tu_begin("%s of a device pointer (%s)", k == 2 ? "bcast" : "allreduce", k == 1 ? "in place" : "out of place");
        st = k == 0 ? fr_allreduce(FAKE_DEV, (char *)FAKE_DEV + 4096, 16, FR_FLOAT32, FR_SUM, comm) :
             k == 1 ? fr_allreduce(FR_IN_PLACE, FAKE_DEV, 16, FR_FLOAT32, FR_AVG, comm) :
                      fr_bcast(FAKE_DEV, 16, FR_FLOAT32, np - 1, comm);
        if (!built)
            TU_CHECK(st == FR_ERR_NOT_SUPPORTED && strstr(fr_last_error(), "built without CUDA"),
                     "got %s: %s", tu_status(st), fr_last_error());
        else
            TU_CHECK(st != FR_SUCCESS, "a device pointer without a GPU succeeded");
        TU_CHECK(tu_same_everywhere((uint64_t)st), "ranks returned different statuses (%s here)", tu_status(st));
    }
    tu_begin("a host sendbuf with a device recvbuf");
    float host[16] = { 0 };
    st = fr_allreduce(host, FAKE_DEV, 16, FR_FLOAT32, FR_SUM, comm);
    TU_CHECK(st == (built ? FR_ERR_INVALID_ARG : FR_ERR_NOT_SUPPORTED), "got %s: %s", tu_status(st), fr_last_error());
    tu_begin("host buffers still work");
    for (int i = 0; i < 16; i++) host[i] = (float)(tu.rank + i);
    st = fr_allreduce(FR_IN_PLACE, host, 16, FR_FLOAT32, FR_SUM, comm);
    int ok = st == FR_SUCCESS;
    for (int i = 0; ok && i < 16; i++) ok = host[i] == (float)(np * (np - 1) / 2 + np * i);
    TU_CHECK(ok, "host allreduce: %s", tu_status(st));
    tu_begin("fr_comm_destroy");
    st = fr_comm_destroy(comm);
    TU_CHECK(st == FR_SUCCESS, "%s", tu_status(st));
    int rc = tu_finish();
    MPI_Finalize();
    return rc;
}

/* test_fakedev: device pointers on a machine without a GPU, through a
 * stand-in CUDA driver (mpi/fake_cuda.c, FR_TEST_FAKE_CUDA=its path) that
 * calls one unmapped address range device memory. Nothing may read that
 * memory: a build without CUDA refuses the pointer with
 * FR_ERR_NOT_SUPPORTED; a build with CUDA finds no usable GPU and fails the
 * call with the same status on every rank; a device and a host buffer
 * together are refused; host buffers keep working. First, with the range
 * mapped, FR_Allreduce and FR_Bcast on it go to MPI in a build without
 * CUDA. */
#define _GNU_SOURCE   /* MAP_FIXED_NOREPLACE */
#include "testutil.h"
#include <dlfcn.h>
#include <errno.h>
#include <sys/mman.h>
#include "config.h"

#define FAKE_DEV ((void *)(uintptr_t)0x7e0000001000ull)
#define FAKE_DEV_GPU1 ((void *)(uintptr_t)0x7e0020001000ull)   /* fake_cuda.c's second GPU */

/* FR_Allreduce / FR_Bcast of device memory, before any communicator is
 * made in the process (so before fr_comm_create has looked for the
 * driver): a build without CUDA hands them to MPI, which may be
 * CUDA-aware; here the stand-in range is mapped as host memory for the MPI
 * library to read. A build with CUDA serves them and fails on every rank
 * alike (no GPU). */
static void mpi_signature_calls(int built)
{
    const int np = tu.size;
    MPI_Comm d;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN);
    float *dev = mmap(FAKE_DEV, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    tu_begin("map the stand-in device range");
    if (TU_CHECK(dev == FAKE_DEV, "mmap: %s", dev == MAP_FAILED ? strerror(errno) : "another address")) {
        float host[16];
        for (int i = 0; i < 16; i++) dev[i] = (float)(tu.rank * 16 + i);
        tu_begin("first FR_Allreduce of device memory %s", built ? "fails alike everywhere" : "goes to MPI");
        int rc = FR_Allreduce(MPI_IN_PLACE, dev, 16, MPI_FLOAT, MPI_SUM, d), ok;
        ok = built ? rc != MPI_SUCCESS : rc == MPI_SUCCESS;
        for (int i = 0; ok && !built && i < 16; i++) ok = dev[i] == (float)(16 * np * (np - 1) / 2 + np * i);
        TU_CHECK(ok, "rc %d, dev[1] %g", rc, (double)dev[1]);
        TU_CHECK(tu_same_everywhere((uint64_t)rc), "ranks returned different codes (%d here)", rc);
        for (int i = 0; i < 16; i++) dev[i] = (float)(tu.rank + i);
        tu_begin("FR_Allreduce from device memory into host memory %s",
                 built ? "fails alike everywhere" : "goes to MPI");
        rc = FR_Allreduce(dev, host, 16, MPI_FLOAT, MPI_SUM, d);
        ok = built ? rc != MPI_SUCCESS : rc == MPI_SUCCESS;
        for (int i = 0; ok && !built && i < 16; i++) ok = host[i] == (float)(np * (np - 1) / 2 + np * i);
        TU_CHECK(ok, "rc %d, host[1] %g", rc, (double)host[1]);
        TU_CHECK(tu_same_everywhere((uint64_t)rc), "ranks returned different codes (%d here)", rc);
        for (int i = 0; i < 16; i++) dev[i] = tu.rank == np - 1 ? (float)(100 + i) : -1.0f;
        tu_begin("FR_Bcast of device memory %s", built ? "fails alike everywhere" : "goes to MPI");
        rc = FR_Bcast(dev, 16, MPI_FLOAT, np - 1, d);
        ok = built ? rc != MPI_SUCCESS : rc == MPI_SUCCESS;
        for (int i = 0; ok && !built && i < 16; i++) ok = dev[i] == (float)(100 + i);
        TU_CHECK(ok, "rc %d, dev[1] %g", rc, (double)dev[1]);
        TU_CHECK(tu_same_everywhere((uint64_t)rc), "ranks returned different codes (%d here)", rc);
        munmap(dev, 8192);   /* (nothing below may read it) */
    }
    MPI_Comm_free(&d);
}

/* A device request's start (status @p st, handle @p req): refused without
 * CUDA; with it started, and its wait fails on every rank alike. */
static void start_fails_later(fr_status_t st, fr_request_t req, int built)
{
    if (!built) {
        TU_CHECK(st == FR_ERR_NOT_SUPPORTED && req == FR_REQUEST_NULL, "start: %s: %s", tu_status(st),
                 fr_last_error());
    } else {
        TU_CHECK(st == FR_SUCCESS && req != FR_REQUEST_NULL, "start: %s: %s", tu_status(st), fr_last_error());
        st = fr_wait(&req);
        TU_CHECK(st != FR_SUCCESS && req == FR_REQUEST_NULL, "wait: %s", tu_status(st));
    }
    TU_CHECK(tu_same_everywhere((uint64_t)st), "ranks returned different statuses (%s here)", tu_status(st));
}

/* The same through requests: without CUDA the start is refused and no
 * request made; with it the request starts, and its wait fails on every
 * rank alike. A group mixing host and device buffers is refused at its
 * start. */
static void device_requests(fr_comm_t comm, int built)
{
    const int np = tu.size;
    float host[16] = { 0 };
    for (int k = 0; k < 3; k++) {
        tu_begin("request: %s of a device pointer", k == 0 ? "iallreduce" : k == 1 ? "ibcast" : "iallreduce_group");
        fr_request_t req = 99;
        void *bufs[2] = { FAKE_DEV, (char *)FAKE_DEV + 4096 };
        size_t counts[2] = { 16, 3 };
        fr_status_t st = k == 0 ? fr_iallreduce(FR_IN_PLACE, FAKE_DEV, 16, FR_FLOAT32, FR_SUM, comm, &req) :
                         k == 1 ? fr_ibcast(FAKE_DEV, 16, FR_FLOAT32, np - 1, comm, &req) :
                                  fr_iallreduce_group(NULL, bufs, counts, 2, FR_FLOAT32, FR_AVG, comm, &req);
        start_fails_later(st, req, built);
    }
    tu_begin("request: a group of a host and a device buffer is refused at its start");
    void *mixed[2] = { host, FAKE_DEV };
    size_t counts[2] = { 16, 16 };
    fr_request_t req = 99;
    fr_status_t st = fr_iallreduce_group(NULL, mixed, counts, 2, FR_FLOAT32, FR_SUM, comm, &req);
    TU_CHECK(st == (built ? FR_ERR_INVALID_ARG : FR_ERR_NOT_SUPPORTED) && req == FR_REQUEST_NULL, "got %s: %s",
             tu_status(st), fr_last_error());
    tu_begin("request: a group of buffers on two GPUs is refused at its start");
    void *two[2] = { FAKE_DEV, FAKE_DEV_GPU1 };
    req = 99;
    st = fr_iallreduce_group(NULL, two, counts, 2, FR_FLOAT32, FR_SUM, comm, &req);
    TU_CHECK(st == (built ? FR_ERR_INVALID_ARG : FR_ERR_NOT_SUPPORTED) && req == FR_REQUEST_NULL &&
             (!built || strstr(fr_last_error(), "GPU 1")), "got %s: %s", tu_status(st), fr_last_error());
    /* An empty buffer's memory does not count, wherever it points; the
     * group's GPU is that of its first buffer holding data. */
    tu_begin("request: a group of an empty host buffer and device buffers is a device group");
    void *first_empty[3] = { host, FAKE_DEV_GPU1, (char *)FAKE_DEV_GPU1 + 4096 };
    size_t counts3[3] = { 0, 16, 16 };
    req = 99;
    st = fr_iallreduce_group(NULL, first_empty, counts3, 3, FR_FLOAT32, FR_SUM, comm, &req);
    start_fails_later(st, req, built);
}

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
#ifdef FR_HAVE_CUDA
    const int built = 1;
#else
    const int built = 0;
#endif
    mpi_signature_calls(built);
    fr_comm_t comm;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &comm);
    tu_begin("fr_comm_create");
    if (!tu_all(TU_CHECK(st == FR_SUCCESS, "%s", tu_status(st)))) {
        int rc = tu_finish();
        MPI_Finalize();
        return rc ? rc : 1;
    }
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
    device_requests(comm, built);
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

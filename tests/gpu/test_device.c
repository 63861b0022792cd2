/* test_device: fr_allreduce, fr_bcast and their _stream variants on CUDA
 * device buffers, against the reference of tests/mpi/reference.h (every
 * dtype and op, counts that do not divide evenly, count 0, in place, every
 * root), with one algorithm forced (fr_config_t.algo) or the default table.
 * Exits 77 with a message where no GPU is visible. Built only with CUDA.
 *
 * Each allreduce also runs as a request polled with fr_test and as a
 * grouped call, each bcast as a request.
 *
 * Usage: test_device [--algo NAME] [--quick] [--probe]
 *   NAME: nccl, nccl_ring, nccl_tree, staged, or default (the table)
 *   --probe: only say how many GPUs there are (exit 0, or 77 without one)
 * Rank r uses GPU r % (visible GPUs). With fewer GPUs than ranks NCCL
 * refuses the communicator and every call takes the staged path, which is
 * then what is tested.
 *
 * Average of floats through NCCL is compared within a rounding of the
 * type (NCCL multiplies by 1/n before summing); everything else exactly. */
#include <cuda_runtime_api.h>
#include "../mpi/testutil.h"
#include "../mpi/reference.h"

static int np, me, quick, probe, skip_test;
static const char *algo;

#define CU(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "rank %d: %s: %s\n", me, #call, cudaGetErrorString(e_)); MPI_Abort(MPI_COMM_WORLD, 2); } } while (0)

static int via_nccl(void) { return !algo || strncmp(algo, "nccl", 4) == 0; }

static double elem(const unsigned char *b, size_t i, fr_dtype_t dt)
{
    switch (dt) {
    case FR_FLOAT64: { double d; memcpy(&d, b + 8 * i, 8); return d; }
    case FR_FLOAT32: { float f; memcpy(&f, b + 4 * i, 4); return f; }
    case FR_FLOAT16: { uint16_t h; memcpy(&h, b + 2 * i, 2); return tu_from_f16(h); }
    default:         { uint16_t h; memcpy(&h, b + 2 * i, 2); return tu_from_bf16(h); }
    }
}

/* @p loose: NCCL's float average, which multiplies every input by 1/n
 * before summing: its error grows with the inputs' magnitudes, not the
 * result's, so the bound is a few roundings of the type times the sum of
 * |input| over the ranks (salt: the case's, for the inputs). */
static void check(const char *what, const unsigned char *got, const unsigned char *exp, size_t count,
                  fr_dtype_t dt, int loose, fr_op_t op, uint64_t salt)
{
    if (loose) {
        double eps = dt == FR_FLOAT16 ? 0x1p-10 : dt == FR_BFLOAT16 ? 0x1p-7 : dt == FR_FLOAT32 ? 0x1p-23 : 0x1p-52;
        for (size_t i = 0; i < count; i++) {
            double g = elem(got, i, dt), e = elem(exp, i, dt), mag = 0;
            for (int r = 0; r < np; r++) mag += fabs(gen_flt(dt, op, r, i, salt));
            double tol = 4 * eps * fmax(mag, fabs(e)) * (np + 1) / np + 1e-300;
            if (!(fabs(g - e) <= tol)) {
                tu_fail("%s: index %zu: got %.17g expected %.17g (within %g)", what, i, g, e, tol);
                return;
            }
        }
        return;
    }
    size_t nbad, i = tu_first_diff(got, exp, count, tu_dtype_sizes[dt], &nbad);
    if (i == count) return;
    char g[96], e[96];
    tu_format_elem(g, sizeof g, got, i, dt);
    tu_format_elem(e, sizeof e, exp, i, dt);
    tu_fail("%s: first bad index %zu: got %s expected %s (%zu of %zu wrong)", what, i, g, e, nbad, count);
}

/* The request just started (the last one made, in *last_req) polled with
 * fr_test until done: the device work completes on an event, without
 * blocking the caller. */
static fr_request_t last_req;
static fr_status_t request_done(fr_status_t started)
{
    if (started != FR_SUCCESS) return started;
    int done = 0;
    fr_status_t st = FR_SUCCESS;
    while (!done && st == FR_SUCCESS) st = fr_test(&last_req, &done);
    return st;
}

static void allreduce_case(fr_comm_t comm, cudaStream_t s, fr_dtype_t dt, fr_op_t op, size_t count)
{
    size_t nb = count * tu_dtype_sizes[dt], alloc = nb ? nb : 1;
    unsigned char *in = malloc(alloc), *exp = malloc(alloc), *got = malloc(alloc);
    void *ds, *dr;
    CU(cudaMalloc(&ds, alloc));
    CU(cudaMalloc(&dr, alloc));
    uint64_t salt = tu_hash3(dt, op, count);
    make_case(dt, op, count, salt, np, me, in, exp);
    int loose = op == FR_AVG && tu_is_float(dt) && via_nccl();
    /* out of place, in place, on a stream, a request polled with fr_test, a grouped call */
    static const char *const modes[] = { "out of place", "in place", "stream", "request", "group" };
    for (int mode = 0; mode < 5; mode++) {
        tu_begin("allreduce algo=%s dtype=%s op=%s count=%zu %s", algo ? algo : "default", tu_dtype_names[dt],
                 tu_op_names[op], count, modes[mode]);
        CU(cudaMemcpy(mode == 1 ? dr : ds, in, nb, cudaMemcpyHostToDevice));
        CU(cudaMemset(dr, mode == 1 ? 0 : 0xA5, mode == 1 ? 0 : nb));
        /* (the stream is non-blocking: the set-up on the legacy stream must be done first) */
        if (mode == 2) CU(cudaDeviceSynchronize());
        const void *sb[1] = { ds };
        void *rb[1] = { dr };
        fr_status_t st = mode == 0 ? fr_allreduce(ds, dr, count, dt, op, comm) :
                         mode == 1 ? fr_allreduce(FR_IN_PLACE, dr, count, dt, op, comm) :
                         mode == 2 ? fr_allreduce_stream(ds, dr, count, dt, op, comm, s) :
                         mode == 3 ? request_done(fr_iallreduce(ds, dr, count, dt, op, comm, &last_req)) :
                                     fr_allreduce_group(sb, rb, &count, 1, dt, op, comm);
        if (mode == 2) CU(cudaStreamSynchronize(s));
        if (!TU_CHECK(st == FR_SUCCESS, "returned %s: %s", tu_status(st), fr_last_error())) continue;
        CU(cudaMemcpy(got, dr, nb, cudaMemcpyDeviceToHost));
        check("result", got, exp, count, dt, loose, op, salt);
        if (mode != 1) {
            CU(cudaMemcpy(got, ds, nb, cudaMemcpyDeviceToHost));
            check("sendbuf modified", got, in, count, dt, 0, op, salt);
        }
    }
    CU(cudaFree(ds));
    CU(cudaFree(dr));
    free(in); free(exp); free(got);
}

static void bcast_case(fr_comm_t comm, cudaStream_t s, fr_dtype_t dt, size_t count)
{
    size_t nb = count * tu_dtype_sizes[dt], alloc = nb ? nb : 1;
    unsigned char *want = malloc(alloc), *got = malloc(alloc);
    void *d;
    CU(cudaMalloc(&d, alloc));
    for (int root = 0; root < np; root++)
        for (int mode = 0; mode < 3; mode++) {
            tu_begin("bcast algo=%s dtype=%s count=%zu root=%d%s", algo ? algo : "default", tu_dtype_names[dt],
                     count, root, mode == 1 ? " stream" : mode == 2 ? " request" : "");
            for (size_t i = 0; i < nb; i++) want[i] = (unsigned char)tu_hash3(root, i, count);
            if (me == root) CU(cudaMemcpy(d, want, nb, cudaMemcpyHostToDevice));
            else CU(cudaMemset(d, 0x5A, nb));
            if (mode == 1) CU(cudaDeviceSynchronize());
            fr_status_t st = mode == 1 ? fr_bcast_stream(d, count, dt, root, comm, s) :
                             mode == 2 ? request_done(fr_ibcast(d, count, dt, root, comm, &last_req)) :
                                         fr_bcast(d, count, dt, root, comm);
            if (mode == 1) CU(cudaStreamSynchronize(s));
            if (!TU_CHECK(st == FR_SUCCESS, "returned %s: %s", tu_status(st), fr_last_error())) continue;
            CU(cudaMemcpy(got, d, nb, cudaMemcpyDeviceToHost));
            check("result", got, want, nb, FR_UINT8, 0, FR_SUM, 0);
        }
    CU(cudaFree(d));
    free(want); free(got);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    tu_init("test_device");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--algo") && i + 1 < argc) algo = argv[++i];
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--probe")) probe = 1;
        else if (!strcmp(argv[i], "--skip")) skip_test = 1;
    }
    if (algo && !strcmp(algo, "default")) algo = NULL;
    int ndev = 0, fewest;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess) ndev = 0;
    MPI_Allreduce(&ndev, &fewest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (fewest == 0) {
        if (me == 0)
            printf("SKIP: test_device: no GPU visible to every rank (cudaGetDeviceCount: %s)\n",
                   e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
        MPI_Finalize();
        return 77;
    }
    MPI_Comm node;
    int local_size = 1;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &local_size);
    MPI_Comm_free(&node);
    if (me == 0) printf("test_device: %d GPU(s) visible, %d rank(s) on the node\n", ndev, local_size);
    if (probe) {
        MPI_Finalize();
        return 0;
    }
    CU(cudaSetDevice(me % ndev));
    fr_config_t cfg = FR_CONFIG_INIT;
    cfg.algo = algo;
    fr_comm_t comm;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, &cfg, &comm);
    if (st != FR_SUCCESS) {
        fprintf(stderr, "rank %d: fr_comm_create: %s: %s\n", me, tu_status(st), fr_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const size_t counts[] = { 0, 1, 7, 1000, 65537, 1000003 };
    int ncounts = quick ? 5 : 6;
    double t0 = MPI_Wtime();
    for (int dt = 0; dt < FR_DTYPE_COUNT; dt++)
        for (int op = 0; op < FR_OP_COUNT; op++)
            for (int c = 0; c < ncounts; c++) allreduce_case(comm, s, (fr_dtype_t)dt, (fr_op_t)op, counts[c]);
    for (int c = 0; c < ncounts; c++) bcast_case(comm, s, FR_UINT8, counts[c]);
    bcast_case(comm, s, FR_BFLOAT16, 4097);
    /* a host buffer on the same communicator still takes the host path */
    tu_begin("host buffer after device calls");
    int one = 1, sum = 0;
    st = fr_allreduce(&one, &sum, 1, FR_INT32, FR_SUM, comm);
    TU_CHECK(st == FR_SUCCESS && sum == np, "host allreduce: %s, %d (want %d)", tu_status(st), sum, np);
    /* device send buffer, host receive buffer: refused, nothing moves */
    tu_begin("mixed device and host buffers refused");
    void *d;
    CU(cudaMalloc(&d, 64));
    int host[16] = { 0 };
    st = fr_allreduce(d, host, 16, FR_INT32, FR_SUM, comm);
    TU_CHECK(st == FR_ERR_INVALID_ARG && strstr(fr_last_error(), "device"), "got %s: %s", tu_status(st),
             fr_last_error());
    CU(cudaFree(d));
    if (me == 0) printf("test_device np=%d algo=%s: %.1f s\n", np, algo ? algo : "default", MPI_Wtime() - t0);
    fr_comm_destroy(comm);
    if (skip_test && np >= 2) {
        /* The last rank skips a device allreduce under FASTREDUCE_TIMEOUT=2:
         * the others come back within the timeout + 5 s (NCCL aborted, or
         * the staged path's host wait), the communicator refuses later
         * calls, and destroy does not hang on anyone. */
        setenv("FASTREDUCE_TIMEOUT", "2", 1);
        fr_comm_t tc = NULL;
        st = fr_comm_create(MPI_COMM_WORLD, &cfg, &tc);
        unsetenv("FASTREDUCE_TIMEOUT");
        tu_begin("device allreduce skipped by rank %d: fr_comm_create", np - 1);
        if (TU_CHECK(st == FR_SUCCESS, "%s: %s", tu_status(st), fr_last_error())) {
            const size_t n = 1 << 20;
            float *dv;
            CU(cudaMalloc((void **)&dv, n * sizeof(float)));
            CU(cudaMemset(dv, 0, n * sizeof(float)));
            st = fr_allreduce(FR_IN_PLACE, dv, n, FR_FLOAT32, FR_SUM, tc);
            tu_begin("device allreduce skipped by rank %d: a call before the skip", np - 1);
            TU_CHECK(st == FR_SUCCESS, "%s: %s", tu_status(st), fr_last_error());
            tu_begin("device allreduce skipped by rank %d: the others time out", np - 1);
            if (me != np - 1) {
                double t1 = MPI_Wtime();
                st = fr_allreduce(FR_IN_PLACE, dv, n, FR_FLOAT32, FR_SUM, tc);
                double t = MPI_Wtime() - t1;
                TU_CHECK(st == FR_ERR_TIMED_OUT || st == FR_ERR_CUDA, "returned %s: %s", tu_status(st),
                         fr_last_error());
                TU_CHECK(t <= 7.0, "returned after %.1f s", t);
                st = fr_allreduce(FR_IN_PLACE, dv, n, FR_FLOAT32, FR_SUM, tc);
                TU_CHECK(st == FR_ERR_BAD_COMM, "a later call returned %s", tu_status(st));
            }
            tu_begin("device allreduce skipped by rank %d: fr_comm_destroy", np - 1);
            double t2 = MPI_Wtime();
            st = fr_comm_destroy(tc);
            TU_CHECK((st == FR_SUCCESS || st == FR_ERR_TIMED_OUT) && MPI_Wtime() - t2 <= 7.0,
                     "returned %s after %.1f s", tu_status(st), MPI_Wtime() - t2);
            CU(cudaFree(dv));
        }
    }
    CU(cudaStreamDestroy(s));
    int rc = tu_finish();
    MPI_Finalize();
    return rc;
}

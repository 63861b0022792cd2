/* skip_program: an ordinary MPI program (no fastreduce in it) in which the
 * last rank skips one MPI_Allreduce. Run under libfastreduce-mpi.so with
 * FASTREDUCE_TIMEOUT set, the other ranks' MPI_Allreduce must come back
 * within the timeout + 2 s with an error class, after the communicator's
 * error handler was called with it (MPI_ERRORS_RETURN-like handler here),
 * and a later MPI_Allreduce on that communicator must fail the same way.
 * Every rank prints one line "skip_program rank R: OK ..." or "... FAILED
 * ..." (tests/mpi/run_mpi.sh counts them).
 *
 * With --mismatch (run with FASTREDUCE_CHECK=1), the last rank passes one
 * element fewer instead: every rank's MPI_Allreduce must fail with
 * MPI_ERR_ARG through the error handler, its buffer unchanged, and the
 * next, matching call succeed.
 *
 * Usage: skip_program TIMEOUT_SECONDS | --mismatch
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int handler_calls, handler_class = -1;

static void on_error(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    handler_calls++;
    MPI_Error_class(*code, &handler_class);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int np, me;
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    int mismatch = argc > 1 && !strcmp(argv[1], "--mismatch");
    double tmo = argc > 1 && !mismatch ? atof(argv[1]) : 1.0;
    MPI_Errhandler eh;
    MPI_Comm_create_errhandler(on_error, &eh);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_errhandler(dup, eh);
    enum { N = 65536 + 3 };
    float *v = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) v[i] = 1.0f;
    char why[256] = "";
    int rc = MPI_Allreduce(MPI_IN_PLACE, v, N, MPI_FLOAT, MPI_SUM, dup);
    if (rc != MPI_SUCCESS || v[7] != (float)np) snprintf(why, sizeof why, "the first allreduce: rc %d v %g", rc, v[7]);
    if (mismatch && !*why) {
        for (int i = 0; i < N; i++) v[i] = 2.0f;
        rc = MPI_Allreduce(MPI_IN_PLACE, v, me == np - 1 ? N - 1 : N, MPI_FLOAT, MPI_SUM, dup);
        int cls = -1;
        MPI_Error_class(rc, &cls);
        if (np > 1 && (cls != MPI_ERR_ARG || handler_calls != 1 || handler_class != MPI_ERR_ARG || v[0] != 2.0f))
            snprintf(why, sizeof why, "the mismatched allreduce: class %d (MPI_ERR_ARG is %d), handler calls %d, "
                     "v[0] %g", cls, MPI_ERR_ARG, handler_calls, v[0]);
        rc = MPI_Allreduce(MPI_IN_PLACE, v, N, MPI_FLOAT, MPI_SUM, dup);
        if (!*why && (rc != MPI_SUCCESS || v[5] != 2.0f * np))
            snprintf(why, sizeof why, "the matching allreduce after it: rc %d, v %g", rc, v[5]);
        if (!*why)
            printf("skip_program rank %d: OK: the mismatched MPI_Allreduce failed with MPI_ERR_ARG through the "
                   "error handler, buffer unchanged, the next call worked\n", me);
    } else if (me != np - 1 && !*why) {
        double t0 = MPI_Wtime();
        rc = MPI_Allreduce(MPI_IN_PLACE, v, N, MPI_FLOAT, MPI_SUM, dup);
        double t = MPI_Wtime() - t0;
        int cls = -1;
        MPI_Error_class(rc, &cls);
        if (rc == MPI_SUCCESS) snprintf(why, sizeof why, "the skipped allreduce succeeded");
        else if (t > tmo + 2.0) snprintf(why, sizeof why, "came back after %.2f s", t);
        else if (handler_calls != 1 || handler_class != cls)
            snprintf(why, sizeof why, "error handler called %d times (class %d, returned class %d)", handler_calls,
                     handler_class, cls);
        if (!*why) {
            float w[4] = {1, 2, 3, 4};
            rc = MPI_Allreduce(MPI_IN_PLACE, w, 4, MPI_FLOAT, MPI_SUM, dup);
            if (rc == MPI_SUCCESS || handler_calls != 2 || w[0] != 1)
                snprintf(why, sizeof why, "a later allreduce: rc %d, handler calls %d, w[0] %g", rc, handler_calls, w[0]);
        }
        if (!*why)
            printf("skip_program rank %d: OK: the skipped MPI_Allreduce failed with class %d after %.2f s, the error "
                   "handler saw it, a later call failed too\n", me, cls, t);
    } else if (!*why) {
        printf("skip_program rank %d: OK: skipped\n", me);
    }
    if (*why) printf("skip_program rank %d: FAILED: %s\n", me, why);
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_free(&dup);
    MPI_Errhandler_free(&eh);
    free(v);
    MPI_Finalize();
    return 0;
}

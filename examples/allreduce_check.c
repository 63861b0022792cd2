/* A user program written against <fastreduce.h> alone: allreduce and bcast
 * on MPI_COMM_WORLD, checked against values every rank computes itself.
 * Build: mpicc allreduce_check.c $(pkg-config --cflags --libs fastreduce)
 * Run:   FASTREDUCE_ALGO=ring mpirun -np 4 ./a.out
 * Prints "allreduce_check np=N algo=A: P passed, F failed". */
#include <stdio.h>
#include <stdlib.h>
#include <fastreduce.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, failed = 0, passed = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    fr_comm_t comm;
    fr_status_t st = fr_comm_create(MPI_COMM_WORLD, NULL, &comm);
    if (st != FR_SUCCESS) {
        fprintf(stderr, "fr_comm_create: %s: %s\n", fr_strerror(st), fr_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const size_t counts[] = {0, 1, 7, 1000, 65537, 1000003};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        size_t n = counts[c];
        double *x = malloc((n + 1) * sizeof *x);
        long long *v = malloc((n + 1) * sizeof *v);
        for (size_t i = 0; i < n; i++) {
            x[i] = (double)((rank + 1) * (long long)(i % 97));
            v[i] = rank == size - 1 ? (long long)i * 3 + 1 : -1;
        }
        int bad = fr_allreduce(FR_IN_PLACE, x, n, FR_FLOAT64, FR_SUM, comm) != FR_SUCCESS;
        for (size_t i = 0; i < n && !bad; i++)
            bad = x[i] != (double)(i % 97) * size * (size + 1) / 2;
        failed += bad; passed += !bad;
        bad = fr_bcast(v, n, FR_INT64, size - 1, comm) != FR_SUCCESS;
        for (size_t i = 0; i < n && !bad; i++) bad = v[i] != (long long)i * 3 + 1;
        failed += bad; passed += !bad;
        free(x);
        free(v);
    }
    const char *algo = fr_allreduce_algorithm(comm, 1000, FR_FLOAT64, FR_SUM);
    int total[2] = {passed, failed}, sum[2];
    MPI_Reduce(total, sum, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("allreduce_check np=%d algo=%s: %d passed, %d failed\n", size, algo, sum[0], sum[1]);
    fr_comm_destroy(comm);
    MPI_Finalize();
    return failed ? 1 : 0;
}

/* The Open MPI peer: MPI_Allreduce of float32 sums, same sizes, time per
 * operation on rank 0. Built by bench/allreduce_bench.sh with mpicc. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const char *label = argc > 1 ? argv[1] : "mpi";
    double budget = argc > 2 ? atof(argv[2]) : 0.6;
    const size_t sizes[5] = { 4u << 10, 64u << 10, 1u << 20, 16u << 20, 64u << 20 };
    for (int si = 0; si < 5; si++) {
        size_t count = sizes[si] / 4;
        float *a = calloc(count, 4), *b = calloc(count, 4);
        int iters = (int) (budget * 1e9 / ((double) sizes[si] * n + 1e5));
        iters = iters < 3 ? 3 : iters > 3000 ? 3000 : iters;
        for (int i = 0; i < 2; i++)
            MPI_Allreduce(a, b, (int) count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++)
            MPI_Allreduce(a, b, (int) count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double s = (MPI_Wtime() - t0) / iters, worst;
        MPI_Reduce(&s, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("%s %d 0 %zu %.9f\n", label, n, sizes[si], worst);
            fflush(stdout);
        }
        free(a);
        free(b);
    }
    MPI_Finalize();
    return 0;
}

/* OpenMPI's MPI_Allreduce as a baseline for tools/compare_peers.sh: fp32 sum
 * of each size (bytes) in argv[1] (comma-separated), argv[2] iterations
 * after 2 warm-up ones, in place. Every rank checks its result (rank r
 * contributes r + 1 everywhere, so each element must be W(W+1)/2). Rank 0
 * prints, per size, the slowest rank's mean time and nccl-tests' bus
 * bandwidth:
 *   mpi WORLD BYTES TIME_US ALGBW_GBS BUSBW_GBS
 * Built and run by compare_peers.sh with mpicc / mpirun when OpenMPI is
 * installed (openmpi-bin, libopenmpi-dev). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (argc < 3) {
        if (rank == 0) fprintf(stderr, "usage: mpi_allreduce BYTES[,BYTES...] ITERS\n");
        MPI_Finalize();
        return 2;
    }
    const int iters = atoi(argv[2]);
    char *sizes = strdup(argv[1]);
    int bad = 0;
    for (char *tok = strtok(sizes, ","); tok; tok = strtok(NULL, ",")) {
        const long count = atol(tok) / 4;
        if (count <= 0 || iters <= 0) {
            bad = 1;
            break;
        }
        float *buf = malloc((size_t)count * sizeof *buf);
        if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
        double t = 0;
        for (int i = -2; i < iters; ++i) {
            for (long k = 0; k < count; ++k) buf[k] = (float)(rank + 1);
            MPI_Barrier(MPI_COMM_WORLD);
            const double t0 = MPI_Wtime();
            MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            if (i >= 0) t += MPI_Wtime() - t0;
            const float want = (float)(world * (world + 1) / 2);
            for (long k = 0; k < count; ++k)
                if (buf[k] != want) {
                    fprintf(stderr, "mpi_allreduce: rank %d: element %ld is %g, not %g\n", rank, k, buf[k], want);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
        }
        double slowest = 0;
        MPI_Reduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            const double s = slowest / iters, bytes = (double)count * 4;
            const double alg = bytes / s / 1e9;
            printf("mpi %d %.0f %.1f %.4f %.4f\n", world, bytes, s * 1e6, alg, alg * 2.0 * (world - 1) / world);
            fflush(stdout);
        }
        free(buf);
    }
    free(sizes);
    MPI_Finalize();
    if (bad && rank == 0) fprintf(stderr, "mpi_allreduce: sizes and iterations must be positive\n");
    return bad ? 2 : 0;
}

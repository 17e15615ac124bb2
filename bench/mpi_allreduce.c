/* bench/mpi_allreduce — the Open MPI baseline of bench/allreduce:
 * MPI_Allreduce (MPI_SUM, float32, in place) timed the way ferry's ranks
 * are timed (allreduce_plan.h), the same lines printed by rank 0.
 *
 *   mpirun -np N [--mca ...] build/bench/mpi_allreduce --plan BYTES:REPS:ITERS,...
 *
 * bench/allreduce runs it over TCP loopback (btl tcp,self on lo). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce_plan.h"
#include "stats.h"

static void check(const float *buf, size_t n, int world, int times, int rank)
{
    size_t i = ar_check(buf, n, world, times);
    if (i < n) {
        fprintf(stderr, "mpi_allreduce: rank %d: element %zu of %zu is %g, expected %g\n",
                rank, i, n, (double)buf[i], ar_expected(world, i, times));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static void fill(float *buf, size_t n, int rank)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = ar_fill_value(rank, i);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    bench_set_name("allreduce");
    ar_plan plan;
    if (argc != 3 || strcmp(argv[1], "--plan") != 0 ||
        ar_plan_parse(argv[2], &plan) != 0) {
        if (rank == 0)
            fprintf(stderr,
                    "usage: mpirun -np N mpi_allreduce --plan BYTES:REPS:ITERS,...\n");
        MPI_Finalize();
        return 2;
    }
    float *buf = malloc(ar_plan_max_bytes(&plan));
    if (!buf)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (int s = 0; s < plan.n; s++) {
        const ar_step *st = &plan.step[s];
        int n = (int)(st->bytes / sizeof(float));
        fill(buf, (size_t)n, rank);
        for (int w = 0; w < AR_WARMUP; w++)
            MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        check(buf, (size_t)n, world, AR_WARMUP, rank);
        double secs[AR_MAX_REPS];
        for (int r = 0; r < st->reps; r++) {
            fill(buf, (size_t)n, rank);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (int i = 0; i < st->iters; i++)
                MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            double t = (MPI_Wtime() - t0) / st->iters, slowest;
            /* A repetition lasts as long as its slowest rank. */
            MPI_Reduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            secs[r] = slowest;
            check(buf, (size_t)n, world, st->iters, rank);
        }
        if (rank == 0)
            ar_report("openmpi", world, st, secs, "\"transport\":\"tcp\"");
    }
    free(buf);
    MPI_Finalize();
    return 0;
}

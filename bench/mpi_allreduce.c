/* bench/mpi_allreduce — the Open MPI baseline of bench/allreduce:
 * MPI_Allreduce (MPI_SUM, float32, in place) timed the way ferry's ranks
 * are timed (allreduce_plan.h), the same lines printed by rank 0.
 *
 *   mpirun -np N [--mca ...] build/bench/mpi_allreduce --plan BYTES:REPS:ITERS,...
 *          [--name BENCH] [--extra JSON-MEMBERS]
 *
 * bench/allreduce runs it over TCP loopback (btl tcp,self on lo). */
#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce_plan.h"
#include "stats.h"

static void run_allreduce(void *buf, size_t n, const char *what)
{
    (void)what;
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

/* A repetition lasts as long as its slowest rank. */
static double run_max(void *arg, double v)
{
    (void)arg;
    double m;
    MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

static void run_abort(void *arg, const char *why)
{
    (void)arg;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    fprintf(stderr, "mpi_allreduce: rank %d: %s\n", rank, why);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    bench_set_name("allreduce");
    ar_plan plan;
    /* --name and --extra label the lines for another benchmark (bench/multihost:
     * its name, and which links the run crossed). */
    char extra[512] = "\"transport\":\"tcp\"";
    bool ok =
        argc >= 3 && strcmp(argv[1], "--plan") == 0 && ar_plan_parse(argv[2], &plan) == 0;
    for (int i = 3; ok && i < argc; i += 2) {
        if (i + 1 < argc && strcmp(argv[i], "--name") == 0)
            bench_set_name(argv[i + 1]);
        else if (i + 1 < argc && strcmp(argv[i], "--extra") == 0)
            snprintf(extra, sizeof extra, "\"transport\":\"tcp\",%.400s", argv[i + 1]);
        else
            ok = false;
    }
    if (!ok) {
        if (rank == 0)
            fprintf(stderr,
                    "usage: mpirun -np N mpi_allreduce --plan BYTES:REPS:ITERS,... "
                    "[--name BENCH] [--extra JSON-MEMBERS]\n");
        MPI_Finalize();
        return 2;
    }
    float *buf = malloc(ar_plan_max_bytes(&plan));
    if (!buf)
        MPI_Abort(MPI_COMM_WORLD, 1);
    ar_runner run = {.impl = "openmpi",
                     .extra = extra,
                     .rank = rank,
                     .world = world,
                     .buf = buf,
                     .arg = buf,
                     .allreduce = run_allreduce,
                     .max = run_max,
                     .abort = run_abort};
    ar_run_plan(&plan, &run);
    free(buf);
    MPI_Finalize();
    return 0;
}

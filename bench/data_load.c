/* bench/data — a user's data against what trains on it (JSON lines on
 * stdout, text on stderr):
 *
 *   loader  the loader alone gathering shuffled batches of 128 from an
 *           .npy read in place (memory-mapped, float32, 784 features a
 *           sample: the mlp's input; each row normalised as it is
 *           gathered, the default), samples/s, against the eight sgemm products of the
 *           MLP's step at batch 128 on one BLAS thread (bench/train_blas.c:
 *           the step's compute alone, so the ratio is a lower bound);
 *           target: the loader at least 10x the step
 *   csv     rt_csv_parse on a CSV of numbers, MB/s, against numpy.loadtxt
 *           on the same file in the same run (Debian's /usr/bin/python3),
 *           each the best of 3, by wall clock and by CPU time; target: at
 *           least 5x, in CPU time
 *   train   the mlp trained from an .npz against the same run from IDX
 *           (data_train.c); target: within 3%
 *
 * Run: build/bench/data [--quick] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libgen.h>
#include <limits.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include "runtime/data/data_int.h"
#include "data_train.h"
#include "stats.h"
#include "train_blas.h"

#define BATCH    128
#define FEATURES 784

static void usage(FILE *f)
{
    fprintf(f, "usage: bench/data [--quick]\n"
               "The loader against the MLP's step, and CSV parsing against "
               "numpy.loadtxt.\n");
}

static void write_file(const char *path, const void *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

/* An .npy of n x FEATURES float32 and one of n int64 labels. */
static void write_npy(const char *x, const char *y, size_t n)
{
    size_t bytes = n * FEATURES * sizeof(float);
    float *v = malloc(bytes);
    int64_t *l = malloc(n * sizeof *l);
    if (!v || !l)
        exit(1);
    for (size_t i = 0; i < n * FEATURES; i++)
        v[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
    for (size_t i = 0; i < n; i++)
        l[i] = (int64_t)(i % 10);
    const char *names[] = {x, y};
    const void *data[] = {v, l};
    size_t lens[] = {bytes, n * sizeof *l};
    uint64_t dims[] = {n, FEATURES};
    for (int k = 0; k < 2; k++) {
        size_t len;
        uint8_t *b = bench_npy(k ? "<i8" : "<f4", dims, k ? 1 : 2, data[k], lens[k], &len);
        write_file(names[k], b, len);
        free(b);
    }
    free(v);
    free(l);
}

/* Samples a second the loader hands out, shuffled, over `epochs`. */
static double loader_rate(const rt_dataset *ds, int epochs)
{
    /* As a trainer reads a mapped file: its shard (all of it, alone), in a
     * block shuffle. */
    rt_loader_opts o = {.batch = BATCH, .world = 1, .seed = 1, .shuffle = true, .shard = true};
    rt_loader *l;
    if (rt_loader_create(ds, &o, &l) != 0)
        exit(1);
    size_t samples = 0;
    volatile float sink = 0;
    uint64_t t0 = bench_now_ns();
    for (int e = 0; e < epochs; e++) {
        rt_loader_begin(l, e);
        const rt_batch_host *b;
        while ((b = rt_loader_next(l))) {
            samples += (size_t)b->n;
            sink += b->x[0];
        }
    }
    double s = (double)(bench_now_ns() - t0) / 1e9;
    rt_loader_destroy(l);
    return (double)samples / s;
}

static void bench_loader(const char *dir, bool quick)
{
    size_t n = quick ? 8192 : 32768;
    char x[4096], y[4096];
    snprintf(x, sizeof x, "%s/x.npy", dir);
    snprintf(y, sizeof y, "%s/y.npy", dir);
    write_npy(x, y, n);
    rt_data_source src = {.path = x, .labels = y, .test_path = x, .test_labels = y};
    rt_dataset tr, te;
    char err[512];
    if (rt_data_source_load(&src, NULL, &tr, &te, err, sizeof err) != 0) {
        bench_log("%s", err);
        exit(1);
    }
    if (tr.x || !tr.mapped) {
        bench_log("%s: not read in place", x);
        exit(1);
    }
    double loader = loader_rate(&tr, quick ? 2 : 5);
    openblas_set_num_threads(1);
    bench_blas *b = bench_blas_create(BATCH);
    int steps = quick ? 50 : 200;
    bench_blas_run(b, 5); /* warm */
    double step = (double)steps * BATCH / bench_blas_run(b, steps);
    bench_blas_destroy(b);
    bench_emit("loader_samples_per_s", loader, "samples/s", NULL,
               "\"batch\":%d,\"features\":%d,\"samples\":%zu", BATCH, FEATURES, n);
    bench_emit("mlp_step_samples_per_s", step, "samples/s", NULL,
               "\"batch\":%d,\"threads\":1,\"note\":\"the step's eight sgemm products\"",
               BATCH);
    bench_emit("loader_over_mlp_step", loader / step, "ratio", NULL, "\"target_min\":10");
    rt_dataset_free(&tr);
    rt_dataset_free(&te);
}

#define CSV_COLS 32

static size_t write_csv(const char *path, size_t rows)
{
    FILE *f = fopen(path, "w");
    if (!f)
        exit(1);
    for (int j = 0; j < CSV_COLS; j++)
        fprintf(f, "%s%s", j ? "," : "", j == CSV_COLS - 1 ? "label" : "f");
    fputc('\n', f);
    uint64_t s = 88172645463325252u;
    for (size_t i = 0; i < rows; i++)
        for (int j = 0; j < CSV_COLS; j++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            if (j == CSV_COLS - 1)
                fprintf(f, "%d\n", (int)(s % 10));
            else
                fprintf(f, "%.5f,", (double)(s >> 11) / 9007199254740992.0 * 200 - 100);
        }
    long len = ftell(f);
    fclose(f);
    return (size_t)len;
}

#define CSV_REPS 3

/* This thread's CPU time, user and system, in seconds. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The best of CSV_REPS runs of numpy.loadtxt on `path`, timed inside
 * Python (its start and import left out), in wall and CPU seconds; false
 * when it cannot run. */
static bool numpy_seconds(const char *path, double *wall, double *cpu)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'import sys, time, numpy\n"
             "w = c = 1e9\n"
             "for r in range(%d):\n"
             "    t, p = time.perf_counter(), time.thread_time()\n"
             "    numpy.loadtxt(sys.argv[1], delimiter=\",\", skiprows=1)\n"
             "    w, c = min(w, time.perf_counter() - t), min(c, time.thread_time() - p)\n"
             "print(w, c)' '%s' 2>/dev/null",
             CSV_REPS, path);
    FILE *p = popen(cmd, "r");
    bool ok = p && fscanf(p, "%lf %lf", wall, cpu) == 2;
    if (p)
        pclose(p);
    return ok;
}

static void bench_csv(const char *dir, bool quick)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/numbers.csv", dir);
    size_t bytes = write_csv(path, quick ? 20000 : 100000);
    void *map;
    size_t len;
    char err[512];
    if (rt_map_file(path, &map, &len, err, sizeof err) != 0)
        exit(1);
    /* Both sides single-threaded, best of CSV_REPS, by the wall clock and
     * by CPU time: on a machine others load, the wall clock says as much
     * about the scheduler as about the parser, and the target is taken
     * from CPU time. */
    double best = INFINITY, best_cpu = INFINITY;
    for (int r = 0; r < CSV_REPS; r++) {
        rt_csv c;
        uint64_t t0 = bench_now_ns();
        double c0 = cpu_now();
        if (rt_csv_parse(path, map, len, NULL, &c, err, sizeof err) != 0) {
            bench_log("%s", err);
            exit(1);
        }
        double cpu = cpu_now() - c0, s = (double)(bench_now_ns() - t0) / 1e9;
        best = s < best ? s : best;
        best_cpu = cpu < best_cpu ? cpu : best_cpu;
        rt_csv_free(&c);
    }
    munmap(map, len);
    double mb = (double)bytes / 1e6, np_wall, np_cpu;
    bench_emit("csv_parse_mb_per_s", mb / best, "MB/s", NULL,
               "\"bytes\":%zu,\"columns\":%d,\"clock\":\"wall\"", bytes, CSV_COLS);
    bench_emit("csv_parse_cpu_mb_per_s", mb / best_cpu, "MB/s", NULL,
               "\"bytes\":%zu,\"columns\":%d,\"clock\":\"cpu\"", bytes, CSV_COLS);
    if (!numpy_seconds(path, &np_wall, &np_cpu)) {
        bench_emit("numpy_loadtxt_mb_per_s", NAN, "MB/s", NULL,
                   "\"skipped\":\"/usr/bin/python3 with numpy not found\"");
        return;
    }
    bench_emit("numpy_loadtxt_mb_per_s", mb / np_wall, "MB/s", NULL,
               "\"bytes\":%zu,\"clock\":\"wall\"", bytes);
    bench_emit("numpy_loadtxt_cpu_mb_per_s", mb / np_cpu, "MB/s", NULL,
               "\"bytes\":%zu,\"clock\":\"cpu\"", bytes);
    bench_emit("csv_over_numpy_loadtxt_wall", np_wall / best, "ratio", NULL,
               "\"clock\":\"wall\"");
    bench_emit("csv_over_numpy_loadtxt", np_cpu / best_cpu, "ratio", NULL,
               "\"clock\":\"cpu\",\"target_min\":5");
}

int main(int argc, char **argv)
{
    bool quick = bench_quick_option(argc, argv, usage);
    bench_set_name("data");
    char dir[] = "/tmp/ferry-bench-data-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    openblas_set_num_threads(1);
    bench_loader(dir, quick);
    bench_csv(dir, quick);
    /* build/tasks/mlp.so, beside this build/bench/data. */
    char self[PATH_MAX], mlp_so[PATH_MAX + 16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        bench_die("cannot find this executable");
    self[n] = '\0';
    snprintf(mlp_so, sizeof mlp_so, "%s/tasks/mlp.so", dirname(dirname(self)));
    bench_data_train(dir, mlp_so, quick);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 1;
}

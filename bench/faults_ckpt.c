/* bench/faults — a checkpoint's cost: two trainers of tasks/mlp in this
 * process, the same options but one writing a checkpoint at each epoch's
 * end, in rounds of two short epochs a side, mirrored (run_rounds).
 *
 * A round's cost is the difference of its sides' mean epochs, and its
 * share that cost over the steps a checkpoint covers at the round's own
 * step time: both sides of a round saw the same machine, so a machine
 * shared with other work moves both. The rounds come in blocks; the lines
 * give the median over every round, its quartiles and the lowest and
 * highest block median, so a reader sees how far one run could swing.
 * Beside the wall time, the process's CPU time, which others' load
 * lengthens far less (it leaves out the write's waits for the disk). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "data_fmnist.h"
#include "faults_ckpt.h"
#include "runtime/device/device.h"
#include "runtime/runtime.h"
#include "runtime/train/train.h"
#include "stats.h"

#define TARGET_CKPT_SHARE 0.03
#define BLOCKS            4
#define QUICK_BLOCKS      2
#define BLOCK_ROUNDS      8
#define QUICK_ROUNDS      3
#define MAX_ROUNDS        (BLOCKS * BLOCK_ROUNDS)
#define SHORT_SAMPLES     6400 /* 50 steps of 128: an epoch for each side */
#define BATCH             128

enum { WALL, CPU, CLOCKS };

typedef struct rounds {
    int blocks, per_block, n;
    size_t steps;      /* of one short epoch */
    size_t full_steps; /* of an epoch of the whole training set */
    /* By clock and round: the write's cost and the step time without. */
    double cost_ms[CLOCKS][MAX_ROUNDS], step_ms[CLOCKS][MAX_ROUNDS];
} rounds;

static double clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* One epoch (its evaluation and its checkpoint included) on each clock,
 * in ms; -1 on failure. */
static int epoch_ms(rt_trainer *t, double ms[CLOCKS])
{
    rt_epoch_stats st;
    char err[512] = "";
    double w0 = clock_ms(CLOCK_MONOTONIC), c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
    if (rt_trainer_epoch(t, &st, NULL, NULL, err, sizeof err)) {
        bench_log("faults: %s", err);
        return -1;
    }
    ms[WALL] = clock_ms(CLOCK_MONOTONIC) - w0;
    ms[CPU] = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
    return 0;
}

/* The rounds of t[0] (without) and t[1] (with) into *r. A round runs each
 * side twice, mirrored (without, with, with, without; the next round the
 * other way round), so that a machine speeding up or slowing down through
 * the round moves both sides' sums alike; its cost is the difference of
 * the sides' means. */
static int run_rounds(rt_trainer *t[2], rounds *r)
{
    double ms[CLOCKS], sum[2][CLOCKS];
    for (int i = 0; i < 2; i++)
        if (epoch_ms(t[i], ms)) /* warm: pages, caches, BLAS buffers */
            return -1;
    r->steps = rt_trainer_steps(t[0]);
    static const int order[2][4] = {{0, 1, 1, 0}, {1, 0, 0, 1}};
    for (int k = 0; k < r->n; k++) {
        memset(sum, 0, sizeof sum);
        for (int j = 0; j < 4; j++) {
            int i = order[k % 2][j];
            if (epoch_ms(t[i], ms))
                return -1;
            for (int c = 0; c < CLOCKS; c++)
                sum[i][c] += ms[c];
        }
        for (int c = 0; c < CLOCKS; c++) {
            r->cost_ms[c][k] = (sum[1][c] - sum[0][c]) / 2;
            r->step_ms[c][k] = sum[0][c] / 2 / (double)r->steps;
        }
    }
    return 0;
}

/* The share of the step time rounds [from, to) spend writing checkpoints
 * `between` steps apart, one a round, into share[]. */
static void shares(const rounds *r, int c, size_t between, int from, int to,
                   double *share)
{
    for (int k = from; k < to; k++)
        share[k - from] = r->cost_ms[c][k] / (r->step_ms[c][k] * (double)between);
}

/* The median over every round, and the lowest and highest block median. */
typedef struct spread {
    bench_summary all;
    double p25, p75, block_min, block_max;
} spread;

static spread spread_of(const rounds *r, int c, size_t between)
{
    double v[MAX_ROUNDS];
    spread s;
    shares(r, c, between, 0, r->n, v);
    s.all = bench_summarize(v, (size_t)r->n);
    s.p25 = bench_percentile(v, (size_t)r->n, 25);
    s.p75 = bench_percentile(v, (size_t)r->n, 75);
    for (int b = 0; b < r->blocks; b++) {
        shares(r, c, between, b * r->per_block, (b + 1) * r->per_block, v);
        double m = bench_summarize(v, (size_t)r->per_block).median;
        s.block_min = b == 0 || m < s.block_min ? m : s.block_min;
        s.block_max = b == 0 || m > s.block_max ? m : s.block_max;
    }
    return s;
}

static void emit_share(const char *metric, const rounds *r, int c, size_t between,
                       const double load[2], bool target)
{
    spread s = spread_of(r, c, between);
    char extra[160] = "";
    if (target)
        snprintf(extra, sizeof extra, ",\"target_max\":%.2f,\"met\":%s",
                 TARGET_CKPT_SHARE, s.all.median <= TARGET_CKPT_SHARE ? "true" : "false");
    bench_emit(metric, s.all.median, "fraction", &s.all,
               "\"of\":\"step time\",\"clock\":\"%s\",\"steps_between\":%zu,"
               "\"p25\":%.4g,\"p75\":%.4g,\"blocks\":%d,\"block_median_min\":%.4g,"
               "\"block_median_max\":%.4g,\"load_1min\":[%.2f,%.2f],\"cpus\":%ld,"
               "\"model\":\"mlp\"%s",
               c == WALL ? "wall" : "process cpu", between, s.p25, s.p75, r->blocks,
               s.block_min, s.block_max, load[0], load[1], sysconf(_SC_NPROCESSORS_ONLN),
               extra);
}

/* The lines of the rounds; returns whether the target was missed. */
static int emit(rounds *r, const double load[2])
{
    for (int c = 0; c < CLOCKS; c++) {
        double v[MAX_ROUNDS];
        for (int k = 0; k < r->n; k++)
            v[k] = r->cost_ms[c][k];
        bench_summary cost = bench_summarize(v, (size_t)r->n);
        for (int k = 0; k < r->n; k++)
            v[k] = r->step_ms[c][k];
        bench_summary step = bench_summarize(v, (size_t)r->n);
        const char *clock = c == WALL ? "wall" : "process cpu";
        bench_emit(c == WALL ? "checkpoint_write_ms" : "checkpoint_write_cpu_ms",
                   cost.median, "ms", &cost,
                   "\"model\":\"mlp\",\"clock\":\"%s\",\"of\":\"epoch with one less "
                   "epoch without\"",
                   clock);
        bench_emit(c == WALL ? "step_ms_without_checkpoints"
                             : "step_cpu_ms_without_checkpoints",
                   step.median, "ms", &step,
                   "\"model\":\"mlp\",\"clock\":\"%s\",\"batch\":%d,\"steps\":%zu", clock,
                   BATCH, r->steps);
    }
    emit_share("checkpoint_share_each_epoch", r, WALL, r->full_steps, load, true);
    emit_share("checkpoint_share_each_epoch_cpu", r, CPU, r->full_steps, load, false);
    emit_share("checkpoint_share_every_100_steps", r, WALL, 100, load, false);
    emit_share("checkpoint_share_every_100_steps_cpu", r, CPU, 100, load, false);
    return spread_of(r, WALL, r->full_steps).all.median > TARGET_CKPT_SHARE;
}

static int measure(const ferry_model_t *m, ferry_device_t *dev, const char *dir,
                   bool quick)
{
    char err[512] = "";
    rt_dataset full[2], view[2];
    int rc = 0;
    if (bench_fmnist_pair("faults", full, view, SHORT_SAMPLES, 256))
        return -1;
    rt_trainer *t[2] = {NULL, NULL}; /* without, with */
    for (int i = 0; i < 2 && rc == 0; i++) {
        rt_train_opts to = {.batch = BATCH,
                            .optim = {.kind = RT_OPT_SGD, .lr = 0.05f, .momentum = 0.9f},
                            .seed = 1,
                            .world = 1,
                            .train_set = &view[0],
                            .test_set = &view[1],
                            .ckpt_dir = i ? dir : NULL,
                            .ckpt_model = "mlp"};
        if ((rc = rt_trainer_create(m, dev, &to, &t[i], err, sizeof err)))
            bench_log("faults: cannot create the trainer: %s", err);
    }
    static rounds r;
    r.blocks = quick ? QUICK_BLOCKS : BLOCKS;
    r.per_block = quick ? QUICK_ROUNDS : BLOCK_ROUNDS;
    r.n = r.blocks * r.per_block;
    r.full_steps = (full[0].n + BATCH - 1) / BATCH;
    double load[2] = {-1, -1};
    getloadavg(&load[0], 1);
    int missed = rc == 0 && run_rounds(t, &r) == 0 ? 0 : -1;
    getloadavg(&load[1], 1);
    if (missed == 0) {
        bench_log(
            "faults: %d rounds of two epochs with and two without checkpoints; load "
            "average %.1f then %.1f",
            r.n, load[0], load[1]);
        missed = emit(&r, load);
    }
    for (int i = 0; i < 2; i++)
        rt_trainer_destroy(t[i]);
    rt_dataset_free(&full[0]);
    rt_dataset_free(&full[1]);
    return missed;
}

int bench_ckpt(const char *mlp_so, const char *home, bool quick)
{
    char err[512] = "", dir[4200];
    rt_module mod;
    if (rt_module_open(&mod, mlp_so, mlp_so, err, sizeof err)) {
        bench_log("faults: %s (build it first)", err);
        return -1;
    }
    snprintf(dir, sizeof dir, "%s/ckpt-bench", home);
    ferry_device_t *dev = NULL;
    int rc = -1;
    if (rt_device_open("cpu", &dev, err, sizeof err))
        bench_log("faults: %s", err);
    else
        rc = measure(mod.task->model, dev, dir, quick);
    rt_device_close(dev);
    rt_module_close(&mod);
    return rc;
}

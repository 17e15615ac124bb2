/* bench/train --timeline: two trainers of tasks/mlp on the cpu in this
 * process, the same options but one recording a timeline, each epoch run on
 * one then the other (the order swapped every round), so that a machine
 * that speeds up or slows down moves both sides. Each round's ratio is the
 * recording trainer's step time over the other's; the median of the rounds
 * is the figure. The recording side also copies its events out after each
 * epoch, as a worker does for its reply. */
#include <stdio.h>
#include <stdlib.h>

#include <ferry/error.h>

#include "runtime/device/device.h"
#include "runtime/runtime.h"
#include "runtime/train/timeline.h"
#include "runtime/train/train.h"
#include "stats.h"
#include "train_timeline.h"

#define TARGET_OVERHEAD 1.03
#define ROUNDS          8
#define QUICK_ROUNDS    4
/* Samples an epoch: 100 steps of 128, a few tenths of a second here. */
#define SAMPLES       12800
#define QUICK_SAMPLES 6400

/* One epoch of `t`; its step time in ms, or a negative value on failure. */
static double epoch_step_ms(rt_trainer *t, bool copy)
{
    rt_epoch_stats st;
    char err[512] = "";
    if (rt_trainer_epoch(t, &st, NULL, NULL, err, sizeof err)) {
        bench_log("bench/train --timeline: %s", err);
        return -1;
    }
    if (copy) {
        rt_timeline_events ev;
        free(rt_timeline_copy(rt_trainer_timeline(t), &ev));
    }
    size_t steps = rt_trainer_steps(t);
    return steps ? st.train_s * 1e3 / (double)steps : -1;
}

static int run(const ferry_model_t *m, ferry_device_t *dev, const bench_tl_cfg *c)
{
    char err[512] = "";
    rt_dataset full[2] = {0}, view[2];
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++)
        rc = rt_fmnist_load(NULL, i == 0, &full[i], err, sizeof err);
    if (rc) {
        bench_log("bench/train --timeline: %s", err);
        return -1;
    }
    size_t n = c->quick ? QUICK_SAMPLES : SAMPLES;
    view[0] = full[0];
    view[1] = full[1];
    view[0].n = n < full[0].n ? n : full[0].n;
    view[1].n = 256;
    rt_train_opts to = {.batch = 128,
                        .optim = {.kind = RT_OPT_SGD, .lr = 0.05f, .momentum = 0.9f},
                        .seed = 1,
                        .world = 1,
                        .train_set = &view[0],
                        .test_set = &view[1]};
    rt_trainer *t[2] = {NULL, NULL}; /* off, on */
    for (int i = 0; i < 2 && rc == 0; i++) {
        to.timeline = i == 1;
        if ((rc = rt_trainer_create(m, dev, &to, &t[i], err, sizeof err)))
            bench_log("bench/train --timeline: cannot create the trainer: %s", err);
    }
    int rounds = c->quick ? QUICK_ROUNDS : ROUNDS;
    double ratio[ROUNDS], ms[2][ROUNDS];
    /* A first epoch each, untimed: pages, caches and BLAS buffers warm. */
    for (int i = 0; i < 2 && rc == 0; i++)
        if (epoch_step_ms(t[i], i == 1) < 0)
            rc = -1;
    for (int r = 0; r < rounds && rc == 0; r++) {
        for (int k = 0; k < 2 && rc == 0; k++) {
            int i = (r + k) % 2;
            if ((ms[i][r] = epoch_step_ms(t[i], i == 1)) < 0)
                rc = -1;
        }
        if (rc == 0) {
            ratio[r] = ms[1][r] / ms[0][r];
            bench_log("  round %d: step %.4f ms off, %.4f ms on (x%.4f)", r + 1, ms[0][r],
                      ms[1][r], ratio[r]);
        }
    }
    int missed = -1;
    if (rc == 0) {
        const char *p =
            "\"model\":\"mlp\",\"batch\":128,\"device\":\"cpu\",\"steps\":%zu";
        size_t steps = rt_trainer_steps(t[0]);
        bench_summary off = bench_summarize(ms[0], (size_t)rounds);
        bench_summary on = bench_summarize(ms[1], (size_t)rounds);
        bench_summary q = bench_summarize(ratio, (size_t)rounds);
        bench_emit("timeline_off_step_ms", off.median, "ms", &off, p, steps);
        bench_emit("timeline_on_step_ms", on.median, "ms", &on, p, steps);
        missed = q.median > TARGET_OVERHEAD;
        bench_emit("timeline_overhead_ratio", q.median, "x", &q,
                   "\"target\":%.2f,\"met\":%s,\"model\":\"mlp\"", TARGET_OVERHEAD,
                   missed ? "false" : "true");
    }
    rt_trainer_destroy(t[0]);
    rt_trainer_destroy(t[1]);
    rt_dataset_free(&full[0]);
    rt_dataset_free(&full[1]);
    return missed;
}

int bench_train_timeline(const bench_tl_cfg *c)
{
    char err[512] = "";
    rt_module mod;
    if (rt_module_open(&mod, c->mlp_so, c->mlp_so, err, sizeof err)) {
        bench_log("bench/train --timeline: %s (build it first)", err);
        return -1;
    }
    ferry_device_t *dev = NULL;
    int rc = -1;
    if (rt_device_open("cpu", &dev, err, sizeof err))
        bench_log("bench/train --timeline: %s", err);
    else
        rc = run(mod.task->model, dev, c);
    rt_device_close(dev);
    rt_module_close(&mod);
    return rc;
}

/* bench/train — ferry's trainer, in process, on the cpu or a GPU: what
 * `ferry submit` runs on its worker, without the network around it. */
#include <stdio.h>
#include <string.h>

#include <ferry/error.h>

#include "data_fmnist.h"
#include "runtime/device/device.h"
#include "runtime/runtime.h"
#include "runtime/train/train.h"
#include "stats.h"
#include "train_run.h"

static int train(const ferry_model_t *m, ferry_device_t *dev, const bench_run_opts *o,
                 void (*between)(void *), void *arg, bench_run *out)
{
    char err[512] = "";
    rt_dataset full[2] = {0}, view[2];
    rt_train_opts to = {
        .batch = o->batch,
        .optim = {.kind = RT_OPT_SGD, .lr = o->lr, .momentum = o->momentum},
        .seed = o->seed,
        .world = 1,
        /* `ferry submit`'s default recipe: the rate decays over the run. */
        .epochs = o->epochs,
        .cosine = true,
        .precision = (rt_precision)o->precision,
    };
    int rc = 0;
    if (o->train_samples || o->test_samples) {
        if ((rc = bench_fmnist_pair("bench/train", full, view, o->train_samples,
                                    o->test_samples)))
            goto out;
        to.train_set = &view[0];
        to.test_set = &view[1];
    }
    rt_trainer *t;
    if ((rc = rt_trainer_create(m, dev, &to, &t, err, sizeof err))) {
        bench_log("bench/train: cannot create the trainer: %s", err);
        if (rc == FERRY_ENOTSUP) { /* a precision this device lacks */
            snprintf(out->skipped, sizeof out->skipped, "%s", err);
            rc = 0;
        }
        goto out;
    }
    if (between)
        between(arg);
    for (int e = 0; e < o->epochs && e < BENCH_MAX_EPOCHS; e++) {
        rt_epoch_stats st;
        uint64_t t0 = bench_now_ns();
        if ((rc = rt_trainer_epoch(t, &st, NULL, NULL, err, sizeof err))) {
            bench_log("bench/train: epoch %d: %s", e + 1, err);
            break;
        }
        out->wall_s[e] = (double)(bench_now_ns() - t0) / 1e9;
        out->samples = st.samples;
        out->samples_per_s[e] = st.samples_per_s;
        out->train_s[e] = st.train_s;
        out->train_loss[e] = st.train_loss;
        out->test_accuracy[e] = st.test_accuracy;
        out->epochs = e + 1;
        bench_log(
            "  ferry  epoch %d: %7.0f samples/s  train %.2f s  wall %.2f s  loss %.4f  "
            "test accuracy %.4f",
            e + 1, st.samples_per_s, st.train_s, out->wall_s[e], st.train_loss,
            st.test_accuracy);
        if (between)
            between(arg);
    }
    rt_trainer_destroy(t);
out:
    rt_dataset_free(&full[0]);
    rt_dataset_free(&full[1]);
    return rc ? -1 : 0;
}

int bench_ferry_train(const char *so, const bench_run_opts *o, void (*between)(void *),
                      void *arg, bench_run *out)
{
    memset(out, 0, sizeof *out);
    char err[512] = "";
    rt_module mod;
    if (rt_module_open(&mod, so, so, err, sizeof err)) {
        bench_log("bench/train: %s (build it first)", err);
        return -1;
    }
    int rc = -1;
    const ferry_model_t *m = mod.task->model;
    ferry_device_t *dev = NULL;
    if (!m) {
        bench_log("bench/train: %s has no model", so);
    } else if (rt_device_open(o->device ? o->device : "cpu", &dev, err, sizeof err)) {
        snprintf(out->skipped, sizeof out->skipped, "%s", err);
        rc = 0;
    } else {
        snprintf(out->device, sizeof out->device, "%s", dev->description);
        rc = train(m, dev, o, between, arg, out);
    }
    rt_device_close(dev);
    rt_module_close(&mod);
    return rc;
}

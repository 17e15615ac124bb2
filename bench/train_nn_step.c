/* bench/train — a layer-list model's step against the hand-written one's,
 * loss_grad alone on the cpu, the two alternated call by call: on a shared
 * machine, what moves one moves the other, and the median of the pairs'
 * ratios is the figure that stays put. */
#include <stdio.h>
#include <stdlib.h>

#include "runtime/device/device.h"
#include "runtime/runtime.h"
#include "runtime/train/train.h"
#include "stats.h"
#include "tests/common/tshape.h"
#include "train_nn.h"

#define MAX_REPS 256

typedef struct side {
    rt_module mod;
    const ferry_model_t *m;
    rt_model_ctx mc;
    float *p, *g, *x;
    int32_t *labels;
    ferry_batch_t b;
} side;

static int open_side(side *s, const char *so, ferry_device_t *dev, int n)
{
    char err[512];
    if (rt_module_open(&s->mod, so, so, err, sizeof err) != 0 || !s->mod.task->model) {
        bench_log("bench/train: %s: %s", so, err);
        return -1;
    }
    s->m = s->mod.task->model;
    /* The bundled mlp takes its shape from the data: Fashion-MNIST's, the
     * hand-written one's. */
    if (tcom_fmnist_shape(s->m) != 0) {
        bench_log("bench/train: %s: cannot take Fashion-MNIST's shape", so);
        return -1;
    }
    if (rt_model_ctx_init(&s->mc, s->m, dev, n, 1, err, sizeof err) != 0) {
        bench_log("bench/train: %s: %s", so, err);
        return -1;
    }
    size_t len = ferry_model_layout(s->m, NULL);
    size_t feats = (size_t)n * s->m->input[0] * s->m->input[1] * s->m->input[2];
    float *host = calloc(len > feats ? len : feats, sizeof *host);
    int32_t *labels = calloc((size_t)n, sizeof *labels);
    s->p = dev->ops->alloc(dev, len * sizeof(float));
    s->g = dev->ops->alloc(dev, len * sizeof(float));
    s->x = dev->ops->alloc(dev, feats * sizeof(float));
    s->labels = dev->ops->alloc(dev, (size_t)n * sizeof *labels);
    int rc = host && labels && s->p && s->g && s->x && s->labels ? 0 : -1;
    if (!rc && (rc = s->m->init(&s->mc.pub, host)) == 0)
        rc = dev->ops->upload(dev, s->p, host, len * sizeof(float));
    for (size_t i = 0; !rc && i < feats; i++)
        host[i] = (float)((i * 2654435761u) % 1000) / 1000.0f;
    for (int i = 0; !rc && i < n; i++)
        labels[i] = i % s->m->outputs;
    if (!rc)
        rc = dev->ops->upload(dev, s->x, host, feats * sizeof(float));
    if (!rc)
        rc = dev->ops->upload(dev, s->labels, labels, (size_t)n * sizeof *labels);
    s->b = (ferry_batch_t){.n = n, .x = s->x, .labels = s->labels};
    free(host);
    free(labels);
    return rc ? -1 : 0;
}

static void close_side(side *s, ferry_device_t *dev)
{
    dev->ops->free(dev, s->p);
    dev->ops->free(dev, s->g);
    dev->ops->free(dev, s->x);
    dev->ops->free(dev, s->labels);
    rt_model_ctx_free(&s->mc);
    rt_module_close(&s->mod);
}

static double step_s(side *s, ferry_device_t *dev)
{
    float loss;
    uint64_t t0 = bench_now_ns();
    if (s->m->loss_grad(&s->mc.pub, s->p, &s->b, s->g, &loss) != 0 || dev->ops->sync(dev))
        bench_die("bench/train: loss_grad failed");
    return (double)(bench_now_ns() - t0) * 1e-9;
}

int bench_nn_steps(const char *nn_so, const char *hand_so, int batch, int reps,
                   bench_summary *ratio, double *nn_ms, double *hand_ms)
{
    char err[256];
    ferry_device_t *dev;
    if (rt_device_open("cpu", &dev, err, sizeof err) != 0)
        return -1;
    side a = {0}, h = {0};
    int rc =
        open_side(&a, nn_so, dev, batch) || open_side(&h, hand_so, dev, batch) ? -1 : 0;
    double r[MAX_REPS], tn[MAX_REPS], th[MAX_REPS];
    reps = reps < MAX_REPS ? reps : MAX_REPS;
    if (!rc) {
        step_s(&a, dev), step_s(&h, dev); /* warm: pages, caches */
        for (int i = 0; i < reps; i++) {
            bool nn_first = i % 2;
            double t1 = step_s(nn_first ? &a : &h, dev),
                   t2 = step_s(nn_first ? &h : &a, dev);
            tn[i] = nn_first ? t1 : t2;
            th[i] = nn_first ? t2 : t1;
            r[i] = th[i] / tn[i]; /* > 1: the list is faster */
        }
        *ratio = bench_summarize(r, (size_t)reps);
        *nn_ms = bench_summarize(tn, (size_t)reps).median * 1e3;
        *hand_ms = bench_summarize(th, (size_t)reps).median * 1e3;
    }
    if (a.m)
        close_side(&a, dev);
    if (h.m)
        close_side(&h, dev);
    rt_device_close(dev);
    return rc;
}

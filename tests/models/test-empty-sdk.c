/* The empty-batch contract of <ferry/model.h>, through the SDK alone: each
 * bundled model opened as a third party would open it (dlopen, the
 * `ferry_task` descriptor), with a model context built from the public
 * structs and the cpu device a worker hands a model. evaluate must take an
 * empty batch (the runtime sends one to a rank whose slice of a test batch
 * is empty); the bundled models take one in loss_grad as well. The batch's
 * pointers are NULL: an empty batch must not be read. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <criterion/criterion.h>

#include <ferry/task.h>

#include "runtime/device/device.h"
#include "tcommon.h"
#include "tshape.h"

enum { BATCH_MAX = 8 };

static void no_draw(ferry_model_ctx_t *mc, float *out, size_t n, float scale)
{
    (void)mc;
    (void)scale;
    for (size_t i = 0; i < n; i++)
        out[i] = 0.0f;
}

static void no_log(ferry_model_ctx_t *mc, int level, const char *fmt, ...)
{
    (void)mc;
    (void)level;
    (void)fmt;
}

static void no_ready(ferry_model_ctx_t *mc, int tensor)
{
    (void)mc;
    (void)tensor;
}

static int no_answer(ferry_model_ctx_t *mc, float *out, size_t n)
{
    (void)mc;
    (void)out;
    (void)n;
    return FERRY_ENOENT;
}

static const ferry_model_ops_t host_ops = {
    .version = FERRY_MODEL_ABI_VERSION,
    .size = sizeof(ferry_model_ops_t),
    .normal = no_draw,
    .uniform = no_draw,
    .log = no_log,
    .grad_ready = no_ready,
    .answer = no_answer,
};

static void empty_batch(const char *name)
{
    const char *dir = getenv("FERRY_TEST_TASKS");
    cr_assert(dir, "FERRY_TEST_TASKS is not set (run through meson test)");
    char path[4096], err[512] = "";
    snprintf(path, sizeof path, "%s/%s.so", dir, name);
    void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cr_assert(so, "%s", dlerror());
    const ferry_task_t *task = dlsym(so, FERRY_TASK_SYMBOL);
    cr_assert(task && task->version == FERRY_TASK_ABI_VERSION && task->model,
              "%s: no trainable ferry_task", path);
    const ferry_model_t *m = task->model;
    cr_assert_eq(tcom_fmnist_shape(m), 0, "%s: reshape", name);

    ferry_device_t *dev = NULL;
    cr_assert_eq(rt_device_open("cpu", &dev, err, sizeof err), 0, "cpu: %s", err);
    const ferry_device_ops_t *ops = dev->ops;
    int tensors = 0;
    while (m->params[tensors].name)
        tensors++;
    size_t len = ferry_model_layout(m, NULL);
    size_t *off = calloc((size_t)tensors, sizeof *off);
    float *host = malloc(len * sizeof *host);
    float *params = ops->alloc(dev, len * sizeof(float));
    float *grad = ops->alloc(dev, len * sizeof(float));
    float *work = ops->alloc(dev, m->workspace(BATCH_MAX) * sizeof(float));
    cr_assert(off && host && params && grad && work);
    ferry_model_layout(m, off);
    ferry_model_ctx_t mc = {.version = FERRY_MODEL_ABI_VERSION,
                            .size = sizeof mc,
                            .dev = dev,
                            .work = work,
                            .batch_max = BATCH_MAX,
                            .ops = &host_ops};
    ops->fill(dev, params, 0.5f, len);
    ops->fill(dev, grad, NAN, len);

    const ferry_batch_t empty = {.n = 0};
    float loss = NAN;
    cr_assert_eq(m->loss_grad(&mc, params, &empty, grad, &loss), 0, "%s: loss_grad",
                 name);
    cr_assert_eq(ops->download(dev, host, grad, len * sizeof(float)), 0);
    cr_expect_eq(loss, 0.0f, "%s: an empty batch's loss is %g", name, (double)loss);
    for (int i = 0; i < tensors; i++)
        for (size_t j = 0; j < ferry_param_count(&m->params[i]); j++)
            cr_assert_eq(host[off[i] + j], 0.0f,
                         "%s: %s[%zu] of an empty batch's gradient", name,
                         m->params[i].name, j);

    int correct = -1;
    loss = NAN;
    cr_assert_eq(m->evaluate(&mc, params, &empty, &loss, &correct), 0, "%s: evaluate",
                 name);
    cr_assert_eq(ops->sync(dev), 0);
    cr_expect(loss == 0.0f && correct == 0, "%s: evaluate of an empty batch: %g, %d",
              name, (double)loss, correct);

    ops->free(dev, work);
    ops->free(dev, grad);
    ops->free(dev, params);
    free(host);
    free(off);
    rt_device_close(dev);
    dlclose(so);
    tcom_assert_no_leaks();
}

Test(models_empty_sdk, mlp_takes_an_empty_batch_in_loss_grad_and_evaluate)
{
    empty_batch("mlp");
}

Test(models_empty_sdk, cnn_takes_an_empty_batch_in_loss_grad_and_evaluate)
{
    empty_batch("cnn");
}

Test(models_empty_sdk, linreg_takes_an_empty_batch_in_loss_grad_and_evaluate)
{
    empty_batch("linreg");
}

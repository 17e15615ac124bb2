/* The fixture of tests/models. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tmodels.h"
#include "tshape.h"

void tm_open(tmodel *t, const char *name, int batch_max, uint64_t seed)
{
    memset(t, 0, sizeof *t);
    const char *dir = getenv("FERRY_TEST_TASKS");
    cr_assert(dir, "FERRY_TEST_TASKS is not set (run through meson test)");
    char path[4096], file[256], err[512] = "";
    snprintf(file, sizeof file, "%s.so", name);
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int rc = rt_module_open(&t->mod, path, file, err, sizeof err);
    cr_assert_eq(rc, 0, "%s: %s", path, err);
    t->m = t->mod.task->model;
    cr_assert(t->m, "%s has no model", file);
    cr_assert_eq(tcom_fmnist_shape(t->m), 0, "%s", file);
    rc = rt_device_open("cpu", &t->dev, err, sizeof err);
    cr_assert_eq(rc, 0, "cpu device: %s", err);
    rc = rt_model_ctx_init(&t->mc, t->m, t->dev, batch_max, seed, err, sizeof err);
    cr_assert_eq(rc, 0, "%s: %s", file, err);

    for (t->nparams = 0; t->m->params[t->nparams].name; t->nparams++)
        cr_assert_lt(t->nparams, TM_MAX_PARAMS - 1, "%s: too many tensors", file);
    t->len = ferry_model_layout(t->m, t->off);
    t->features = t->m->input[0] * t->m->input[1] * t->m->input[2];

    const ferry_device_ops_t *ops = t->dev->ops;
    size_t samples = (size_t)batch_max;
    t->params = ops->alloc(t->dev, t->len * sizeof(float));
    t->grad = ops->alloc(t->dev, t->len * sizeof(float));
    t->x = ops->alloc(t->dev, samples * (size_t)t->features * sizeof(float));
    t->labels = ops->alloc(t->dev, samples * sizeof(int32_t));
    t->targets = ops->alloc(t->dev, samples * (size_t)t->m->outputs * sizeof(float));
    cr_assert(t->params && t->grad && t->x && t->labels && t->targets,
              "no device memory for %s", file);
}

void tm_close(tmodel *t)
{
    const ferry_device_ops_t *ops = t->dev->ops;
    ops->free(t->dev, t->params);
    ops->free(t->dev, t->grad);
    ops->free(t->dev, t->x);
    ops->free(t->dev, t->labels);
    ops->free(t->dev, t->targets);
    rt_model_ctx_free(&t->mc);
    rt_device_close(t->dev);
    rt_module_close(&t->mod);
}

float *tm_init(tmodel *t)
{
    float *p = calloc(t->len, sizeof *p);
    cr_assert(p);
    int rc = t->m->init(&t->mc.pub, p);
    cr_assert_eq(rc, 0, "init: %s", ferry_strerror(rc));
    return p;
}

void tm_batch(tmodel *t, int n, const float *x, const int32_t *labels,
              const float *targets, ferry_batch_t *b)
{
    const ferry_device_ops_t *ops = t->dev->ops;
    cr_assert_leq(n, t->mc.pub.batch_max);
    *b = (ferry_batch_t){.n = n, .x = t->x};
    cr_assert_eq(ops->upload(t->dev, t->x, x, (size_t)n * t->features * sizeof(float)),
                 0);
    if (labels) {
        cr_assert_eq(ops->upload(t->dev, t->labels, labels, (size_t)n * sizeof(int32_t)),
                     0);
        b->labels = t->labels;
    }
    if (targets) {
        size_t bytes = (size_t)n * t->m->outputs * sizeof(float);
        cr_assert_eq(ops->upload(t->dev, t->targets, targets, bytes), 0);
        b->targets = t->targets;
    }
}

int tm_loss_grad(tmodel *t, const float *p, const ferry_batch_t *b, float *grad,
                 float *loss)
{
    const ferry_device_ops_t *ops = t->dev->ops;
    cr_assert_eq(ops->upload(t->dev, t->params, p, t->len * sizeof(float)), 0);
    ops->fill(t->dev, t->grad, NAN, t->len);
    int rc = t->m->loss_grad(&t->mc.pub, t->params, b, t->grad, loss);
    if (rc == 0 && grad)
        cr_assert_eq(ops->download(t->dev, grad, t->grad, t->len * sizeof(float)), 0);
    return rc;
}

int tm_evaluate(tmodel *t, const float *p, const ferry_batch_t *b, float *loss,
                int *correct)
{
    const ferry_device_ops_t *ops = t->dev->ops;
    cr_assert_eq(ops->upload(t->dev, t->params, p, t->len * sizeof(float)), 0);
    int rc = t->m->evaluate(&t->mc.pub, t->params, b, loss, correct);
    cr_assert_eq(ops->sync(t->dev), 0);
    return rc;
}

uint64_t tm_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double unit(uint64_t *state)
{
    return ((double)(tm_next(state) >> 11) + 0.5) / 9007199254740992.0;
}

void tm_normal(float *out, size_t n, uint64_t *state)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (float)(sqrt(-2.0 * log(unit(state))) * cos(2.0 * M_PI * unit(state)));
}

void tm_labels(int32_t *out, size_t n, int classes, uint64_t *state)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (int32_t)(tm_next(state) % (uint64_t)classes);
}

size_t tm_count(const tmodel *t, int i)
{
    return ferry_param_count(&t->m->params[i]);
}

void tm_random_batch(tmodel *t, int n, uint64_t seed, ferry_batch_t *b)
{
    uint64_t s = seed;
    size_t feats = (size_t)n * t->features;
    float *x = malloc(feats * sizeof *x);
    int32_t *labels = malloc((size_t)n * sizeof *labels);
    float *targets = malloc((size_t)n * t->m->outputs * sizeof *targets);
    cr_assert(x && labels && targets);
    tm_normal(x, feats, &s);
    tm_labels(labels, (size_t)n, t->m->outputs, &s);
    tm_normal(targets, (size_t)n * t->m->outputs, &s);
    bool cls = t->m->kind == FERRY_MODEL_CLASSIFIER;
    tm_batch(t, n, x, cls ? labels : NULL, cls ? NULL : targets, b);
    free(x);
    free(labels);
    free(targets);
}

/* The context a model computes in, and the checks a descriptor must pass
 * before the runtime calls anything in it: a module is untrusted input. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/data.h"
#include "runtime/runtime_int.h"
#include "train.h"

/* The generator stream of parameter init; the loader draws from others. */
#define MODEL_STREAM 0x6d6f64656cull

static void mc_uniform(ferry_model_ctx_t *mc, float *out, size_t n, float bound)
{
    rt_model_ctx *c = (rt_model_ctx *)mc;
    for (size_t i = 0; i < n; i++)
        out[i] = (float)((2.0 * rt_rng_uniform(c->rng) - 1.0) * bound);
}

static void mc_normal(ferry_model_ctx_t *mc, float *out, size_t n, float std)
{
    rt_model_ctx *c = (rt_model_ctx *)mc;
    for (size_t i = 0; i < n; i++)
        out[i] = (float)(rt_rng_normal(c->rng) * std);
}

static void mc_log(ferry_model_ctx_t *mc, int level, const char *fmt, ...)
{
    (void)mc;
    static const char *names[] = {"error", "warn", "info", "debug"};
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    const char *name = names[level < 0 ? 0 : level > 3 ? 3 : level];
    fprintf(stderr, "model: %s: %s\n", name, line);
    char shown[sizeof line + 32];
    snprintf(shown, sizeof shown, "model: %s: %s", name, line);
    rt_tasklog_here(shown); /* for the submitter, with the epoch's reply */
}

static void mc_grad_ready(ferry_model_ctx_t *mc, int tensor)
{
    rt_model_ctx *c = (rt_model_ctx *)mc;
    if (c->grad_ready)
        c->grad_ready(c->grad_ready_arg, tensor);
}

static int mc_answer(ferry_model_ctx_t *mc, float *out, size_t n)
{
    const rt_dataset *set = ((rt_model_ctx *)mc)->set;
    if (!set || !set->answer)
        return FERRY_ENOENT;
    if (!out || n != set->answer_n)
        return FERRY_EINVAL;
    memcpy(out, set->answer, n * sizeof *out);
    return 0;
}

static const ferry_model_ops_t model_ops = {
    .version = FERRY_MODEL_ABI_VERSION,
    .size = sizeof(ferry_model_ops_t),
    .normal = mc_normal,
    .uniform = mc_uniform,
    .log = mc_log,
    .grad_ready = mc_grad_ready,
    .answer = mc_answer,
};

/* Bounds a model's sizes so that products of them fit comfortably in
 * size_t and int arithmetic. */
#define MAX_DIM (1 << 24)

/* Every tensor of `list` (NULL: none) has a shape of positive dimensions
 * that is not too large; a buffer may be a scalar (no dimensions). */
static int check_tensors(const ferry_param_t *list, const char *what, char *err,
                         size_t errlen)
{
    bool buffer = strcmp(what, "buffer") == 0;
    for (int i = 0; list && list[i].name; i++) {
        const ferry_param_t *p = &list[i];
        bool scalar = buffer && p->shape[0] == 0;
        if (!scalar && (p->shape[0] <= 0 || p->shape[0] > MAX_DIM)) {
            snprintf(err, errlen, "%s %s has an empty shape", what, p->name);
            return FERRY_EINVAL;
        }
        size_t count = 1;
        for (int d = 0; d < 4 && p->shape[d] > 0; d++) {
            if (p->shape[d] > MAX_DIM || count > (size_t)1 << 34) {
                snprintf(err, errlen, "%s %s is too large", what, p->name);
                return FERRY_EINVAL;
            }
            count *= (size_t)p->shape[d];
        }
        if (count > (size_t)1 << 34) {
            snprintf(err, errlen, "%s %s is too large", what, p->name);
            return FERRY_EINVAL;
        }
    }
    return 0;
}

static int check_model(const ferry_model_t *m, char *err, size_t errlen)
{
    if (m->version != FERRY_MODEL_ABI_VERSION) {
        snprintf(err, errlen, "model ABI version %u, this ferry speaks %u", m->version,
                 FERRY_MODEL_ABI_VERSION);
        return FERRY_EINVAL;
    }
    if (m->size < FERRY_MODEL_SIZE_V1) {
        snprintf(err, errlen, "model descriptor of %u bytes, expected at least %zu",
                 m->size, FERRY_MODEL_SIZE_V1);
        return FERRY_EINVAL;
    }
    if (m->kind != FERRY_MODEL_CLASSIFIER && m->kind != FERRY_MODEL_REGRESSOR) {
        snprintf(err, errlen, "model kind %d is neither classifier nor regressor",
                 m->kind);
        return FERRY_EINVAL;
    }
    for (int i = 0; i < 3; i++) {
        if (m->input[i] <= 0 || m->input[i] > MAX_DIM) {
            snprintf(err, errlen, "model input shape {%d, %d, %d} is not positive",
                     m->input[0], m->input[1], m->input[2]);
            return FERRY_EINVAL;
        }
    }
    if (m->outputs <= 0 || m->outputs > MAX_DIM) {
        snprintf(err, errlen, "model outputs %d is not positive", m->outputs);
        return FERRY_EINVAL;
    }
    if (!m->workspace || !m->init || !m->loss_grad || !m->evaluate) {
        snprintf(err, errlen, "model lacks one of workspace, init, loss_grad, evaluate");
        return FERRY_EINVAL;
    }
    if (!m->params || !m->params[0].name) {
        snprintf(err, errlen, "model declares no parameters");
        return FERRY_EINVAL;
    }
    int rc = check_tensors(m->params, "parameter", err, errlen);
    return rc ? rc : check_tensors(ferry_model_buffer_list(m), "buffer", err, errlen);
}

bool rt_model_from_data(const ferry_model_t *m)
{
    /* Every run reshapes it: the run before may have had other data. */
    return m->size >= offsetof(ferry_model_t, reshape) + sizeof m->reshape && m->reshape;
}

rt_predict_fn rt_model_predict(const ferry_model_t *m)
{
    return m->size >= offsetof(ferry_model_t, predict) + sizeof m->predict ? m->predict
                                                                             : NULL;
}

rt_metrics_fn rt_model_metrics(const ferry_model_t *m)
{
    return m->size >= offsetof(ferry_model_t, metrics) + sizeof m->metrics ? m->metrics
                                                                             : NULL;
}

/* The model's init_buffers, the same way as predict. */
static int (*init_buffers_of(const ferry_model_t *m))(ferry_model_ctx_t *, float *)
{
    return m->size >= offsetof(ferry_model_t, init_buffers) + sizeof m->init_buffers
               ? m->init_buffers
               : NULL;
}

/* The model's buffers on the device, from its init_buffers (zeros without). */
static int alloc_buffers(rt_model_ctx *mc, const ferry_model_t *m, char *err,
                         size_t errlen)
{
    ferry_device_t *dev = mc->pub.dev;
    mc->blen = ferry_model_buffers_layout(m, NULL);
    if (!mc->blen)
        return 0;
    float *host = calloc(mc->blen, sizeof *host);
    mc->pub.buffers = dev->ops->alloc(dev, mc->blen * sizeof(float));
    if (!host || !mc->pub.buffers) {
        free(host);
        snprintf(err, errlen, "cannot allocate the model's %zu floats of buffers on %s",
                 mc->blen, dev->name);
        return FERRY_ENOMEM;
    }
    int (*init)(ferry_model_ctx_t *, float *) = init_buffers_of(m);
    int rc = init ? init(&mc->pub, host) : 0;
    if (rc)
        snprintf(err, errlen, "the model's init_buffers failed: %s", ferry_strerror(rc));
    else
        rc = rt_model_ctx_set_buffers(mc, host);
    free(host);
    return rc;
}

int rt_model_ctx_get_buffers(rt_model_ctx *mc, float *host)
{
    ferry_device_t *dev = mc->pub.dev;
    size_t bytes = mc->blen * sizeof(float);
    return mc->blen ? dev->ops->download(dev, host, mc->pub.buffers, bytes) : 0;
}

int rt_model_ctx_set_buffers(rt_model_ctx *mc, const float *host)
{
    ferry_device_t *dev = mc->pub.dev;
    size_t bytes = mc->blen * sizeof(float);
    return mc->blen ? dev->ops->upload(dev, mc->pub.buffers, host, bytes) : 0;
}

size_t rt_model_param_count(const ferry_model_t *m)
{
    size_t n = 0;
    for (int i = 0; m->params[i].name; i++)
        n += ferry_param_count(&m->params[i]);
    return n;
}

int rt_model_ctx_init(rt_model_ctx *mc, const ferry_model_t *m, ferry_device_t *dev,
                      int batch_max, uint64_t seed, char *err, size_t errlen)
{
    memset(mc, 0, sizeof *mc);
    int rc = check_model(m, err, errlen);
    if (rc)
        return rc;
    if (batch_max <= 0) {
        snprintf(err, errlen, "batch size %d is not positive", batch_max);
        return FERRY_EINVAL;
    }
    size_t floats = m->workspace(batch_max);
    mc->pub = (ferry_model_ctx_t){.version = FERRY_MODEL_ABI_VERSION,
                                  .size = sizeof(ferry_model_ctx_t),
                                  .dev = dev,
                                  .batch_max = batch_max,
                                  .ops = &model_ops};
    mc->pub.impl = mc;
    if (!(mc->rng = malloc(sizeof *mc->rng))) {
        snprintf(err, errlen, "no memory for the model's generator");
        return FERRY_ENOMEM;
    }
    rt_rng_seed(mc->rng, seed, MODEL_STREAM);
    if (floats) {
        /* On the cpu, a write past the end faults in the callback that made
         * it, and the crash is named for it (runtime/guard.c). */
        mc->guarded = dev->kind == FERRY_DEVICE_CPU;
        size_t bytes = floats * sizeof(float);
        if (floats > SIZE_MAX / sizeof(float))
            mc->pub.work = NULL;
        else if (mc->guarded)
            mc->pub.work = rt_guarded_alloc(bytes, "the model's workspace");
        else
            mc->pub.work = dev->ops->alloc(dev, bytes);
        if (!mc->pub.work) {
            snprintf(err, errlen,
                     "cannot allocate the model's workspace of %zu floats on %s", floats,
                     dev->name);
            rt_model_ctx_free(mc);
            return FERRY_ENOMEM;
        }
    }
    if ((rc = alloc_buffers(mc, m, err, errlen)))
        rt_model_ctx_free(mc);
    return rc;
}

void rt_model_ctx_free(rt_model_ctx *mc)
{
    if (mc->guarded)
        rt_guarded_free(mc->pub.work);
    else if (mc->pub.dev && mc->pub.work)
        mc->pub.dev->ops->free(mc->pub.dev, mc->pub.work);
    mc->pub.work = NULL;
    if (mc->pub.dev && mc->pub.buffers)
        mc->pub.dev->ops->free(mc->pub.dev, mc->pub.buffers);
    mc->pub.buffers = NULL;
    mc->blen = 0;
    free(mc->rng);
    mc->rng = NULL;
}

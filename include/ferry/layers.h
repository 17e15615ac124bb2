/* ferry — layer helpers for a model task: dense layers, their gradients
 * and initialisation, the workspace carved into activations, and the checks
 * every model makes on a batch. The bundled models (tasks/mlp.c, cnn.c,
 * linreg.c) are built on them.
 *
 * Static inline only: a module reaches ferry through the tables it is handed
 * and links no ferry symbol, so each module compiles its own copy of these.
 * <math.h> is for ferry_layer_init's sqrtf: a module that calls it links
 * libm (-lm), as the bundled ones do.
 *
 * Dense layers store their weights [in][out], so a batch's forward pass is
 * X W with no transposes, and its two gradients are X^T dY (the weights) and
 * dY W^T (the input): three products a layer, two for the first. */
#ifndef FERRY_LAYERS_H
#define FERRY_LAYERS_H

#include <math.h>
#include <stddef.h>

#include <ferry/task.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Carves a model's workspace into 64-byte aligned pieces, so that every
 * activation starts where the device's vector code likes it. */
typedef struct ferry_arena_t {
    float *at;
} ferry_arena_t;

static inline float *ferry_arena_take(ferry_arena_t *a, size_t floats)
{
    float *p = a->at;
    a->at += (floats + 15) / 16 * 16;
    return p;
}

/* The workspace that ferry_arena_take() of `floats` uses up: what a
 * model's `workspace` adds up for each piece it takes. */
static inline size_t ferry_arena_size(size_t floats)
{
    return (floats + 15) / 16 * 16;
}

/* The checks every model makes on a batch before it touches the device:
 * FERRY_EINVAL for a batch larger than the workspace, or one without its
 * labels or targets. */
static inline int ferry_batch_check(const ferry_model_ctx_t *mc, const ferry_model_t *m,
                                    const ferry_batch_t *b)
{
    if (b->n < 0 || b->n > mc->batch_max || (b->n > 0 && !b->x))
        return FERRY_EINVAL;
    if (b->n > 0 && m->kind == FERRY_MODEL_CLASSIFIER && !b->labels)
        return FERRY_EINVAL;
    if (b->n > 0 && m->kind == FERRY_MODEL_REGRESSOR && !b->targets)
        return FERRY_EINVAL;
    return 0;
}

/* What an empty batch contributes to a step: a zero gradient and a zero
 * loss, which summed over ranks leaves the others' untouched (see the
 * empty-batch contract in <ferry/model.h>). */
static inline void ferry_empty_grad(ferry_model_ctx_t *mc, const ferry_model_t *m,
                                    float *grad, float *loss)
{
    mc->dev->ops->fill(mc->dev, grad, 0.0f, ferry_model_layout(m, NULL));
    *loss = 0.0f;
}

/* PyTorch's default for nn.Linear and nn.Conv2d: kaiming_uniform with
 * a = sqrt(5), which bounds weights by 1/sqrt(fan_in), and biases drawn from
 * the same bound. `fan_in` is a dense layer's inputs, or a convolution's
 * in_channels x kh x kw. */
static inline void ferry_layer_init(ferry_model_ctx_t *mc, float *w, size_t wcount,
                                    float *bias, size_t bcount, int fan_in)
{
    float bound = 1.0f / sqrtf((float)fan_in);
    mc->ops->uniform(mc, w, wcount, bound);
    mc->ops->uniform(mc, bias, bcount, bound);
}

/* y[n x out] = x[n x in] w[in x out] + b. */
static inline void ferry_dense(ferry_device_t *dev, int n, int in, int out,
                               const float *x, const float *w, const float *b, float *y)
{
    dev->ops->gemm(dev, false, false, n, out, in, 1.0f, x, w, 0.0f, y);
    dev->ops->bias_add(dev, y, b, n, out);
}

/* y[n x out] = relu(x[n x in] w[in x out] + b): the bias and the ReLU in
 * one pass where the device fuses them (ferry_bias_relu). */
static inline void ferry_dense_relu(ferry_device_t *dev, int n, int in, int out,
                                    const float *x, const float *w, const float *b,
                                    float *y)
{
    dev->ops->gemm(dev, false, false, n, out, in, 1.0f, x, w, 0.0f, y);
    ferry_bias_relu(dev, y, b, n, out);
}

/* From dy[n x out]: dw = x^T dy, db = the column sums of dy and, when dx is
 * not NULL, dx = dy w^T. */
static inline void ferry_dense_grad(ferry_device_t *dev, int n, int in, int out,
                                    const float *x, const float *w, const float *dy,
                                    float *dx, float *dw, float *db)
{
    dev->ops->gemm(dev, true, false, in, out, n, 1.0f, x, dy, 0.0f, dw);
    dev->ops->bias_grad(dev, db, dy, n, out);
    if (dx)
        dev->ops->gemm(dev, false, true, n, in, out, 1.0f, dy, w, 0.0f, dx);
}

#ifdef __cplusplus
}
#endif

#endif

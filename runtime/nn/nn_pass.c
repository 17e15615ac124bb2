/* One layer's forward and backward pass, on the device's operations. */
#include "nn_int.h"

/* Whether a skip connection after layer i reads the buffer layer `from`
 * wrote (a skip's source, or a ReLU in place on it). */
static bool skipped_over(const ferry_nn_t *nn, int from, int i)
{
    int buf = nn->plan.step[from].buf;
    for (int k = i + 1; nn->layers[k].kind != FERRY_NN_LAYER_END; k++) {
        int src = k - nn->layers[k].size - 1;
        if (nn->layers[k].kind == FERRY_NN_LAYER_RESIDUAL && src >= 0 && src <= from &&
            nn->plan.step[src].buf == buf)
            return true;
    }
    return false;
}

bool nn_in_place(const ferry_nn_t *nn, int i)
{
    if (i == 0 || nn->layers[i].kind != FERRY_NN_LAYER_RELU)
        return false;
    /* Nor over what a skip connection adds later (or a ReLU in place on
     * it, which shares its buffer). */
    if (skipped_over(nn, i - 1, i))
        return false;
    /* A ReLU overwrites its input: only when the layer that wrote it does
     * not read its own output going back (a max pooling does). */
    int prev = nn->layers[i - 1].kind;
    return prev == FERRY_NN_LAYER_DENSE || prev == FERRY_NN_LAYER_CONV2D ||
           prev == FERRY_NN_LAYER_RELU || prev == FERRY_NN_LAYER_BATCHNORM;
}

static ferry_conv_t conv_of(const nn_ctx *c, int i)
{
    const ferry_nn_layer_t *l = &c->nn->layers[i];
    const ferry_nn_step_t *st = &c->nn->plan.step[i];
    ferry_conv_t s = {.n = c->n,
                      .c = st->in[0],
                      .h = st->in[1],
                      .w = st->in[2],
                      .k = st->out[0],
                      .r = l->size,
                      .s = l->size,
                      .pad = l->pad,
                      .stride = l->stride > 0 ? l->stride : 1};
    ferry_conv_shape(&s);
    return s;
}

static int act_of(int kind)
{
    switch (kind) {
    case FERRY_NN_LAYER_TANH:
        return FERRY_ACT_TANH;
    case FERRY_NN_LAYER_SIGMOID:
        return FERRY_ACT_SIGMOID;
    case FERRY_NN_LAYER_LEAKY_RELU:
        return FERRY_ACT_LEAKY_RELU;
    default:
        return FERRY_ACT_GELU;
    }
}

/* Whether the device has what layer kind `kind` needs (a runtime older
 * than the ops has a smaller table). */
static bool device_has(const ferry_device_ops_t *o, int kind)
{
    switch (kind) {
    case FERRY_NN_LAYER_TANH:
    case FERRY_NN_LAYER_SIGMOID:
    case FERRY_NN_LAYER_LEAKY_RELU:
    case FERRY_NN_LAYER_GELU:
        return FERRY_DEVICE_HAS(o, activation) && FERRY_DEVICE_HAS(o, activation_grad);
    case FERRY_NN_LAYER_AVGPOOL:
    case FERRY_NN_LAYER_GLOBAL_AVGPOOL:
        return FERRY_DEVICE_HAS(o, avgpool) && FERRY_DEVICE_HAS(o, avgpool_grad);
    case FERRY_NN_LAYER_DROPOUT:
        return FERRY_DEVICE_HAS(o, dropout_mask) && FERRY_DEVICE_HAS(o, mul);
    case FERRY_NN_LAYER_LAYERNORM:
        return FERRY_DEVICE_HAS(o, layernorm) && FERRY_DEVICE_HAS(o, layernorm_grad);
    case FERRY_NN_LAYER_BATCHNORM:
        return FERRY_DEVICE_HAS(o, batchnorm) && FERRY_DEVICE_HAS(o, batchnorm_infer) &&
               FERRY_DEVICE_HAS(o, batchnorm_grad);
    default:
        return true;
    }
}

static ferry_pool_t pool_of(const nn_ctx *c, int i)
{
    const ferry_nn_layer_t *l = &c->nn->layers[i];
    const ferry_nn_step_t *st = &c->nn->plan.step[i];
    if (l->kind == FERRY_NN_LAYER_GLOBAL_AVGPOOL) {
        ferry_pool_t p = {.n = c->n,
                          .c = st->in[0],
                          .h = st->in[1],
                          .w = st->in[2],
                          .size = st->in[1],
                          .stride = 1};
        ferry_pool_shape(&p);
        return p;
    }
    ferry_pool_t p = {.n = c->n,
                      .c = st->in[0],
                      .h = st->in[1],
                      .w = st->in[2],
                      .size = l->size,
                      .stride = l->stride > 0 ? l->stride : l->size};
    ferry_pool_shape(&p);
    return p;
}

/* Tensor k of layer i: its values, or where its gradient goes. */
static const float *param(const nn_ctx *c, int i, int k)
{
    const ferry_nn_plan_t *pl = &c->nn->plan;
    return c->params + pl->offset[pl->step[i].param0 + k];
}

static float *dparam(const nn_ctx *c, int i, int k)
{
    const ferry_nn_plan_t *pl = &c->nn->plan;
    return c->grad + pl->offset[pl->step[i].param0 + k];
}

static ferry_nn_io_t custom_io(const nn_ctx *c, int i, const float *x, const float *y)
{
    const ferry_nn_step_t *st = &c->nn->plan.step[i];
    ferry_nn_io_t io = {.dev = c->mc->dev, .n = c->n, .x = x, .y = y};
    for (int d = 0; d < 3; d++)
        io.in[d] = st->in[d], io.out[d] = st->out[d];
    for (int k = 0; k < st->nparams; k++) {
        io.p[k] = param(c, i, k);
        io.dp[k] = c->grad ? dparam(c, i, k) : NULL;
    }
    return io;
}

/* Dropout: y = x mask while training, x itself in evaluation. */
static int dropout(const nn_ctx *c, int i, const float *x, float *y)
{
    ferry_device_t *dev = c->mc->dev;
    const ferry_nn_step_t *st = &c->nn->plan.step[i];
    float p = c->nn->layers[i].alpha;
    size_t all = (size_t)c->n * st->out_n;
    if (!c->grad || p == 0.0f)
        return dev->ops->copy(dev, y, x, all * sizeof(float));
    float *mask = c->act[st->aux];
    dev->ops->dropout_mask(dev, mask, all, p,
                           c->seed + (uint64_t)i * 0x9e3779b97f4a7c15ull);
    dev->ops->mul(dev, y, x, mask, all);
    return 0;
}

float *nn_output(const nn_ctx *c, int i)
{
    int b = i < 0 ? -1 : c->nn->plan.step[i].buf;
    return b < 0 ? (float *)c->x : c->act[b];
}

void nn_add_skips(const nn_ctx *c, int i, float *dx)
{
    const ferry_nn_t *nn = c->nn;
    ferry_device_t *dev = c->mc->dev;
    for (int k = i + 1; k < nn->plan.nlayers; k++) {
        const ferry_nn_step_t *st = &nn->plan.step[k];
        if (nn->layers[k].kind == FERRY_NN_LAYER_RESIDUAL && st->skip == i - 1)
            dev->ops->axpy(dev, dx, 1.0f, c->act[st->aux], (size_t)c->n * st->out_n);
    }
}

int nn_forward(const nn_ctx *c, int i, const float *x, float *y)
{
    ferry_device_t *dev = c->mc->dev;
    const ferry_nn_step_t *st = &c->nn->plan.step[i];
    const ferry_nn_layer_t *l = &c->nn->layers[i];
    size_t all = (size_t)c->n * st->out_n;
    if (!device_has(dev->ops, l->kind))
        return FERRY_ENOTSUP;
    switch (l->kind) {
    case FERRY_NN_LAYER_TANH:
    case FERRY_NN_LAYER_SIGMOID:
    case FERRY_NN_LAYER_LEAKY_RELU:
    case FERRY_NN_LAYER_GELU:
        dev->ops->activation(dev, act_of(l->kind), l->alpha, y, x, all);
        return 0;
    case FERRY_NN_LAYER_AVGPOOL:
    case FERRY_NN_LAYER_GLOBAL_AVGPOOL: {
        ferry_pool_t p = pool_of(c, i);
        return dev->ops->avgpool(dev, &p, x, y);
    }
    case FERRY_NN_LAYER_DROPOUT:
        return dropout(c, i, x, y);
    case FERRY_NN_LAYER_BATCHNORM:
        return nn_bn_forward(c, i, x, y);
    case FERRY_NN_LAYER_LAYERNORM: {
        float *stats = c->act[st->aux];
        return dev->ops->layernorm(dev, x, param(c, i, 0), param(c, i, 1), c->n,
                                   (int)st->in_n, 1e-5f, y, stats, stats + c->n);
    }
    case FERRY_NN_LAYER_RESIDUAL: {
        int rc = dev->ops->copy(dev, y, x, all * sizeof(float));
        if (!rc)
            dev->ops->axpy(dev, y, 1.0f, nn_output(c, st->skip), all);
        return rc;
    }
    case FERRY_NN_LAYER_DENSE: {
        int in = (int)st->in_n, out = (int)st->out_n;
        dev->ops->gemm(dev, false, false, c->n, out, in, 1.0f, x, param(c, i, 0), 0.0f,
                       y);
        if (st->fused)
            ferry_bias_relu(dev, y, param(c, i, 1), c->n, out);
        else
            dev->ops->bias_add(dev, y, param(c, i, 1), c->n, out);
        return 0;
    }
    case FERRY_NN_LAYER_CONV2D: {
        ferry_conv_t s = conv_of(c, i);
        return dev->ops->conv2d(dev, &s, x, param(c, i, 0), param(c, i, 1), y);
    }
    case FERRY_NN_LAYER_MAXPOOL: {
        ferry_pool_t p = pool_of(c, i);
        return dev->ops->maxpool(dev, &p, x, y);
    }
    case FERRY_NN_LAYER_RELU:
        if (i == 0 || !c->nn->plan.step[i - 1].fused) /* else the dense layer did */
            dev->ops->relu(dev, y, x, all);
        return 0;
    case FERRY_NN_LAYER_CUSTOM: {
        ferry_nn_io_t io = custom_io(c, i, x, y);
        io.out_y = y;
        return c->nn->layers[i].custom->forward(&io);
    }
    default: /* flatten: the same floats */
        return 0;
    }
}

static void ready(const nn_ctx *c, int i)
{
    const ferry_nn_step_t *st = &c->nn->plan.step[i];
    for (int k = 0; k < st->nparams; k++)
        ferry_model_grad_ready(c->mc, st->param0 + k);
}

static int backward(const nn_ctx *c, int i, const float *x, const float *y,
                    const float *dy, float *dx)
{
    ferry_device_t *dev = c->mc->dev;
    const ferry_nn_step_t *st = &c->nn->plan.step[i];
    const ferry_nn_layer_t *l = &c->nn->layers[i];
    size_t all = (size_t)c->n * st->out_n;
    switch (l->kind) {
    case FERRY_NN_LAYER_TANH:
    case FERRY_NN_LAYER_SIGMOID:
    case FERRY_NN_LAYER_LEAKY_RELU:
    case FERRY_NN_LAYER_GELU:
        if (dx)
            dev->ops->activation_grad(dev, act_of(l->kind), l->alpha, dx, dy, x, y, all);
        return 0;
    case FERRY_NN_LAYER_AVGPOOL:
    case FERRY_NN_LAYER_GLOBAL_AVGPOOL: {
        ferry_pool_t p = pool_of(c, i);
        return dx ? dev->ops->avgpool_grad(dev, &p, dy, dx) : 0;
    }
    case FERRY_NN_LAYER_LAYERNORM: {
        const float *stats = c->act[st->aux];
        return dev->ops->layernorm_grad(dev, x, param(c, i, 0), stats, stats + c->n, dy,
                                        c->n, (int)st->in_n, dx, dparam(c, i, 0),
                                        dparam(c, i, 1));
    }
    case FERRY_NN_LAYER_BATCHNORM:
        return nn_bn_backward(c, i, x, dy, dx);
    case FERRY_NN_LAYER_RESIDUAL:
        /* dx is dy (the sum's other term passes it on as it is); the skip
         * keeps a copy until the layer it started at is reached. */
        if (!st->need_dx || st->skip < 0)
            return 0; /* the batch needs no gradient */
        return dev->ops->copy(dev, c->act[st->aux], dy, all * sizeof(float));
    case FERRY_NN_LAYER_DROPOUT:
        if (dx && l->alpha == 0.0f)
            return dev->ops->copy(dev, dx, dy, all * sizeof(float));
        if (dx)
            dev->ops->mul(dev, dx, dy, c->act[st->aux], all);
        return 0;
    case FERRY_NN_LAYER_DENSE: {
        int in = (int)st->in_n, out = (int)st->out_n;
        dev->ops->gemm(dev, true, false, in, out, c->n, 1.0f, x, dy, 0.0f,
                       dparam(c, i, 0));
        dev->ops->bias_grad(dev, dparam(c, i, 1), dy, c->n, out);
        if (dx)
            dev->ops->gemm(dev, false, true, c->n, in, out, 1.0f, dy, param(c, i, 0),
                           0.0f, dx);
        return 0;
    }
    case FERRY_NN_LAYER_CONV2D: {
        ferry_conv_t s = conv_of(c, i);
        return dev->ops->conv2d_grad(dev, &s, x, param(c, i, 0), dy, dx, dparam(c, i, 0),
                                     dparam(c, i, 1));
    }
    case FERRY_NN_LAYER_MAXPOOL: {
        ferry_pool_t p = pool_of(c, i);
        return dx ? dev->ops->maxpool_grad(dev, &p, x, y, dy, dx) : 0;
    }
    case FERRY_NN_LAYER_RELU:
        if (dx)
            dev->ops->relu_grad(dev, dx, dy, y, (size_t)c->n * st->out_n);
        return 0;
    case FERRY_NN_LAYER_CUSTOM: {
        ferry_nn_io_t io = custom_io(c, i, x, y);
        io.dy = dy;
        io.dx = dx;
        return c->nn->layers[i].custom->backward(&io);
    }
    default: /* flatten */
        if (dx && dx != dy)
            return dev->ops->copy(dev, dx, dy, (size_t)c->n * st->out_n * sizeof(float));
        return 0;
    }
}

int nn_backward(const nn_ctx *c, int i, const float *x, const float *y, const float *dy,
                float *dx)
{
    int rc = backward(c, i, x, y, dy, dx);
    if (!rc)
        ready(c, i);
    return rc;
}

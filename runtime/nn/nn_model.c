/* What the runtime calls on a layer-list model: its workspace, its initial
 * parameters, a batch's loss and gradient, and evaluation. */
#include <math.h>
#include <string.h>

#include <ferry/layers.h>

#include "nn_int.h"

size_t ferry_nn_workspace(const ferry_nn_t *nn, int batch)
{
    const ferry_nn_plan_t *pl = &nn->plan;
    size_t n = batch > 0 ? (size_t)batch : 0, floats = 0;
    for (int b = 0; b < pl->nbufs; b++)
        floats += ferry_arena_size(n * pl->buf_n[b]);
    return floats + 2 * ferry_arena_size(n * pl->grad_n);
}

static void carve(const ferry_nn_t *nn, float *work, int n, nn_bufs *bufs)
{
    const ferry_nn_plan_t *pl = &nn->plan;
    ferry_arena_t ar = {work};
    for (int b = 0; b < pl->nbufs; b++)
        bufs->act[b] = ferry_arena_take(&ar, (size_t)n * pl->buf_n[b]);
    bufs->grad[0] = ferry_arena_take(&ar, (size_t)n * pl->grad_n);
    bufs->grad[1] = ferry_arena_take(&ar, (size_t)n * pl->grad_n);
}

/* Layer i's output (i == -1: the batch). */
static float *output(const ferry_nn_t *nn, const nn_bufs *bufs, const float *x, int i)
{
    int b = i < 0 ? -1 : nn->plan.step[i].buf;
    return b < 0 ? (float *)x : bufs->act[b];
}

int ferry_nn_init(const ferry_nn_t *nn, ferry_model_ctx_t *mc, float *p)
{
    const ferry_nn_plan_t *pl = &nn->plan;
    for (int i = 0; i < pl->nlayers; i++) {
        const ferry_nn_layer_t *l = &nn->layers[i];
        const ferry_nn_step_t *st = &pl->step[i];
        float *t[FERRY_NN_CUSTOM_PARAMS] = {0};
        for (int k = 0; k < st->nparams && k < FERRY_NN_CUSTOM_PARAMS; k++)
            t[k] = p + pl->offset[st->param0 + k];
        size_t nw = st->nparams ? ferry_param_count(&pl->params[st->param0]) : 0;
        size_t nb = st->nparams > 1 ? ferry_param_count(&pl->params[st->param0 + 1]) : 0;
        if (l->kind == FERRY_NN_LAYER_DENSE)
            ferry_layer_init(mc, t[0], nw, t[1], nb, (int)st->in_n);
        else if (l->kind == FERRY_NN_LAYER_CONV2D)
            ferry_layer_init(mc, t[0], nw, t[1], nb, st->in[0] * l->size * l->size);
        else if (l->kind == FERRY_NN_LAYER_LAYERNORM ||
                 l->kind == FERRY_NN_LAYER_BATCHNORM)
            for (size_t k = 0; k < nw; k++)
                t[0][k] = 1.0f; /* the bias stays 0 */
        else if (l->kind == FERRY_NN_LAYER_CUSTOM && l->custom->init) {
            int rc = l->custom->init(mc, st->in, t);
            if (rc)
                return rc;
        }
    }
    return 0;
}

int ferry_nn_init_buffers(const ferry_nn_t *nn, ferry_model_ctx_t *mc, float *b)
{
    (void)mc;
    const ferry_nn_plan_t *pl = &nn->plan;
    for (int i = 0; i < pl->nlayers; i++) {
        const ferry_nn_step_t *st = &pl->step[i];
        if (nn->layers[i].kind != FERRY_NN_LAYER_BATCHNORM)
            continue;
        /* running_var starts at 1; the mean and the count at 0. */
        const ferry_param_t *var = &pl->buffers[st->buffer0 + 1];
        float *v = b + pl->buffer_offset[st->buffer0 + 1];
        for (size_t k = 0; k < ferry_param_count(var); k++)
            v[k] = 1.0f;
    }
    return 0;
}

static int forward(const nn_ctx *c, const nn_bufs *bufs, const float *x)
{
    for (int i = 0; i < c->nn->plan.nlayers; i++) {
        int rc =
            nn_forward(c, i, output(c->nn, bufs, x, i - 1), output(c->nn, bufs, x, i));
        if (rc)
            return rc;
    }
    return 0;
}

static int backward(const nn_ctx *c, const nn_bufs *bufs, const float *x)
{
    const ferry_nn_plan_t *pl = &c->nn->plan;
    int cur = 0;
    for (int i = pl->nlayers - 1; i >= 0; i--) {
        const ferry_nn_step_t *st = &pl->step[i];
        if (!st->need_dx && !st->nparams)
            break; /* nothing before it learns */
        float *dy = bufs->grad[cur], *dx = NULL;
        int kind = c->nn->layers[i].kind;
        bool same = nn_in_place(c->nn, i) || kind == FERRY_NN_LAYER_FLATTEN ||
                    kind == FERRY_NN_LAYER_RESIDUAL;
        if (st->need_dx) {
            if (!same)
                cur = 1 - cur;
            dx = bufs->grad[cur];
        }
        int rc = nn_backward(c, i, output(c->nn, bufs, x, i - 1),
                             output(c->nn, bufs, x, i), dy, dx);
        if (rc)
            return rc;
        if (dx)
            nn_add_skips(c, i, dx);
    }
    return 0;
}

/* The loss of the last layer's output z; dz (NULL: not wanted) its
 * gradient. */
static int loss_of(const nn_ctx *c, const float *z, const ferry_batch_t *b, float *dz,
                   float *loss, int *correct)
{
    ferry_device_t *dev = c->mc->dev;
    int outputs = (int)c->nn->plan.step[c->nn->plan.nlayers - 1].out_n;
    if (c->nn->loss == FERRY_NN_MSE)
        return dev->ops->mse(dev, z, b->targets, b->n, outputs, dz, loss);
    if (c->nn->loss == FERRY_NN_BCE_LOGITS)
        return FERRY_DEVICE_HAS(dev->ops, bce_logits)
                   ? dev->ops->bce_logits(dev, z, b->targets, b->n, outputs, dz, loss)
                   : FERRY_ENOTSUP;
    return dev->ops->softmax_xent(dev, z, b->labels, b->n, outputs, dz, loss, correct);
}

/* A training batch's dropout seed, from the run's generator: the same
 * masks for the same seed and step. 0 when the model has no dropout. */
static uint64_t dropout_seed(const ferry_nn_t *nn, ferry_model_ctx_t *mc)
{
    bool any = false;
    for (int i = 0; i < nn->plan.nlayers; i++)
        any = any || nn->plan.step[i].aux >= 0;
    if (!any)
        return 0;
    float u[2];
    mc->ops->uniform(mc, u, 2, 1.0f);
    uint32_t a, b;
    memcpy(&a, &u[0], sizeof a);
    memcpy(&b, &u[1], sizeof b);
    return (uint64_t)a << 32 | b;
}

static int batch_check(const ferry_nn_t *nn, const ferry_model_ctx_t *mc,
                       const ferry_batch_t *b)
{
    if (!nn->plan.nlayers || b->n < 0 || b->n > mc->batch_max || (b->n > 0 && !b->x))
        return FERRY_EINVAL;
    if (b->n > 0 && (nn->loss != FERRY_NN_SOFTMAX_XENT ? !b->targets : !b->labels))
        return FERRY_EINVAL;
    return 0;
}

int ferry_nn_loss_grad(const ferry_nn_t *nn, ferry_model_ctx_t *mc, const float *params,
                       const ferry_batch_t *b, float *grad, float *loss)
{
    int rc = batch_check(nn, mc, b);
    if (rc)
        return rc;
    const ferry_nn_plan_t *pl = &nn->plan;
    if (b->n == 0) {
        size_t last =
            pl->offset[pl->nparams - 1] + ferry_param_count(&pl->params[pl->nparams - 1]);
        mc->dev->ops->fill(mc->dev, grad, 0.0f, last);
        *loss = 0.0f;
        return 0;
    }
    nn_bufs bufs;
    carve(nn, mc->work, b->n, &bufs);
    nn_ctx c = {.nn = nn,
                .mc = mc,
                .params = params,
                .grad = grad,
                .n = b->n,
                .act = bufs.act,
                .x = b->x,
                .seed = dropout_seed(nn, mc)};
    if ((rc = forward(&c, &bufs, b->x)))
        return rc;
    const float *z = output(nn, &bufs, b->x, pl->nlayers - 1);
    if ((rc = loss_of(&c, z, b, bufs.grad[0], loss, NULL)))
        return rc;
    return backward(&c, &bufs, b->x);
}

/* The forward pass of a batch that is not empty: the last layer's output
 * into *z, in the workspace. */
static int forward_only(const ferry_nn_t *nn, ferry_model_ctx_t *mc, const float *params,
                        const ferry_batch_t *b, nn_ctx *c, const float **z)
{
    nn_bufs bufs;
    carve(nn, mc->work, b->n, &bufs);
    *c = (nn_ctx){
        .nn = nn, .mc = mc, .params = params, .n = b->n, .act = bufs.act, .x = b->x};
    int rc = forward(c, &bufs, b->x);
    *z = output(nn, &bufs, b->x, nn->plan.nlayers - 1);
    return rc;
}

int ferry_nn_evaluate(const ferry_nn_t *nn, ferry_model_ctx_t *mc, const float *params,
                      const ferry_batch_t *b, float *loss, int *correct)
{
    int rc = batch_check(nn, mc, b);
    if (rc)
        return rc;
    *loss = 0.0f;
    *correct = 0;
    if (b->n == 0)
        return 0;
    nn_ctx c;
    const float *z;
    if ((rc = forward_only(nn, mc, params, b, &c, &z)))
        return rc;
    return loss_of(&c, z, b, NULL, loss,
                   nn->loss == FERRY_NN_SOFTMAX_XENT ? correct : NULL);
}

int ferry_nn_predict(const ferry_nn_t *nn, ferry_model_ctx_t *mc, const float *params,
                     const ferry_batch_t *b, float *out)
{
    if (!nn->plan.nlayers || b->n < 0 || b->n > mc->batch_max || (b->n > 0 && !b->x))
        return FERRY_EINVAL;
    if (b->n == 0)
        return 0;
    nn_ctx c;
    const float *z;
    int rc = forward_only(nn, mc, params, b, &c, &z);
    if (rc)
        return rc;
    size_t outputs = nn->plan.step[nn->plan.nlayers - 1].out_n;
    return mc->dev->ops->copy(mc->dev, out, z, (size_t)b->n * outputs * sizeof(float));
}

/* Batch normalisation: the one layer with buffers (its running mean and
 * variance, and the steps it counted), which the runtime keeps on the
 * device for each rank (ferry_model_ctx_t.buffers). loss_grad is training:
 * the batch's statistics, the running ones moved towards them; evaluate and
 * predict are evaluation: the running ones. */
#include "nn_int.h"

#define BN_EPS      1e-5f
#define BN_MOMENTUM 0.1f

void nn_bn_shape(const ferry_nn_step_t *st, int *channels, int *hw)
{
    bool vector = st->in[0] == 1 && st->in[1] == 1;
    *channels = vector ? st->in[2] : st->in[0];
    *hw = vector ? 1 : st->in[1] * st->in[2];
}

size_t nn_bn_aux(const ferry_nn_step_t *st)
{
    int ch, hw;
    nn_bn_shape(st, &ch, &hw);
    return 2 * (size_t)ch + 1;
}

static const float *param(const nn_ctx *c, const ferry_nn_step_t *st, int k)
{
    return c->params + c->nn->plan.offset[st->param0 + k];
}

/* Buffer k of the layer: running_mean, running_var, num_batches_tracked. */
static float *buffer(const nn_ctx *c, const ferry_nn_step_t *st, int k)
{
    return ferry_model_buffers(c->mc) + c->nn->plan.buffer_offset[st->buffer0 + k];
}

int nn_bn_forward(const nn_ctx *c, int i, const float *x, float *y)
{
    ferry_device_t *dev = c->mc->dev;
    const ferry_nn_step_t *st = &c->nn->plan.step[i];
    if (!ferry_model_buffers(c->mc))
        return FERRY_ENOTSUP; /* a runtime that keeps no buffers */
    int ch, hw;
    nn_bn_shape(st, &ch, &hw);
    float *stats = c->act[st->aux];
    if (!c->grad)
        return dev->ops->batchnorm_infer(dev, x, param(c, st, 0), param(c, st, 1),
                                         buffer(c, st, 0), buffer(c, st, 1), c->n, ch, hw,
                                         BN_EPS, y);
    int rc = dev->ops->batchnorm(dev, x, param(c, st, 0), param(c, st, 1), c->n, ch, hw,
                                 BN_EPS, BN_MOMENTUM, y, stats, stats + ch,
                                 buffer(c, st, 0), buffer(c, st, 1));
    if (rc)
        return rc;
    /* num_batches_tracked += 1, on the device with the table's ops. */
    float *one = stats + 2 * ch;
    dev->ops->fill(dev, one, 1.0f, 1);
    dev->ops->axpy(dev, buffer(c, st, 2), 1.0f, one, 1);
    return 0;
}

int nn_bn_backward(const nn_ctx *c, int i, const float *x, const float *dy, float *dx)
{
    ferry_device_t *dev = c->mc->dev;
    const ferry_nn_plan_t *pl = &c->nn->plan;
    const ferry_nn_step_t *st = &pl->step[i];
    int ch, hw;
    nn_bn_shape(st, &ch, &hw);
    const float *stats = c->act[st->aux];
    return dev->ops->batchnorm_grad(dev, x, param(c, st, 0), stats, stats + ch, dy, c->n,
                                    ch, hw, BN_EPS, dx, c->grad + pl->offset[st->param0],
                                    c->grad + pl->offset[st->param0 + 1]);
}

/* linreg — linear regression, y = x w + b, on the synthetic "linear" set
 * (8 features, one output; see runtime/data), with the mean squared error
 * sum (y - t)^2 / (2 n) as its loss.
 *
 *     ferry submit build/tasks/linreg.so --epochs 5
 *
 * The smallest trainable model: its answer has a closed form (least
 * squares), which is what the tests of the trainers and of the distributed
 * modes compare against. */
#include <ferry/task.h>

#include "layers.h"

enum { IN = 8, OUT = 1 };
enum { W, B, NPARAMS };

static const ferry_param_t params[] = {
    {"weight", {IN, OUT}},
    {"bias", {OUT}},
    {NULL, {0}},
};

static const ferry_model_t model;

static size_t workspace(int batch)
{
    /* The predictions and their gradient. */
    return 2 * ly_size((size_t)batch * OUT);
}

static int init(ferry_model_ctx_t *mc, float *p)
{
    size_t off[NPARAMS];
    ferry_model_layout(&model, off);
    ly_init_layer(mc, p + off[W], IN * OUT, p + off[B], OUT, IN);
    return 0;
}

static int loss_grad(ferry_model_ctx_t *mc, const float *p, const ferry_batch_t *b,
                     float *grad, float *loss)
{
    ferry_device_t *dev = mc->dev;
    int rc = ly_check_batch(mc, &model, b);
    if (rc)
        return rc;
    if (b->n == 0) {
        ly_empty_grad(mc, &model, grad, loss);
        return 0;
    }
    size_t off[NPARAMS];
    ferry_model_layout(&model, off);
    ly_arena ar = {mc->work};
    float *y = ly_take(&ar, (size_t)b->n * OUT);
    float *dy = ly_take(&ar, (size_t)b->n * OUT);
    ly_dense(dev, b->n, IN, OUT, b->x, p + off[W], p + off[B], y);
    if ((rc = dev->ops->mse(dev, y, b->targets, b->n, OUT, dy, loss)))
        return rc;
    ly_dense_grad(dev, b->n, IN, OUT, b->x, p + off[W], dy, NULL, grad + off[W],
                  grad + off[B]);
    return 0;
}

static int evaluate(ferry_model_ctx_t *mc, const float *p, const ferry_batch_t *b,
                    float *loss, int *correct)
{
    ferry_device_t *dev = mc->dev;
    int rc = ly_check_batch(mc, &model, b);
    if (rc)
        return rc;
    *loss = 0.0f;
    *correct = 0;
    if (b->n == 0)
        return 0;
    size_t off[NPARAMS];
    ferry_model_layout(&model, off);
    float *y = mc->work;
    ly_dense(dev, b->n, IN, OUT, b->x, p + off[W], p + off[B], y);
    return dev->ops->mse(dev, y, b->targets, b->n, OUT, NULL, loss);
}

static const ferry_model_t model = {
    FERRY_MODEL_HEADER,     .kind = FERRY_MODEL_REGRESSOR,
    .dataset = "linear",    .input = {1, 1, IN},
    .outputs = OUT,         .params = params,
    .workspace = workspace, .init = init,
    .loss_grad = loss_grad, .evaluate = evaluate,
};

FERRY_TASK(.name = "linreg", .model = &model);

/* linreg — linear regression, y = x w + b, on the synthetic "linear" set
 * (8 features, one output; see runtime/data), with the mean squared error
 * sum (y - t)^2 / (2 n) as its loss. Each epoch reports its test MSE and
 * the distance of its weights from the set's known answer.
 *
 *     ferry submit build/tasks/linreg.so --epochs 5
 *
 * The smallest trainable model: its answer has a closed form (least
 * squares), which is what the tests of the trainers and of the distributed
 * modes compare against. */
#include <math.h>

#include <ferry/layers.h>
#include <ferry/task.h>

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
    return 2 * ferry_arena_size((size_t)batch * OUT);
}

static int init(ferry_model_ctx_t *mc, float *p)
{
    size_t off[NPARAMS];
    ferry_model_layout(&model, off);
    ferry_layer_init(mc, p + off[W], IN * OUT, p + off[B], OUT, IN);
    return 0;
}

static int loss_grad(ferry_model_ctx_t *mc, const float *p, const ferry_batch_t *b,
                     float *grad, float *loss)
{
    ferry_device_t *dev = mc->dev;
    int rc = ferry_batch_check(mc, &model, b);
    if (rc)
        return rc;
    if (b->n == 0) {
        ferry_empty_grad(mc, &model, grad, loss);
        return 0;
    }
    size_t off[NPARAMS];
    ferry_model_layout(&model, off);
    ferry_arena_t ar = {mc->work};
    float *y = ferry_arena_take(&ar, (size_t)b->n * OUT);
    float *dy = ferry_arena_take(&ar, (size_t)b->n * OUT);
    ferry_dense(dev, b->n, IN, OUT, b->x, p + off[W], p + off[B], y);
    if ((rc = dev->ops->mse(dev, y, b->targets, b->n, OUT, dy, loss)))
        return rc;
    ferry_dense_grad(dev, b->n, IN, OUT, b->x, p + off[W], dy, NULL, grad + off[W],
                     grad + off[B]);
    return 0;
}

static int evaluate(ferry_model_ctx_t *mc, const float *p, const ferry_batch_t *b,
                    float *loss, int *correct)
{
    ferry_device_t *dev = mc->dev;
    int rc = ferry_batch_check(mc, &model, b);
    if (rc)
        return rc;
    *loss = 0.0f;
    *correct = 0;
    if (b->n == 0)
        return 0;
    size_t off[NPARAMS];
    ferry_model_layout(&model, off);
    float *y = mc->work;
    ferry_dense(dev, b->n, IN, OUT, b->x, p + off[W], p + off[B], y);
    return dev->ops->mse(dev, y, b->targets, b->n, OUT, NULL, loss);
}

/* What a regression is judged by: the test set's mean squared error (twice
 * the loss, which halves it), and how far the learned weights and bias are
 * from those the data were drawn from (Euclidean distance; the noise keeps
 * it from reaching 0). */
static int metrics(ferry_model_ctx_t *mc, const float *p, double test_loss,
                   ferry_model_metric_t *out, int max)
{
    if (max < 2)
        return 0;
    out[0] = (ferry_model_metric_t){"test_mse", 2.0 * test_loss};
    float truth[IN + 1], got[IN + 1];
    int rc = ferry_model_answer(mc, truth, IN + 1);
    if (rc == FERRY_ENOENT)
        return 1; /* a set with no known answer */
    if (rc)
        return rc;
    size_t off[NPARAMS];
    ferry_model_layout(&model, off);
    ferry_device_t *dev = mc->dev;
    if ((rc = dev->ops->download(dev, got, p + off[W], IN * sizeof(float))) ||
        (rc = dev->ops->download(dev, got + IN, p + off[B], sizeof(float))))
        return rc;
    double d2 = 0;
    for (int i = 0; i <= IN; i++)
        d2 += ((double)got[i] - truth[i]) * ((double)got[i] - truth[i]);
    out[1] = (ferry_model_metric_t){"weight_error", sqrt(d2)};
    return 2;
}

static const ferry_model_t model = {
    FERRY_MODEL_HEADER,     .kind = FERRY_MODEL_REGRESSOR,
    .dataset = "linear",    .input = {1, 1, IN},
    .outputs = OUT,         .params = params,
    .workspace = workspace, .init = init,
    .loss_grad = loss_grad, .evaluate = evaluate,
    .metrics = metrics,
};

FERRY_TASK(.name = "linreg", .model = &model);

/* mlp_hand — the hand-written MLP that tasks/mlp.c replaced with a layer list,
 * kept as the baseline bench/train measures the list against:
 * 784-256-128-10 with ReLU between the layers and softmax cross-entropy on top.
 *
 *     build/bench/train --nn    (against tasks/mlp.c, its layer list)
 *
 * A model task declares its parameter tensors, initialises them and computes
 * a batch's loss and gradient with the device's operations (<ferry/model.h>);
 * the runtime does the rest, on the cpu or a GPU alike.
 *
 * The step is eight matrix products — three forward, three weight gradients,
 * and the input gradients of the upper two layers — with the bias and ReLU
 * passes between them, and nothing else that walks memory: its speed is the
 * speed of the products. */
#include <ferry/layers.h>
#include <ferry/task.h>

enum { IN = 784, H1 = 256, H2 = 128, OUT = 10 };
enum { FC1_W, FC1_B, FC2_W, FC2_B, FC3_W, FC3_B, NPARAMS };

static const ferry_param_t params[] = {
    {"fc1.weight", {IN, H1}},
    {"fc1.bias", {H1}},
    {"fc2.weight", {H1, H2}},
    {"fc2.bias", {H2}},
    {"fc3.weight", {H2, OUT}},
    {"fc3.bias", {OUT}},
    {NULL, {0}},
};

static const ferry_model_t model;

/* A batch's activations and their gradients in the workspace. */
typedef struct acts {
    float *h1, *h2, *z;    /* after fc1+relu, fc2+relu, fc3 */
    float *dz, *dh2, *dh1; /* gradients of the loss with respect to them */
} acts;

static void carve(ferry_model_ctx_t *mc, int batch, acts *a)
{
    size_t n = (size_t)batch;
    ferry_arena_t ar = {mc->work};
    a->h1 = ferry_arena_take(&ar, n * H1);
    a->h2 = ferry_arena_take(&ar, n * H2);
    a->z = ferry_arena_take(&ar, n * OUT);
    a->dz = ferry_arena_take(&ar, n * OUT);
    a->dh2 = ferry_arena_take(&ar, n * H2);
    a->dh1 = ferry_arena_take(&ar, n * H1);
}

static size_t workspace(int batch)
{
    size_t n = (size_t)batch;
    return 2 * (ferry_arena_size(n * H1) + ferry_arena_size(n * H2) +
                ferry_arena_size(n * OUT));
}

static int init(ferry_model_ctx_t *mc, float *p)
{
    size_t off[NPARAMS];
    ferry_model_layout(&model, off);
    ferry_layer_init(mc, p + off[FC1_W], IN * H1, p + off[FC1_B], H1, IN);
    ferry_layer_init(mc, p + off[FC2_W], H1 * H2, p + off[FC2_B], H2, H1);
    ferry_layer_init(mc, p + off[FC3_W], H2 * OUT, p + off[FC3_B], OUT, H2);
    return 0;
}

static void forward(ferry_device_t *dev, const float *p, const size_t *off,
                    const float *x, int n, const acts *a)
{
    ferry_dense_relu(dev, n, IN, H1, x, p + off[FC1_W], p + off[FC1_B], a->h1);
    ferry_dense_relu(dev, n, H1, H2, a->h1, p + off[FC2_W], p + off[FC2_B], a->h2);
    ferry_dense(dev, n, H2, OUT, a->h2, p + off[FC3_W], p + off[FC3_B], a->z);
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
    int n = b->n;
    acts a;
    carve(mc, n, &a);
    forward(dev, p, off, b->x, n, &a);
    rc = dev->ops->softmax_xent(dev, a.z, b->labels, n, OUT, a.dz, loss, NULL);
    if (rc)
        return rc;
    ferry_dense_grad(dev, n, H2, OUT, a.h2, p + off[FC3_W], a.dz, a.dh2,
                     grad + off[FC3_W], grad + off[FC3_B]);
    ferry_model_grad_ready(mc, FC3_W);
    ferry_model_grad_ready(mc, FC3_B);
    dev->ops->relu_grad(dev, a.dh2, a.dh2, a.h2, (size_t)n * H2);
    ferry_dense_grad(dev, n, H1, H2, a.h1, p + off[FC2_W], a.dh2, a.dh1,
                     grad + off[FC2_W], grad + off[FC2_B]);
    ferry_model_grad_ready(mc, FC2_W);
    ferry_model_grad_ready(mc, FC2_B);
    dev->ops->relu_grad(dev, a.dh1, a.dh1, a.h1, (size_t)n * H1);
    /* The first layer's input is the data: it needs no gradient. */
    ferry_dense_grad(dev, n, IN, H1, b->x, p + off[FC1_W], a.dh1, NULL, grad + off[FC1_W],
                     grad + off[FC1_B]);
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
    acts a;
    carve(mc, b->n, &a);
    forward(dev, p, off, b->x, b->n, &a);
    return dev->ops->softmax_xent(dev, a.z, b->labels, b->n, OUT, NULL, loss, correct);
}

static const ferry_model_t model = {
    FERRY_MODEL_HEADER,
    .kind = FERRY_MODEL_CLASSIFIER,
    .dataset = "fashion-mnist",
    .input = {1, 28, 28},
    .outputs = OUT,
    .params = params,
    .workspace = workspace,
    .init = init,
    .loss_grad = loss_grad,
    .evaluate = evaluate,
};

FERRY_TASK(.name = "mlp", .model = &model);

/* cnn_hand — the hand-written CNN that tasks/cnn.c replaced with a layer list,
 * kept as the baseline bench/train measures the list against:
 *
 *     conv 5x5 (1 -> 16, pad 2) relu maxpool 2      28x28 -> 14x14
 *     conv 5x5 (16 -> 32, pad 2) relu maxpool 2     14x14 -> 7x7
 *     dense 1568 -> 128 relu, dense 128 -> 10, softmax cross-entropy
 *
 *     build/bench/train --nn    (against tasks/cnn.c, its layer list)
 *
 * The convolutions and pooling are the device's (cuDNN on a GPU, im2col and
 * a matrix product on the cpu): the model is the same on both. The sizes are
 * the smallest that pass 0.90 test accuracy within a few epochs while an
 * epoch stays affordable on two cpu cores. */
#include <ferry/layers.h>
#include <ferry/task.h>

enum {
    SIDE = 28, /* input: 1 x 28 x 28 */
    C1 = 16,
    C2 = 32,
    K = 5, /* kernel side; padding K / 2 keeps the size */
    S1 = SIDE / 2,
    S2 = SIDE / 4,
    FLAT = C2 * S2 * S2,
    DENSE = 128,
    OUT = 10,
};
enum { CONV1_W, CONV1_B, CONV2_W, CONV2_B, FC1_W, FC1_B, FC2_W, FC2_B, NPARAMS };

static const ferry_param_t params[] = {
    {"conv1.weight", {C1, 1, K, K}},
    {"conv1.bias", {C1}},
    {"conv2.weight", {C2, C1, K, K}},
    {"conv2.bias", {C2}},
    {"fc1.weight", {FLAT, DENSE}},
    {"fc1.bias", {DENSE}},
    {"fc2.weight", {DENSE, OUT}},
    {"fc2.bias", {OUT}},
    {NULL, {0}},
};

static const ferry_model_t model;

/* The layers' shapes for a batch of n. */
typedef struct shapes {
    ferry_conv_t conv1, conv2;
    ferry_pool_t pool1, pool2;
} shapes;

static void make_shapes(int n, shapes *s)
{
    s->conv1 = (ferry_conv_t){.n = n,
                              .c = 1,
                              .h = SIDE,
                              .w = SIDE,
                              .k = C1,
                              .r = K,
                              .s = K,
                              .pad = K / 2,
                              .stride = 1};
    s->pool1 =
        (ferry_pool_t){.n = n, .c = C1, .h = SIDE, .w = SIDE, .size = 2, .stride = 2};
    s->conv2 = (ferry_conv_t){.n = n,
                              .c = C1,
                              .h = S1,
                              .w = S1,
                              .k = C2,
                              .r = K,
                              .s = K,
                              .pad = K / 2,
                              .stride = 1};
    s->pool2 = (ferry_pool_t){.n = n, .c = C2, .h = S1, .w = S1, .size = 2, .stride = 2};
    ferry_conv_shape(&s->conv1);
    ferry_conv_shape(&s->conv2);
    ferry_pool_shape(&s->pool1);
    ferry_pool_shape(&s->pool2);
}

/* A batch's activations (each layer's output, relu applied in place) and
 * their gradients, in the workspace. */
typedef struct acts {
    float *a1, *p1, *a2, *p2, *h, *z;
    float *dz, *dh, *dp2, *da2, *dp1, *da1;
} acts;

/* Floats a sample of each activation. */
#define A1 ((size_t)C1 * SIDE * SIDE)
#define P1 ((size_t)C1 * S1 * S1)
#define A2 ((size_t)C2 * S1 * S1)
#define P2 ((size_t)FLAT)

static void carve(ferry_model_ctx_t *mc, int batch, acts *a)
{
    size_t n = (size_t)batch;
    ferry_arena_t ar = {mc->work};
    a->a1 = ferry_arena_take(&ar, n * A1);
    a->p1 = ferry_arena_take(&ar, n * P1);
    a->a2 = ferry_arena_take(&ar, n * A2);
    a->p2 = ferry_arena_take(&ar, n * P2);
    a->h = ferry_arena_take(&ar, n * DENSE);
    a->z = ferry_arena_take(&ar, n * OUT);
    a->dz = ferry_arena_take(&ar, n * OUT);
    a->dh = ferry_arena_take(&ar, n * DENSE);
    a->dp2 = ferry_arena_take(&ar, n * P2);
    a->da2 = ferry_arena_take(&ar, n * A2);
    a->dp1 = ferry_arena_take(&ar, n * P1);
    a->da1 = ferry_arena_take(&ar, n * A1);
}

static size_t workspace(int batch)
{
    size_t n = (size_t)batch;
    return 2 * (ferry_arena_size(n * A1) + ferry_arena_size(n * P1) +
                ferry_arena_size(n * A2) + ferry_arena_size(n * P2) +
                ferry_arena_size(n * DENSE) + ferry_arena_size(n * OUT));
}

static int init(ferry_model_ctx_t *mc, float *p)
{
    size_t off[NPARAMS];
    ferry_model_layout(&model, off);
    ferry_layer_init(mc, p + off[CONV1_W], (size_t)C1 * K * K, p + off[CONV1_B], C1,
                     K * K);
    ferry_layer_init(mc, p + off[CONV2_W], (size_t)C2 * C1 * K * K, p + off[CONV2_B], C2,
                     C1 * K * K);
    ferry_layer_init(mc, p + off[FC1_W], (size_t)FLAT * DENSE, p + off[FC1_B], DENSE,
                     FLAT);
    ferry_layer_init(mc, p + off[FC2_W], (size_t)DENSE * OUT, p + off[FC2_B], OUT, DENSE);
    return 0;
}

static int forward(ferry_device_t *dev, const float *p, const size_t *off,
                   const shapes *s, const float *x, int n, const acts *a)
{
    const ferry_device_ops_t *ops = dev->ops;
    int rc = ops->conv2d(dev, &s->conv1, x, p + off[CONV1_W], p + off[CONV1_B], a->a1);
    if (rc)
        return rc;
    ops->relu(dev, a->a1, a->a1, (size_t)n * A1);
    if ((rc = ops->maxpool(dev, &s->pool1, a->a1, a->p1)))
        return rc;
    rc = ops->conv2d(dev, &s->conv2, a->p1, p + off[CONV2_W], p + off[CONV2_B], a->a2);
    if (rc)
        return rc;
    ops->relu(dev, a->a2, a->a2, (size_t)n * A2);
    if ((rc = ops->maxpool(dev, &s->pool2, a->a2, a->p2)))
        return rc;
    /* NCHW pooled maps are already the rows of the dense layer's input. */
    ferry_dense_relu(dev, n, FLAT, DENSE, a->p2, p + off[FC1_W], p + off[FC1_B], a->h);
    ferry_dense(dev, n, DENSE, OUT, a->h, p + off[FC2_W], p + off[FC2_B], a->z);
    return 0;
}

static int loss_grad(ferry_model_ctx_t *mc, const float *p, const ferry_batch_t *b,
                     float *grad, float *loss)
{
    ferry_device_t *dev = mc->dev;
    const ferry_device_ops_t *ops = dev->ops;
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
    shapes s;
    make_shapes(n, &s);
    acts a;
    carve(mc, n, &a);
    if ((rc = forward(dev, p, off, &s, b->x, n, &a)))
        return rc;
    if ((rc = ops->softmax_xent(dev, a.z, b->labels, n, OUT, a.dz, loss, NULL)))
        return rc;

    ferry_dense_grad(dev, n, DENSE, OUT, a.h, p + off[FC2_W], a.dz, a.dh,
                     grad + off[FC2_W], grad + off[FC2_B]);
    ferry_model_grad_ready(mc, FC2_W);
    ferry_model_grad_ready(mc, FC2_B);
    ops->relu_grad(dev, a.dh, a.dh, a.h, (size_t)n * DENSE);
    ferry_dense_grad(dev, n, FLAT, DENSE, a.p2, p + off[FC1_W], a.dh, a.dp2,
                     grad + off[FC1_W], grad + off[FC1_B]);
    ferry_model_grad_ready(mc, FC1_W);
    ferry_model_grad_ready(mc, FC1_B);
    if ((rc = ops->maxpool_grad(dev, &s.pool2, a.a2, a.p2, a.dp2, a.da2)))
        return rc;
    ops->relu_grad(dev, a.da2, a.da2, a.a2, (size_t)n * A2);
    rc = ops->conv2d_grad(dev, &s.conv2, a.p1, p + off[CONV2_W], a.da2, a.dp1,
                          grad + off[CONV2_W], grad + off[CONV2_B]);
    if (rc)
        return rc;
    ferry_model_grad_ready(mc, CONV2_W);
    ferry_model_grad_ready(mc, CONV2_B);
    if ((rc = ops->maxpool_grad(dev, &s.pool1, a.a1, a.p1, a.dp1, a.da1)))
        return rc;
    ops->relu_grad(dev, a.da1, a.da1, a.a1, (size_t)n * A1);
    /* The first layer's input is the data: it needs no gradient. */
    return ops->conv2d_grad(dev, &s.conv1, b->x, p + off[CONV1_W], a.da1, NULL,
                            grad + off[CONV1_W], grad + off[CONV1_B]);
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
    shapes s;
    make_shapes(b->n, &s);
    acts a;
    carve(mc, b->n, &a);
    if ((rc = forward(dev, p, off, &s, b->x, b->n, &a)))
        return rc;
    return dev->ops->softmax_xent(dev, a.z, b->labels, b->n, OUT, NULL, loss, correct);
}

static const ferry_model_t model = {
    FERRY_MODEL_HEADER,
    .kind = FERRY_MODEL_CLASSIFIER,
    .dataset = "fashion-mnist",
    .input = {1, SIDE, SIDE},
    .outputs = OUT,
    .params = params,
    .workspace = workspace,
    .init = init,
    .loss_grad = loss_grad,
    .evaluate = evaluate,
};

FERRY_TASK(.name = "cnn", .model = &model);

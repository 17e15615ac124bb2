/* ferry — the device a model computes on: included by <ferry/task.h>.
 *
 * A device is a table of operations on memory it owns: CPU memory and
 * OpenBLAS on the "cpu" device, GPU memory and CUDA/cuBLAS/cuDNN on a "cuda"
 * device. A model written against this table runs on either without a
 * change. Every pointer an operation takes is device memory (from alloc), but
 * for the host buffers of upload/download and the host results of the loss
 * operations. Operations on one device are issued from one thread at a time
 * and run in order; download and sync wait for what was issued before them.
 *
 * Layouts: matrices are row-major and packed (a rows x cols matrix has
 * leading dimension cols); images are NCHW; convolution filters are
 * [out_channels][in_channels][kh][kw]. All floats are float32. */
#ifndef FERRY_DEVICE_H
#define FERRY_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change to the structs below. */
#define FERRY_DEVICE_ABI_VERSION 1u

enum { FERRY_DEVICE_CPU = 1, FERRY_DEVICE_CUDA = 2 };

typedef struct ferry_device_t ferry_device_t;

/* A 2-D convolution, stride and zero padding the same in both directions.
 * x: [n][c][h][w] -> y: [n][k][oh][ow], w: [k][c][r][s], bias: [k],
 * where oh = (h + 2 pad - r) / stride + 1 and ow likewise with s.
 * Fill it with ferry_conv_shape(). */
typedef struct ferry_conv_t {
    int n, c, h, w; /* input */
    int k, r, s;    /* k filters of c x r x s */
    int pad, stride;
    int oh, ow; /* output */
} ferry_conv_t;

/* Max pooling with a size x size window moved by stride, no padding.
 * x: [n][c][h][w] -> y: [n][c][oh][ow], oh = (h - size) / stride + 1. */
typedef struct ferry_pool_t {
    int n, c, h, w;
    int size, stride;
    int oh, ow;
} ferry_pool_t;

typedef struct ferry_device_ops_t {
    uint32_t version, size;

    /* ---- memory ---- */
    /* `bytes` of device memory, aligned to 64 bytes, or NULL. Not zeroed. */
    void *(*alloc)(ferry_device_t *dev, size_t bytes);
    void (*free)(ferry_device_t *dev, void *p); /* NULL: no-op */
    /* Host -> device, device -> host (waits), device -> device. 0 or FERRY_E*. */
    int (*upload)(ferry_device_t *dev, void *dst, const void *host, size_t bytes);
    int (*download)(ferry_device_t *dev, void *host, const void *src, size_t bytes);
    int (*copy)(ferry_device_t *dev, void *dst, const void *src, size_t bytes);
    /* Waits for every operation issued. 0, or the first asynchronous failure. */
    int (*sync)(ferry_device_t *dev);

    /* ---- vectors (n elements) ---- */
    void (*fill)(ferry_device_t *dev, float *x, float value, size_t n);
    void (*scale)(ferry_device_t *dev, float *x, float a, size_t n); /* x *= a */
    void (*axpy)(ferry_device_t *dev, float *y, float a, const float *x,
                 size_t n); /* y += a x */

    /* ---- dense layers ---- */
    /* C[m x n] = alpha op(A) op(B) + beta C, op(A) m x k, op(B) k x n; A is
     * stored k x m when trans_a, B n x k when trans_b. beta 0 ignores C's old
     * contents (NaN included). */
    void (*gemm)(ferry_device_t *dev, bool trans_a, bool trans_b, int m, int n, int k,
                 float alpha, const float *a, const float *b, float beta, float *c);
    /* y[i][j] += bias[j] for a rows x cols y. */
    void (*bias_add)(ferry_device_t *dev, float *y, const float *bias, int rows,
                     int cols);
    /* dbias[j] = sum_i dy[i][j] (overwrites). */
    void (*bias_grad)(ferry_device_t *dev, float *dbias, const float *dy, int rows,
                      int cols);
    /* y = max(x, 0); y may be x. */
    void (*relu)(ferry_device_t *dev, float *y, const float *x, size_t n);
    /* dx = y > 0 ? dy : 0, y the relu's output; dx may be dy. */
    void (*relu_grad)(ferry_device_t *dev, float *dx, const float *dy, const float *y,
                      size_t n);

    /* ---- losses: results on the host ---- */
    /* Softmax cross-entropy of rows x classes logits against int32 labels
     * (device). *loss = mean over rows; *correct = rows whose largest logit
     * is the label (ties: the first). dlogits (NULL: not wanted) gets the
     * gradient of the mean loss: (softmax - onehot) / rows. FERRY_EINVAL for
     * a label out of range. loss or correct may be NULL. */
    int (*softmax_xent)(ferry_device_t *dev, const float *logits, const int32_t *labels,
                        int rows, int classes, float *dlogits, float *loss, int *correct);
    /* Mean squared error: *loss = sum (pred - target)^2 / (2 rows); dpred
     * (NULL: not wanted) = (pred - target) / rows. rows x cols each. */
    int (*mse)(ferry_device_t *dev, const float *pred, const float *target, int rows,
               int cols, float *dpred, float *loss);

    /* ---- convolutional layers ---- */
    /* y = conv(x, w) + bias (bias NULL: none). */
    int (*conv2d)(ferry_device_t *dev, const ferry_conv_t *s, const float *x,
                  const float *w, const float *bias, float *y);
    /* Gradients from dy: dx (NULL: not wanted), dw and dbias (NULL: none) are
     * overwritten. */
    int (*conv2d_grad)(ferry_device_t *dev, const ferry_conv_t *s, const float *x,
                       const float *w, const float *dy, float *dx, float *dw,
                       float *dbias);
    int (*maxpool)(ferry_device_t *dev, const ferry_pool_t *p, const float *x, float *y);
    /* dx (overwritten) from dy, the pooling's input x and output y; a window's
     * gradient goes to its first maximum. */
    int (*maxpool_grad)(ferry_device_t *dev, const ferry_pool_t *p, const float *x,
                        const float *y, const float *dy, float *dx);

    /* ---- optimizer steps (the runtime's; models need not call them) ---- */
    /* PyTorch's SGD: g' = g + wd p; v = mu v + g' (v = g' when mu is 0);
     * p -= lr v. v may be NULL when mu is 0. */
    void (*sgd_step)(ferry_device_t *dev, float *p, const float *g, float *v, size_t n,
                     float lr, float mu, float wd);
    /* PyTorch's Adam (L2 weight decay), step t >= 1: g' = g + wd p;
     * m = b1 m + (1 - b1) g'; v = b2 v + (1 - b2) g'^2;
     * p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps). */
    void (*adam_step)(ferry_device_t *dev, float *p, const float *g, float *m, float *v,
                      size_t n, float lr, float b1, float b2, float eps, float wd, int t);

    /* ---- added later in ABI 1: check `size` (or call the ferry_ helper
     * below, which does) ---- */
    /* y[i][j] = max(y[i][j] + bias[j], 0) for a rows x cols y: bias_add
     * then relu in one pass over y, the same bits. Both of ferry's devices
     * have it; a model calls ferry_bias_relu(), which does the two ops on
     * a table without it. */
    void (*bias_relu)(ferry_device_t *dev, float *y, const float *bias, int rows,
                      int cols);

    /* ---- added later in ABI 1 for <ferry/nn.h>'s layers: check `size`
     * (FERRY_DEVICE_HAS) ---- */
    /* y = f(x) for activation `act` (FERRY_ACT_*; alpha: leaky ReLU's
     * negative slope, else unused); y may be x. */
    void (*activation)(ferry_device_t *dev, int act, float alpha, float *y, const float *x,
                       size_t n);
    /* dx = dy f'(x), from the activation's input x and output y; dx may be
     * dy (not x or y). */
    void (*activation_grad)(ferry_device_t *dev, int act, float alpha, float *dx,
                            const float *dy, const float *x, const float *y, size_t n);
    /* z = x y, elementwise; z may be x or y. */
    void (*mul)(ferry_device_t *dev, float *z, const float *x, const float *y, size_t n);
    /* Dropout's mask: mask[i] = 0 with probability p, else 1 / (1 - p),
     * from a hash of (seed, i), so that every device draws the same mask. */
    void (*dropout_mask)(ferry_device_t *dev, float *mask, size_t n, float p,
                         uint64_t seed);
    /* Average pooling, the windows of maxpool's (ferry_pool_t). */
    int (*avgpool)(ferry_device_t *dev, const ferry_pool_t *p, const float *x, float *y);
    /* dx (overwritten): each window's gradient spread evenly over it. */
    int (*avgpool_grad)(ferry_device_t *dev, const ferry_pool_t *p, const float *dy,
                        float *dx);
    /* Binary cross-entropy with logits, rows x cols against targets in
     * [0, 1] (device): *loss = the mean over every element (PyTorch's
     * BCEWithLogitsLoss); dlogits (NULL: not wanted) = (sigmoid(z) - t) /
     * (rows cols). loss may be NULL. */
    int (*bce_logits)(ferry_device_t *dev, const float *logits, const float *targets,
                      int rows, int cols, float *dlogits, float *loss);
    /* Layer normalisation of each of `rows` rows of `cols`: y = (x - mean)
     * rstd gamma + beta, rstd = 1 / sqrt(var + eps) (var biased, as
     * PyTorch's); mean and rstd (rows each, device) are kept for the
     * gradient. */
    int (*layernorm)(ferry_device_t *dev, const float *x, const float *gamma,
                     const float *beta, int rows, int cols, float eps, float *y, float *mean,
                     float *rstd);
    /* From dy: dx (NULL: not wanted), dgamma and dbeta (cols each), all
     * overwritten. */
    int (*layernorm_grad)(ferry_device_t *dev, const float *x, const float *gamma,
                          const float *mean, const float *rstd, const float *dy, int rows,
                          int cols, float *dx, float *dgamma, float *dbeta);
    /* Batch normalisation (PyTorch's BatchNorm1d and BatchNorm2d) of `n`
     * samples of `c` channels of `hw` values each ([n][c][hw]: NCHW, or a
     * vector of c features with hw 1), per channel over its n hw values,
     * in training mode: y = (x - mean) rstd gamma + beta with the batch's
     * mean and biased variance, rstd = 1 / sqrt(var + eps); mean and rstd
     * (c each, device) are kept for the gradient; running_mean and
     * running_var (c each) move towards the batch's by `momentum`
     * (r = (1 - momentum) r + momentum b), the variance unbiased (times
     * n hw / (n hw - 1)), as PyTorch does. FERRY_EINVAL when n hw < 2. */
    int (*batchnorm)(ferry_device_t *dev, const float *x, const float *gamma,
                     const float *beta, int n, int c, int hw, float eps, float momentum,
                     float *y, float *mean, float *rstd, float *running_mean,
                     float *running_var);
    /* In evaluation mode: the running statistics instead of the batch's. */
    int (*batchnorm_infer)(ferry_device_t *dev, const float *x, const float *gamma,
                           const float *beta, const float *running_mean,
                           const float *running_var, int n, int c, int hw, float eps,
                           float *y);
    /* The training mode's gradient from dy, with the mean and rstd its
     * forward kept (and its eps): dx (NULL: not wanted), dgamma and dbeta
     * (c each), all overwritten. */
    int (*batchnorm_grad)(ferry_device_t *dev, const float *x, const float *gamma,
                          const float *mean, const float *rstd, const float *dy, int n,
                          int c, int hw, float eps, float *dx, float *dgamma,
                          float *dbeta);
} ferry_device_ops_t;

/* The activations of ferry_device_ops_t.activation. GELU is the exact one
 * (erf), PyTorch's default. */
enum {
    FERRY_ACT_TANH = 1,
    FERRY_ACT_SIGMOID = 2,
    FERRY_ACT_LEAKY_RELU = 3,
    FERRY_ACT_GELU = 4,
};

/* Whether the table `ops` has `member` (one added after it was built is
 * past its `size`) and it is set. */
#define FERRY_DEVICE_HAS(ops, member)                                                    \
    ((ops)->size >= offsetof(ferry_device_ops_t, member) + sizeof((ops)->member) &&      \
     (ops)->member != NULL)

struct ferry_device_t {
    uint32_t version, size;  /* FERRY_DEVICE_ABI_VERSION, sizeof(ferry_device_t) */
    int kind;                /* FERRY_DEVICE_CPU or FERRY_DEVICE_CUDA */
    const char *name;        /* "cpu", "cuda:0" */
    const char *description; /* "cpu: AMD EPYC 7B13 (2 cores), OpenBLAS 0.3.21" */
    const ferry_device_ops_t *ops;
    /* On a cuda device, the library handles its operations use:
     * cudaStream_t, cublasHandle_t, cudnnHandle_t. NULL on the cpu. */
    void *stream, *cublas, *cudnn;
    void *impl; /* the backend's; do not touch */
};

/* A dense layer's bias and ReLU: the device's fused op when it has one
 * (a runtime older than the member has a smaller table), else bias_add and
 * relu. */
static inline void ferry_bias_relu(ferry_device_t *dev, float *y, const float *bias,
                                   int rows, int cols)
{
    const ferry_device_ops_t *o = dev->ops;
    if (o->size >= offsetof(ferry_device_ops_t, bias_relu) + sizeof o->bias_relu &&
        o->bias_relu) {
        o->bias_relu(dev, y, bias, rows, cols);
        return;
    }
    o->bias_add(dev, y, bias, rows, cols);
    if (rows > 0 && cols > 0)
        o->relu(dev, y, y, (size_t)rows * (size_t)cols);
}

/* Fills in the output size of a convolution; false when it is empty or a
 * size is not positive. */
static inline bool ferry_conv_shape(ferry_conv_t *s)
{
    if (s->n <= 0 || s->c <= 0 || s->h <= 0 || s->w <= 0 || s->k <= 0 || s->r <= 0 ||
        s->s <= 0 || s->pad < 0 || s->stride <= 0)
        return false;
    s->oh = (s->h + 2 * s->pad - s->r) / s->stride + 1;
    s->ow = (s->w + 2 * s->pad - s->s) / s->stride + 1;
    return s->oh > 0 && s->ow > 0;
}

static inline bool ferry_pool_shape(ferry_pool_t *p)
{
    if (p->n <= 0 || p->c <= 0 || p->h < p->size || p->w < p->size || p->size <= 0 ||
        p->stride <= 0)
        return false;
    p->oh = (p->h - p->size) / p->stride + 1;
    p->ow = (p->w - p->size) / p->stride + 1;
    return true;
}

#ifdef __cplusplus
}
#endif

#endif

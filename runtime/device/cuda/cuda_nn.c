/* The ops <ferry/nn.h>'s layers added: activations, the elementwise product,
 * dropout's mask, average pooling, binary cross-entropy and layer
 * normalisation, each a kernel of
 * cuda_kernels.cu (GELU and leaky ReLU are not among cuDNN's activations,
 * and one launch of ours does the rest as cheaply). */
#include "cuda_int.h"

static void launch(ferry_device_t *dev, const char *what, size_t n,
                   cudaError_t (*fn)(cuda_dev_t *d, void *arg), void *arg)
{
    cuda_dev_t *d = cuda_dev(dev);
    if (n == 0)
        return;
    int rc = cuda_enter(d);
    if (rc == 0) {
        cudaError_t e = fn(d, arg);
        if (e != cudaSuccess)
            rc = cuda_rt_fail(d, what, e);
    }
    if (rc)
        cuda_defer(d, rc);
}

typedef struct ew {
    int act;
    float alpha, p;
    uint64_t seed;
    float *out;
    const float *a, *b, *c;
    size_t n;
} ew;

static cudaError_t act_fn(cuda_dev_t *d, void *arg)
{
    ew *e = arg;
    return cuda_k_activation(d->stream, e->act, e->alpha, e->out, e->a, e->n);
}

static cudaError_t act_grad_fn(cuda_dev_t *d, void *arg)
{
    ew *e = arg;
    return cuda_k_activation_grad(d->stream, e->act, e->alpha, e->out, e->a, e->b, e->c,
                                  e->n);
}

static cudaError_t mul_fn(cuda_dev_t *d, void *arg)
{
    ew *e = arg;
    return cuda_k_mul(d->stream, e->out, e->a, e->b, e->n);
}

static cudaError_t mask_fn(cuda_dev_t *d, void *arg)
{
    ew *e = arg;
    return cuda_k_dropout_mask(d->stream, e->out, e->n, e->p, e->seed);
}

void cuda_activation(ferry_device_t *dev, int act, float alpha, float *y, const float *x,
                     size_t n)
{
    ew e = {.act = act, .alpha = alpha, .out = y, .a = x, .n = n};
    launch(dev, "activation kernel", n, act_fn, &e);
}

void cuda_activation_grad(ferry_device_t *dev, int act, float alpha, float *dx,
                          const float *dy, const float *x, const float *y, size_t n)
{
    ew e = {.act = act, .alpha = alpha, .out = dx, .a = dy, .b = x, .c = y, .n = n};
    launch(dev, "activation_grad kernel", n, act_grad_fn, &e);
}

void cuda_mul(ferry_device_t *dev, float *z, const float *x, const float *y, size_t n)
{
    ew e = {.out = z, .a = x, .b = y, .n = n};
    launch(dev, "mul kernel", n, mul_fn, &e);
}

void cuda_dropout_mask(ferry_device_t *dev, float *mask, size_t n, float p, uint64_t seed)
{
    ew e = {.out = mask, .n = n, .p = p, .seed = seed};
    launch(dev, "dropout_mask kernel", n, mask_fn, &e);
}

static int pool_check(cuda_dev_t *d, const ferry_pool_t *s)
{
    ferry_pool_t t = *s;
    if (!ferry_pool_shape(&t) || t.oh != s->oh || t.ow != s->ow)
        return cuda_einval(d, "avgpool: a shape ferry_pool_shape does not accept");
    return cuda_enter(d);
}

int cuda_avgpool(ferry_device_t *dev, const ferry_pool_t *s, const float *x, float *y)
{
    cuda_dev_t *d = cuda_dev(dev);
    int rc = pool_check(d, s);
    if (rc)
        return rc;
    cudaError_t e = cuda_k_avgpool(d->stream, s->n, s->c, s->h, s->w, s->size, s->stride,
                                   s->oh, s->ow, x, y);
    return e == cudaSuccess ? 0 : cuda_rt_fail(d, "avgpool kernel", e);
}

int cuda_avgpool_grad(ferry_device_t *dev, const ferry_pool_t *s, const float *dy,
                      float *dx)
{
    cuda_dev_t *d = cuda_dev(dev);
    int rc = pool_check(d, s);
    if (rc)
        return rc;
    cudaError_t e = cuda_k_avgpool_grad(d->stream, s->n, s->c, s->h, s->w, s->size,
                                        s->stride, s->oh, s->ow, dy, dx);
    return e == cudaSuccess ? 0 : cuda_rt_fail(d, "avgpool_grad kernel", e);
}

int cuda_bce_logits(ferry_device_t *dev, const float *logits, const float *targets,
                    int rows, int cols, float *dlogits, float *loss)
{
    cuda_dev_t *d = cuda_dev(dev);
    if (rows <= 0 || cols <= 0)
        return cuda_einval(d, "bce_logits: rows and cols must be positive");
    size_t n = (size_t)rows * (size_t)cols;
    return cuda_sum_loss(d, cuda_k_bce_logits, logits, targets, n, 1.0f / (float)n,
                         dlogits, (double)n, loss);
}

int cuda_layernorm(ferry_device_t *dev, const float *x, const float *gamma,
                   const float *beta, int rows, int cols, float eps, float *y,
                   float *mean, float *rstd)
{
    cuda_dev_t *d = cuda_dev(dev);
    if (rows <= 0 || cols <= 0)
        return cuda_einval(d, "layernorm: rows and cols must be positive");
    int rc = cuda_enter(d);
    if (rc)
        return rc;
    cudaError_t e =
        cuda_k_layernorm(d->stream, x, gamma, beta, rows, cols, eps, y, mean, rstd);
    return e == cudaSuccess ? 0 : cuda_rt_fail(d, "layernorm kernel", e);
}

int cuda_layernorm_grad(ferry_device_t *dev, const float *x, const float *gamma,
                        const float *mean, const float *rstd, const float *dy, int rows,
                        int cols, float *dx, float *dgamma, float *dbeta)
{
    cuda_dev_t *d = cuda_dev(dev);
    if (rows <= 0 || cols <= 0)
        return cuda_einval(d, "layernorm_grad: rows and cols must be positive");
    int rc = cuda_enter(d);
    if (rc)
        return rc;
    cudaError_t e = cuda_k_layernorm_grad(d->stream, x, gamma, mean, rstd, dy, rows, cols,
                                          dx, dgamma, dbeta);
    return e == cudaSuccess ? 0 : cuda_rt_fail(d, "layernorm_grad kernel", e);
}

/* Batch normalisation on cuDNN (its spatial mode: one mean and variance a
 * channel over n x h x w; a vector of c features is c channels of 1 x 1).
 * cuDNN keeps the running variance unbiased and saves 1 / sqrt(var + eps),
 * the table's mean and rstd, for its backward. The two descriptors are made
 * for each call: a handful of microseconds beside the pass itself. */
#include "cuda_int.h"

static const float one = 1.0f, zero = 0.0f;

typedef struct bn_desc {
    cudnnTensorDescriptor_t x, p; /* [n][c][hw][1], and [1][c][1][1] */
} bn_desc;

static void bn_drop(bn_desc *b)
{
    if (b->x)
        cudnnDestroyTensorDescriptor(b->x);
    if (b->p)
        cudnnDestroyTensorDescriptor(b->p);
}

static int bn_make(cuda_dev_t *d, bn_desc *b, int n, int c, int hw)
{
    int rc = 0;
    *b = (bn_desc){0};
    if (n <= 0 || c <= 0 || hw <= 0)
        return cuda_einval(d, "batchnorm: n, c and hw must be positive");
    if ((rc = cuda_enter(d)) != 0)
        return rc;
    CUDA_DNN_TRY(d, cudnnCreateTensorDescriptor(&b->x), out);
    CUDA_DNN_TRY(d, cudnnCreateTensorDescriptor(&b->p), out);
    CUDA_DNN_TRY(d,
                 cudnnSetTensor4dDescriptor(b->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n,
                                            c, hw, 1),
                 out);
    CUDA_DNN_TRY(
        d,
        cudnnSetTensor4dDescriptor(b->p, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, c, 1, 1),
        out);
out:
    if (rc)
        bn_drop(b);
    return rc;
}

int cuda_batchnorm(ferry_device_t *dev, const float *x, const float *gamma,
                   const float *beta, int n, int c, int hw, float eps, float momentum,
                   float *y, float *mean, float *rstd, float *running_mean,
                   float *running_var)
{
    cuda_dev_t *d = cuda_dev(dev);
    if ((size_t)n * (size_t)(hw > 0 ? hw : 0) < 2)
        return cuda_einval(d, "batchnorm: training needs two values a channel");
    bn_desc b;
    int rc = bn_make(d, &b, n, c, hw);
    if (rc)
        return rc;
    CUDA_DNN_TRY(d,
                 cudnnBatchNormalizationForwardTraining(
                     d->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, b.x, x, b.x, y, b.p,
                     gamma, beta, momentum, running_mean, running_var, eps, mean, rstd),
                 out);
out:
    bn_drop(&b);
    return rc;
}

int cuda_batchnorm_infer(ferry_device_t *dev, const float *x, const float *gamma,
                         const float *beta, const float *running_mean,
                         const float *running_var, int n, int c, int hw, float eps,
                         float *y)
{
    cuda_dev_t *d = cuda_dev(dev);
    bn_desc b;
    int rc = bn_make(d, &b, n, c, hw);
    if (rc)
        return rc;
    CUDA_DNN_TRY(d,
                 cudnnBatchNormalizationForwardInference(
                     d->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, b.x, x, b.x, y, b.p,
                     gamma, beta, running_mean, running_var, eps),
                 out);
out:
    bn_drop(&b);
    return rc;
}

int cuda_batchnorm_grad(ferry_device_t *dev, const float *x, const float *gamma,
                        const float *mean, const float *rstd, const float *dy, int n,
                        int c, int hw, float eps, float *dx, float *dgamma, float *dbeta)
{
    cuda_dev_t *d = cuda_dev(dev);
    bn_desc b;
    int rc = bn_make(d, &b, n, c, hw);
    if (rc)
        return rc;
    /* cuDNN always writes dx: when nobody wants it, into the workspace. */
    if (!dx) {
        size_t bytes = (size_t)n * (size_t)c * (size_t)hw * sizeof(float);
        if ((rc = cuda_grow(d, &d->ws, &d->ws_bytes, bytes)) != 0)
            goto out;
        dx = d->ws;
    }
    CUDA_DNN_TRY(d,
                 cudnnBatchNormalizationBackward(
                     d->dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, b.x, x,
                     b.x, dy, b.x, dx, b.p, gamma, dgamma, dbeta, eps, mean, rstd),
                 out);
out:
    bn_drop(&b);
    return rc;
}

/* The ops that run the kernels of cuda_kernels.cu, and the ops table. The
 * losses reduce on the device and download one small result, so a training
 * step moves two numbers to the host, not a row per sample. */
#include <math.h>
#include <string.h>

#include "cuda_int.h"

static void defer_launch(cuda_dev_t *d, const char *what, cudaError_t e)
{
    if (e != cudaSuccess)
        cuda_defer(d, cuda_rt_fail(d, what, e));
}

void cuda_fill(ferry_device_t *dev, float *x, float value, size_t n)
{
    cuda_dev_t *d = cuda_dev(dev);
    int rc = 0;
    if (n == 0)
        return;
    if ((rc = cuda_enter(d)) != 0)
        goto out;
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    if (bits == 0) /* +0.0f is all zero bytes: the copy engine does it */
        CUDA_RT_TRY(d, cudaMemsetAsync(x, 0, n * sizeof(float), d->stream), out);
    else
        CUDA_RT_TRY(d, cuda_k_fill(d->stream, x, value, n), out);
out:
    cuda_defer(d, rc);
}

/* bias_add, with the ReLU fused when `relu`: one launch either way. */
static void bias(ferry_device_t *dev, float *y, const float *b, int rows, int cols,
                 bool relu)
{
    cuda_dev_t *d = cuda_dev(dev);
    if (rows < 0 || cols < 0) {
        cuda_defer(d, cuda_einval(d, relu ? "bias_relu: a negative size"
                                          : "bias_add: a negative size"));
        return;
    }
    if (rows == 0 || cols == 0)
        return;
    int rc = cuda_enter(d);
    if (rc != 0)
        cuda_defer(d, rc);
    else if (relu)
        defer_launch(d, "bias_relu kernel",
                     cuda_k_bias_relu(d->stream, y, b, rows, cols));
    else
        defer_launch(d, "bias_add kernel", cuda_k_bias_add(d->stream, y, b, rows, cols));
}

void cuda_bias_add(ferry_device_t *dev, float *y, const float *b, int rows, int cols)
{
    bias(dev, y, b, rows, cols, false);
}

void cuda_bias_relu(ferry_device_t *dev, float *y, const float *b, int rows, int cols)
{
    bias(dev, y, b, rows, cols, true);
}

void cuda_relu(ferry_device_t *dev, float *y, const float *x, size_t n)
{
    cuda_dev_t *d = cuda_dev(dev);
    if (n == 0)
        return;
    int rc = cuda_enter(d);
    if (rc != 0)
        cuda_defer(d, rc);
    else
        defer_launch(d, "relu kernel", cuda_k_relu(d->stream, y, x, n));
}

void cuda_relu_grad(ferry_device_t *dev, float *dx, const float *dy, const float *y,
                    size_t n)
{
    cuda_dev_t *d = cuda_dev(dev);
    if (n == 0)
        return;
    int rc = cuda_enter(d);
    if (rc != 0)
        cuda_defer(d, rc);
    else
        defer_launch(d, "relu_grad kernel", cuda_k_relu_grad(d->stream, dx, dy, y, n));
}

/* Queues nothing more: waits for the loss's kernels and reads their result
 * (with the failure of any op issued before, as download reports it). */
static int read_loss(cuda_dev_t *d, cuda_loss_t *res)
{
    return cuda_download(&d->pub, res, d->result, sizeof *res);
}

int cuda_softmax_xent(ferry_device_t *dev, const float *logits, const int32_t *labels,
                      int rows, int classes, float *dlogits, float *loss, int *correct)
{
    cuda_dev_t *d = cuda_dev(dev);
    if (rows <= 0 || classes <= 0)
        return cuda_einval(d, "softmax_xent: rows and classes must be positive");
    int rc = cuda_enter(d);
    if (rc != 0)
        return rc;
    /* Per row: a double loss, then an int. */
    size_t bytes = (size_t)rows * (sizeof(double) + sizeof(int));
    if ((rc = cuda_grow(d, &d->scratch, &d->scratch_bytes, bytes)) != 0)
        return rc;
    double *row_loss = d->scratch;
    int *row_correct = (int *)(row_loss + rows);
    CUDA_RT_TRY(d,
                cuda_k_softmax_xent(d->stream, logits, labels, rows, classes, dlogits,
                                    row_loss, row_correct, d->result),
                out);
    if (d->capturing)
        return cuda_capture_loss(d, loss, correct, (double)rows);
    cuda_loss_t res;
    if ((rc = read_loss(d, &res)) != 0)
        return rc;
    if (res.bad > 0)
        return cuda_einval(d, "softmax_xent: a label outside [0, classes)");
    if (loss)
        *loss = (float)(res.sum / rows);
    if (correct)
        *correct = res.correct;
out:
    return rc;
}

int cuda_sum_loss(cuda_dev_t *d, cuda_sum_kernel kernel, const float *a, const float *b,
                  size_t n, float scale, float *grad, double div, float *loss)
{
    int rc = cuda_enter(d);
    if (rc != 0)
        return rc;
    if ((rc = cuda_grow(d, &d->scratch, &d->scratch_bytes,
                        CUDA_MSE_PARTS * sizeof(double))) != 0)
        return rc;
    CUDA_RT_TRY(d, kernel(d->stream, a, b, n, scale, grad, d->scratch, d->result), out);
    if (d->capturing)
        return cuda_capture_loss(d, loss, NULL, div);
    cuda_loss_t res;
    if ((rc = read_loss(d, &res)) != 0)
        return rc;
    if (loss)
        *loss = (float)(res.sum / div);
out:
    return rc;
}

int cuda_mse(ferry_device_t *dev, const float *pred, const float *target, int rows,
             int cols, float *dpred, float *loss)
{
    cuda_dev_t *d = cuda_dev(dev);
    if (rows <= 0 || cols <= 0)
        return cuda_einval(d, "mse: rows and cols must be positive");
    return cuda_sum_loss(d, cuda_k_mse, pred, target, (size_t)rows * cols,
                         1.0f / (float)rows, dpred, 2.0 * rows, loss);
}

void cuda_sgd_step(ferry_device_t *dev, float *p, const float *g, float *v, size_t n,
                   float lr, float mu, float wd)
{
    cuda_dev_t *d = cuda_dev(dev);
    if (n == 0)
        return;
    int rc = cuda_enter(d);
    if (rc != 0) {
        cuda_defer(d, rc);
        return;
    }
    /* No momentum leaves v alone, as the cpu backend does; v starts at zero
     * (the runtime clears it), so the first step leaves v = g'. */
    defer_launch(d, "sgd kernel",
                 cuda_k_sgd(d->stream, p, g, mu == 0.0f ? NULL : v, n, lr, mu, wd));
}

void cuda_adam_step(ferry_device_t *dev, float *p, const float *g, float *m, float *v,
                    size_t n, float lr, float b1, float b2, float eps, float wd, int t)
{
    cuda_dev_t *d = cuda_dev(dev);
    if (n == 0)
        return;
    int rc = cuda_enter(d);
    if (rc != 0) {
        cuda_defer(d, rc);
        return;
    }
    if (t < 1) /* as the cpu backend: the first step */
        t = 1;
    /* The bias corrections in double: b2^t for t in the thousands is where
     * float's pow loses digits. */
    float step = (float)(lr / (1.0 - pow(b1, t)));
    float bc2_sqrt = (float)sqrt(1.0 - pow(b2, t));
    defer_launch(d, "adam kernel",
                 cuda_k_adam(d->stream, p, g, m, v, n, b1, b2, eps, wd, step, bc2_sqrt));
}

/* Convolutions and pooling on cuDNN's descriptor API. Each shape keeps its
 * descriptors and chosen algorithms in a small cache, so a training step
 * asks cuDNN's heuristics once per layer, not once per call.
 *
 * Which algorithm runs each direction is cuda_algo.c's choice: never a
 * transform (FFT, Winograd) on float32, deterministic first. At the default
 * precision (fp32) the convolutions run in CUDNN_FMA_MATH: plain float32, no
 * TF32 tensor cores, so the cuda and cpu backends agree to float rounding.
 *
 * maxpool_grad is a kernel of ours: cuDNN sends a window's gradient to one
 * of its maxima, not documented which, and the contract is the first. */
#include <stddef.h>

#include "cuda_int.h"

static const float one = 1.0f, zero = 0.0f;

static int bad_shape(cuda_dev_t *d, const char *what)
{
    return cuda_einval(d, what);
}

/* ---- convolution plans ---------------------------------------------------- */

static bool same_conv(const ferry_conv_t *a, const ferry_conv_t *b)
{
    return a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w && a->k == b->k &&
           a->r == b->r && a->s == b->s && a->pad == b->pad && a->stride == b->stride;
}

static void conv_plan_drop(cuda_conv_plan_t *p)
{
    if (p->x)
        cudnnDestroyTensorDescriptor(p->x);
    if (p->y)
        cudnnDestroyTensorDescriptor(p->y);
    if (p->bias)
        cudnnDestroyTensorDescriptor(p->bias);
    if (p->w)
        cudnnDestroyFilterDescriptor(p->w);
    if (p->conv)
        cudnnDestroyConvolutionDescriptor(p->conv);
    *p = (cuda_conv_plan_t){0};
}

static int conv_plan_make(cuda_dev_t *d, cuda_conv_plan_t *p, const ferry_conv_t *s)
{
    int rc = 0;
    p->shape = *s;
    CUDA_DNN_TRY(d, cudnnCreateTensorDescriptor(&p->x), out);
    CUDA_DNN_TRY(d, cudnnCreateTensorDescriptor(&p->y), out);
    CUDA_DNN_TRY(d, cudnnCreateTensorDescriptor(&p->bias), out);
    CUDA_DNN_TRY(d, cudnnCreateFilterDescriptor(&p->w), out);
    CUDA_DNN_TRY(d, cudnnCreateConvolutionDescriptor(&p->conv), out);
    CUDA_DNN_TRY(d,
                 cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                            s->n, s->c, s->h, s->w),
                 out);
    CUDA_DNN_TRY(d,
                 cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                            s->n, s->k, s->oh, s->ow),
                 out);
    CUDA_DNN_TRY(d,
                 cudnnSetTensor4dDescriptor(p->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                            1, s->k, 1, 1),
                 out);
    CUDA_DNN_TRY(d,
                 cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                            s->k, s->c, s->r, s->s),
                 out);
    CUDA_DNN_TRY(d,
                 cudnnSetConvolution2dDescriptor(p->conv, s->pad, s->pad, s->stride,
                                                 s->stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                                 CUDNN_DATA_FLOAT),
                 out);
    CUDA_DNN_TRY(d, cudnnSetConvolutionMathType(p->conv, CUDNN_FMA_MATH), out);
    int n, k, oh, ow;
    CUDA_DNN_TRY(
        d, cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &n, &k, &oh, &ow),
        out);
    if (n != s->n || k != s->k || oh != s->oh || ow != s->ow)
        rc = bad_shape(d, "conv2d: cuDNN's output size differs from ferry_conv_shape's");
out:
    return rc;
}

static int conv_plan(cuda_dev_t *d, const ferry_conv_t *s, cuda_conv_plan_t **out)
{
    ferry_conv_t t = *s;
    if (!ferry_conv_shape(&t) || t.oh != s->oh || t.ow != s->ow)
        return bad_shape(d, "conv2d: a shape ferry_conv_shape does not accept");
    for (int i = 0; i < CUDA_PLANS; i++) {
        if (d->conv[i].used && same_conv(&d->conv[i].shape, &t)) {
            *out = &d->conv[i];
            return 0;
        }
    }
    cuda_conv_plan_t *p = &d->conv[d->conv_next++ % CUDA_PLANS];
    conv_plan_drop(p);
    int rc = conv_plan_make(d, p, &t);
    if (rc != 0) {
        conv_plan_drop(p);
        return rc;
    }
    p->used = true;
    *out = p;
    return 0;
}

static int workspace(cuda_dev_t *d, size_t bytes)
{
    return cuda_grow(d, &d->ws, &d->ws_bytes, bytes);
}

/* The direction's algorithm, chosen on first use, with the descriptor set
 * to its math type and the workspace grown to fit. */
static int ready(cuda_dev_t *d, cuda_conv_plan_t *p, cuda_conv_dir_t dir)
{
    int rc = 0;
    /* Choosing runs and times candidates: not something to record. */
    if (!p->algo[dir].have && d->capturing)
        return cuda_capture_fail(d, "a convolution whose algorithm is not chosen yet");
    if (!p->algo[dir].have && (rc = cuda_conv_choose(d, p, dir)) != 0)
        return rc;
    CUDA_DNN_TRY(d, cudnnSetConvolutionMathType(p->conv, p->algo[dir].math), out);
    rc = workspace(d, p->algo[dir].ws);
out:
    return rc;
}

/* Elements of a convolution's input, filter and output. */
static size_t elems_x(const ferry_conv_t *s)
{
    return (size_t)s->n * s->c * s->h * s->w;
}

static size_t elems_w(const ferry_conv_t *s)
{
    return (size_t)s->k * s->c * s->r * s->s;
}

static size_t elems_y(const ferry_conv_t *s)
{
    return (size_t)s->n * s->k * s->oh * s->ow;
}

/* The bf16 precision rounds a convolution's two inputs to bfloat16 (kept in
 * float32 buffers) and runs the float32 convolution on them with tensor-core
 * math allowed: a bfloat16 is exact in TF32, so the products are the
 * bfloat16 products, summed in float32 — what a CUDNN_DATA_BFLOAT16
 * convolution with float accumulation computes, with float32 traffic. */
int cuda_conv2d(ferry_device_t *dev, const ferry_conv_t *s, const float *x,
                const float *w, const float *bias, float *y)
{
    cuda_dev_t *d = cuda_dev(dev);
    cuda_conv_plan_t *p;
    int rc = cuda_enter(d);
    if (rc != 0 || (rc = conv_plan(d, s, &p)) != 0)
        return rc;
    if ((rc = ready(d, p, CUDA_CONV_FWD)) != 0)
        return rc;
    if (d->precision == CUDA_PREC_BF16) {
        const void *rx, *rw;
        if ((rc = cuda_bf16_copy(d, 0, x, elems_x(s), false, &rx)) != 0 ||
            (rc = cuda_bf16_copy(d, 1, w, elems_w(s), false, &rw)) != 0)
            return rc;
        x = rx;
        w = rw;
    }
    CUDA_DNN_TRY(
        d,
        cudnnConvolutionForward(d->dnn, &one, p->x, x, p->w, w, p->conv,
                                (cudnnConvolutionFwdAlgo_t)p->algo[CUDA_CONV_FWD].algo,
                                d->ws, d->ws_bytes, &zero, p->y, y),
        out);
    if (bias)
        CUDA_DNN_TRY(d, cudnnAddTensor(d->dnn, &one, p->bias, bias, &one, p->y, y), out);
out:
    return rc;
}

int cuda_conv2d_grad(ferry_device_t *dev, const ferry_conv_t *s, const float *x,
                     const float *w, const float *dy, float *dx, float *dw, float *dbias)
{
    cuda_dev_t *d = cuda_dev(dev);
    cuda_conv_plan_t *p;
    int rc = cuda_enter(d);
    if (rc != 0 || (rc = conv_plan(d, s, &p)) != 0)
        return rc;
    /* The bias gradient sums dy in float32; the two products read
     * bfloat16-rounded copies. */
    const float *dy32 = dy;
    if (d->precision == CUDA_PREC_BF16) {
        const void *rdy, *rw, *rx;
        if ((rc = cuda_bf16_copy(d, 2, dy, elems_y(s), false, &rdy)) != 0 ||
            (dx && (rc = cuda_bf16_copy(d, 1, w, elems_w(s), false, &rw)) != 0) ||
            (dw && (rc = cuda_bf16_copy(d, 0, x, elems_x(s), false, &rx)) != 0))
            return rc;
        dy = rdy;
        if (dx)
            w = rw;
        if (dw)
            x = rx;
    }
    if (dx) {
        if ((rc = ready(d, p, CUDA_CONV_DATA)) != 0)
            return rc;
        CUDA_DNN_TRY(d,
                     cudnnConvolutionBackwardData(
                         d->dnn, &one, p->w, w, p->y, dy, p->conv,
                         (cudnnConvolutionBwdDataAlgo_t)p->algo[CUDA_CONV_DATA].algo,
                         d->ws, d->ws_bytes, &zero, p->x, dx),
                     out);
    }
    if (dw) {
        if ((rc = ready(d, p, CUDA_CONV_FILTER)) != 0)
            return rc;
        CUDA_DNN_TRY(d,
                     cudnnConvolutionBackwardFilter(
                         d->dnn, &one, p->x, x, p->y, dy, p->conv,
                         (cudnnConvolutionBwdFilterAlgo_t)p->algo[CUDA_CONV_FILTER].algo,
                         d->ws, d->ws_bytes, &zero, p->w, dw),
                     out);
    }
    if (dbias)
        CUDA_DNN_TRY(
            d,
            cudnnConvolutionBackwardBias(d->dnn, &one, p->y, dy32, &zero, p->bias, dbias),
            out);
out:
    return rc;
}

/* ---- pooling -------------------------------------------------------------- */

static bool same_pool(const ferry_pool_t *a, const ferry_pool_t *b)
{
    return a->n == b->n && a->c == b->c && a->h == b->h && a->w == b->w &&
           a->size == b->size && a->stride == b->stride;
}

static void pool_plan_drop(cuda_pool_plan_t *p)
{
    if (p->x)
        cudnnDestroyTensorDescriptor(p->x);
    if (p->y)
        cudnnDestroyTensorDescriptor(p->y);
    if (p->pool)
        cudnnDestroyPoolingDescriptor(p->pool);
    *p = (cuda_pool_plan_t){0};
}

static int pool_plan_make(cuda_dev_t *d, cuda_pool_plan_t *p, const ferry_pool_t *s)
{
    int rc = 0;
    p->shape = *s;
    CUDA_DNN_TRY(d, cudnnCreateTensorDescriptor(&p->x), out);
    CUDA_DNN_TRY(d, cudnnCreateTensorDescriptor(&p->y), out);
    CUDA_DNN_TRY(d, cudnnCreatePoolingDescriptor(&p->pool), out);
    CUDA_DNN_TRY(d,
                 cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                            s->n, s->c, s->h, s->w),
                 out);
    CUDA_DNN_TRY(d,
                 cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                            s->n, s->c, s->oh, s->ow),
                 out);
    /* NaN propagates, so a NaN in a layer's input reaches the loss, where
     * training stops and says so. */
    CUDA_DNN_TRY(d,
                 cudnnSetPooling2dDescriptor(p->pool, CUDNN_POOLING_MAX,
                                             CUDNN_PROPAGATE_NAN, s->size, s->size, 0, 0,
                                             s->stride, s->stride),
                 out);
    int n, c, oh, ow;
    CUDA_DNN_TRY(d, cudnnGetPooling2dForwardOutputDim(p->pool, p->x, &n, &c, &oh, &ow),
                 out);
    if (n != s->n || c != s->c || oh != s->oh || ow != s->ow)
        rc = bad_shape(d, "maxpool: cuDNN's output size differs from ferry_pool_shape's");
out:
    return rc;
}

static int check_pool(cuda_dev_t *d, const ferry_pool_t *s, ferry_pool_t *t)
{
    *t = *s;
    if (!ferry_pool_shape(t) || t->oh != s->oh || t->ow != s->ow)
        return bad_shape(d, "maxpool: a shape ferry_pool_shape does not accept");
    return 0;
}

int cuda_maxpool(ferry_device_t *dev, const ferry_pool_t *s, const float *x, float *y)
{
    cuda_dev_t *d = cuda_dev(dev);
    ferry_pool_t t;
    int rc = cuda_enter(d);
    if (rc != 0 || (rc = check_pool(d, s, &t)) != 0)
        return rc;
    cuda_pool_plan_t *p = NULL;
    for (int i = 0; i < CUDA_PLANS && !p; i++)
        if (d->pool[i].used && same_pool(&d->pool[i].shape, &t))
            p = &d->pool[i];
    if (!p) {
        p = &d->pool[d->pool_next++ % CUDA_PLANS];
        pool_plan_drop(p);
        if ((rc = pool_plan_make(d, p, &t)) != 0) {
            pool_plan_drop(p);
            return rc;
        }
        p->used = true;
    }
    CUDA_DNN_TRY(d, cudnnPoolingForward(d->dnn, p->pool, &one, p->x, x, &zero, p->y, y),
                 out);
out:
    return rc;
}

int cuda_maxpool_grad(ferry_device_t *dev, const ferry_pool_t *s, const float *x,
                      const float *y, const float *dy, float *dx)
{
    cuda_dev_t *d = cuda_dev(dev);
    ferry_pool_t t;
    int rc = cuda_enter(d);
    if (rc != 0 || (rc = check_pool(d, s, &t)) != 0)
        return rc;
    cudaError_t e = cuda_k_maxpool_grad(d->stream, t.n, t.c, t.h, t.w, t.size, t.stride,
                                        t.oh, t.ow, x, y, dy, dx);
    return e == cudaSuccess ? 0 : cuda_rt_fail(d, "maxpool_grad kernel", e);
}

void cuda_dnn_forget_algos(cuda_dev_t *d)
{
    for (int i = 0; i < CUDA_PLANS; i++)
        for (int dir = 0; dir < 3; dir++)
            d->conv[i].algo[dir].have = false;
}

void cuda_dnn_fini(cuda_dev_t *d)
{
    for (int i = 0; i < CUDA_PLANS; i++) {
        conv_plan_drop(&d->conv[i]);
        pool_plan_drop(&d->pool[i]);
    }
}

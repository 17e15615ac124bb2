/* The elementwise layers of <ferry/nn.h> (activations, dropout's mask and
 * product), average pooling and binary cross-entropy: plain loops that gcc
 * vectorises where the math allows (tanhf, erff and expf are libm calls). */
#include <math.h>

#include <ferry/error.h>

#include "cpu_int.h"
#include "runtime/device/device_hash.h"

void cpu_activation(ferry_device_t *dev, int act, float alpha, float *y, const float *x,
                    size_t n)
{
    (void)dev;
    switch (act) {
    case FERRY_ACT_TANH:
        for (size_t i = 0; i < n; i++)
            y[i] = tanhf(x[i]);
        break;
    case FERRY_ACT_SIGMOID:
        for (size_t i = 0; i < n; i++)
            y[i] = 1.0f / (1.0f + expf(-x[i]));
        break;
    case FERRY_ACT_LEAKY_RELU:
        for (size_t i = 0; i < n; i++)
            y[i] = x[i] > 0 ? x[i] : alpha * x[i];
        break;
    case FERRY_ACT_GELU:
        for (size_t i = 0; i < n; i++)
            y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float)M_SQRT1_2));
        break;
    default:
        break;
    }
}

void cpu_activation_grad(ferry_device_t *dev, int act, float alpha, float *dx,
                         const float *dy, const float *x, const float *y, size_t n)
{
    (void)dev;
    switch (act) {
    case FERRY_ACT_TANH:
        for (size_t i = 0; i < n; i++)
            dx[i] = dy[i] * (1.0f - y[i] * y[i]);
        break;
    case FERRY_ACT_SIGMOID:
        for (size_t i = 0; i < n; i++)
            dx[i] = dy[i] * y[i] * (1.0f - y[i]);
        break;
    case FERRY_ACT_LEAKY_RELU:
        for (size_t i = 0; i < n; i++)
            dx[i] = x[i] > 0 ? dy[i] : alpha * dy[i];
        break;
    case FERRY_ACT_GELU: {
        const float inv_sqrt_2pi = 0.3989422804014327f;
        for (size_t i = 0; i < n; i++) {
            float cdf = 0.5f * (1.0f + erff(x[i] * (float)M_SQRT1_2));
            dx[i] = dy[i] * (cdf + x[i] * inv_sqrt_2pi * expf(-0.5f * x[i] * x[i]));
        }
        break;
    }
    default:
        break;
    }
}

void cpu_mul(ferry_device_t *dev, float *z, const float *x, const float *y, size_t n)
{
    (void)dev;
    for (size_t i = 0; i < n; i++)
        z[i] = x[i] * y[i];
}

void cpu_dropout_mask(ferry_device_t *dev, float *mask, size_t n, float p, uint64_t seed)
{
    (void)dev;
    for (size_t i = 0; i < n; i++)
        mask[i] = rt_dropout_factor(seed, i, p);
}

static bool valid(const ferry_pool_t *p)
{
    ferry_pool_t t = *p;
    return ferry_pool_shape(&t) && t.oh == p->oh && t.ow == p->ow;
}

int cpu_avgpool(ferry_device_t *dev, const ferry_pool_t *p, const float *x, float *y)
{
    (void)dev;
    if (!valid(p))
        return FERRY_EINVAL;
    const float inv = 1.0f / (float)(p->size * p->size);
    for (size_t pl = 0; pl < (size_t)p->n * p->c; pl++) {
        const float *in = x + pl * p->h * p->w;
        float *out = y + pl * p->oh * p->ow;
        for (int oy = 0; oy < p->oh; oy++)
            for (int ox = 0; ox < p->ow; ox++) {
                float s = 0;
                for (int dy = 0; dy < p->size; dy++)
                    for (int dx = 0; dx < p->size; dx++)
                        s += in[(size_t)(oy * p->stride + dy) * p->w + ox * p->stride +
                                dx];
                out[oy * p->ow + ox] = s * inv;
            }
    }
    return 0;
}

int cpu_avgpool_grad(ferry_device_t *dev, const ferry_pool_t *p, const float *dy,
                     float *dx)
{
    (void)dev;
    if (!valid(p))
        return FERRY_EINVAL;
    const float inv = 1.0f / (float)(p->size * p->size);
    size_t plane = (size_t)p->h * p->w;
    for (size_t pl = 0; pl < (size_t)p->n * p->c; pl++) {
        float *g = dx + pl * plane;
        const float *d = dy + pl * p->oh * p->ow;
        for (size_t i = 0; i < plane; i++)
            g[i] = 0;
        /* Windows may overlap (stride < size): each adds its share. */
        for (int oy = 0; oy < p->oh; oy++)
            for (int ox = 0; ox < p->ow; ox++) {
                float v = d[oy * p->ow + ox] * inv;
                for (int ky = 0; ky < p->size; ky++)
                    for (int kx = 0; kx < p->size; kx++)
                        g[(size_t)(oy * p->stride + ky) * p->w + ox * p->stride + kx] +=
                            v;
            }
    }
    return 0;
}

int cpu_bce_logits(ferry_device_t *dev, const float *logits, const float *targets,
                   int rows, int cols, float *dlogits, float *loss)
{
    (void)dev;
    if (rows <= 0 || cols <= 0)
        return FERRY_EINVAL;
    size_t n = (size_t)rows * (size_t)cols;
    const float inv = 1.0f / (float)n;
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        float z = logits[i], t = targets[i];
        /* max(z, 0) - z t + log(1 + e^-|z|): no overflow either way. */
        sum += (double)(fmaxf(z, 0) - z * t + log1pf(expf(-fabsf(z))));
        if (dlogits)
            dlogits[i] = (1.0f / (1.0f + expf(-z)) - t) * inv;
    }
    if (loss)
        *loss = (float)(sum / (double)n);
    return 0;
}

int cpu_layernorm(ferry_device_t *dev, const float *x, const float *gamma,
                  const float *beta, int rows, int cols, float eps, float *y, float *mean,
                  float *rstd)
{
    (void)dev;
    if (rows <= 0 || cols <= 0)
        return FERRY_EINVAL;
    for (int i = 0; i < rows; i++) {
        const float *xr = x + (size_t)i * cols;
        float *yr = y + (size_t)i * cols;
        double s = 0, s2 = 0;
        for (int j = 0; j < cols; j++)
            s += xr[j];
        double m = s / cols;
        for (int j = 0; j < cols; j++)
            s2 += (xr[j] - m) * (xr[j] - m);
        float r = (float)(1.0 / sqrt(s2 / cols + eps)), mf = (float)m;
        for (int j = 0; j < cols; j++)
            yr[j] = (xr[j] - mf) * r * gamma[j] + beta[j];
        mean[i] = mf;
        rstd[i] = r;
    }
    return 0;
}

int cpu_layernorm_grad(ferry_device_t *dev, const float *x, const float *gamma,
                       const float *mean, const float *rstd, const float *dy, int rows,
                       int cols, float *dx, float *dgamma, float *dbeta)
{
    (void)dev;
    if (rows <= 0 || cols <= 0)
        return FERRY_EINVAL;
    for (int j = 0; j < cols; j++)
        dgamma[j] = dbeta[j] = 0;
    for (int i = 0; i < rows; i++) {
        const float *xr = x + (size_t)i * cols, *dyr = dy + (size_t)i * cols;
        float *dxr = dx ? dx + (size_t)i * cols : NULL;
        double a = 0, b = 0; /* means of dxhat and of dxhat xhat */
        for (int j = 0; j < cols; j++) {
            float xhat = (xr[j] - mean[i]) * rstd[i], g = dyr[j] * gamma[j];
            a += g;
            b += (double)g * xhat;
            dgamma[j] += dyr[j] * xhat;
            dbeta[j] += dyr[j];
        }
        float ma = (float)(a / cols), mb = (float)(b / cols);
        for (int j = 0; dx && j < cols; j++) {
            float xhat = (xr[j] - mean[i]) * rstd[i];
            dxr[j] = rstd[i] * (dyr[j] * gamma[j] - ma - xhat * mb);
        }
    }
    return 0;
}

/* Batch normalisation on the cpu: per channel over its n hw values. The
 * sums are in double (a channel of a large batch adds up hundreds of
 * thousands of values); the passes that write a value an element are one
 * multiply-add each, which gcc vectorises (cpu_int.h). */
#include <math.h>

#include <ferry/error.h>

#include "cpu_int.h"

static bool bad(int n, int c, int hw)
{
    return n <= 0 || c <= 0 || hw <= 0;
}

/* y = x a + b over one channel of every sample. */
static void affine(const float *x, float *y, int n, int c, int hw, int ch, float a,
                   float b)
{
    for (int i = 0; i < n; i++) {
        size_t at = ((size_t)i * c + ch) * hw;
        const float *xr = x + at;
        float *yr = y + at;
        for (int j = 0; j < hw; j++)
            yr[j] = xr[j] * a + b;
    }
}

int cpu_batchnorm(ferry_device_t *dev, const float *x, const float *gamma,
                  const float *beta, int n, int c, int hw, float eps, float momentum,
                  float *y, float *mean, float *rstd, float *running_mean,
                  float *running_var)
{
    (void)dev;
    if (bad(n, c, hw) || (size_t)n * hw < 2)
        return FERRY_EINVAL;
    double count = (double)n * hw;
    for (int ch = 0; ch < c; ch++) {
        double s = 0, s2 = 0;
        for (int i = 0; i < n; i++) {
            const float *xr = x + ((size_t)i * c + ch) * hw;
            for (int j = 0; j < hw; j++)
                s += xr[j];
        }
        double m = s / count;
        for (int i = 0; i < n; i++) {
            const float *xr = x + ((size_t)i * c + ch) * hw;
            for (int j = 0; j < hw; j++)
                s2 += (xr[j] - m) * (xr[j] - m);
        }
        double var = s2 / count;
        float r = (float)(1.0 / sqrt(var + eps)), a = r * gamma[ch];
        affine(x, y, n, c, hw, ch, a, beta[ch] - (float)m * a);
        mean[ch] = (float)m;
        rstd[ch] = r;
        running_mean[ch] = (1 - momentum) * running_mean[ch] + momentum * (float)m;
        running_var[ch] = (1 - momentum) * running_var[ch] +
                          momentum * (float)(var * count / (count - 1));
    }
    return 0;
}

int cpu_batchnorm_infer(ferry_device_t *dev, const float *x, const float *gamma,
                        const float *beta, const float *running_mean,
                        const float *running_var, int n, int c, int hw, float eps,
                        float *y)
{
    (void)dev;
    if (bad(n, c, hw))
        return FERRY_EINVAL;
    for (int ch = 0; ch < c; ch++) {
        float a = gamma[ch] / sqrtf(running_var[ch] + eps);
        affine(x, y, n, c, hw, ch, a, beta[ch] - running_mean[ch] * a);
    }
    return 0;
}

int cpu_batchnorm_grad(ferry_device_t *dev, const float *x, const float *gamma,
                       const float *mean, const float *rstd, const float *dy, int n,
                       int c, int hw, float eps, float *dx, float *dgamma, float *dbeta)
{
    (void)dev;
    (void)eps; /* rstd has it */
    if (bad(n, c, hw))
        return FERRY_EINVAL;
    double count = (double)n * hw;
    for (int ch = 0; ch < c; ch++) {
        double sdy = 0, sdyx = 0; /* sums of dy and of dy xhat */
        const float m = mean[ch], r = rstd[ch];
        for (int i = 0; i < n; i++) {
            size_t at = ((size_t)i * c + ch) * hw;
            for (int j = 0; j < hw; j++) {
                sdy += dy[at + j];
                sdyx += (double)dy[at + j] * ((x[at + j] - m) * r);
            }
        }
        dgamma[ch] = (float)sdyx;
        dbeta[ch] = (float)sdy;
        if (!dx)
            continue;
        /* dx = gamma r (dy - mean(dy) - xhat mean(dy xhat)) */
        const float g = gamma[ch] * r, a = (float)(sdy / count),
                    b = (float)(sdyx / count);
        for (int i = 0; i < n; i++) {
            size_t at = ((size_t)i * c + ch) * hw;
            for (int j = 0; j < hw; j++)
                dx[at + j] = g * (dy[at + j] - a - (x[at + j] - m) * r * b);
        }
    }
    return 0;
}

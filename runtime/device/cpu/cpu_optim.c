/* Optimizer steps: each one fused loop over the parameters, since they run
 * on every parameter every step and are bound by memory, not arithmetic.
 * The order of operations follows PyTorch's single-tensor implementations,
 * so that results match it closely. */
#include <math.h>

#include "cpu_int.h"

CPU_WIDE void cpu_sgd_step(ferry_device_t *dev, float *restrict p,
                           const float *restrict g, float *restrict v, size_t n, float lr,
                           float mu, float wd)
{
    (void)dev;
    if (mu == 0.f || !v) {
        for (size_t i = 0; i < n; i++)
            p[i] -= lr * (g[i] + wd * p[i]);
        return;
    }
    /* v starts at zero (the runtime clears it), so the first step leaves
     * v = g' as PyTorch's does. */
    for (size_t i = 0; i < n; i++) {
        const float vi = mu * v[i] + (g[i] + wd * p[i]);
        v[i] = vi;
        p[i] -= lr * vi;
    }
}

CPU_WIDE void cpu_adam_step(ferry_device_t *dev, float *restrict p,
                            const float *restrict g, float *restrict m, float *restrict v,
                            size_t n, float lr, float b1, float b2, float eps, float wd,
                            int t)
{
    (void)dev;
    if (t < 1)
        t = 1;
    const float step = (float)(lr / (1.0 - pow(b1, t)));
    const float bc2_sqrt = (float)sqrt(1.0 - pow(b2, t));
    const float c1 = 1.f - b1, c2 = 1.f - b2;
    for (size_t i = 0; i < n; i++) {
        const float gi = g[i] + wd * p[i];
        const float mi = b1 * m[i] + c1 * gi;
        const float vi = b2 * v[i] + c2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] -= step * mi / (sqrtf(vi) / bc2_sqrt + eps);
    }
}

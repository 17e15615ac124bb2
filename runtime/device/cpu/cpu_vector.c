/* Elementwise and per-row operations: one pass over memory each, written as
 * plain indexed loops over restrict pointers so that gcc vectorises them
 * (see cpu_int.h). The operations the contract lets run
 * in place take a separate one-pointer loop for that case, since restrict
 * must not cover two names for the same memory. */
#include "cpu_int.h"

CPU_WIDE void cpu_fill(ferry_device_t *dev, float *restrict x, float value, size_t n)
{
    (void)dev;
    for (size_t i = 0; i < n; i++)
        x[i] = value;
}

CPU_WIDE void cpu_scale(ferry_device_t *dev, float *restrict x, float a, size_t n)
{
    (void)dev;
    for (size_t i = 0; i < n; i++)
        x[i] *= a;
}

CPU_WIDE void cpu_axpy(ferry_device_t *dev, float *restrict y, float a,
                       const float *restrict x, size_t n)
{
    (void)dev;
    for (size_t i = 0; i < n; i++)
        y[i] += a * x[i];
}

CPU_WIDE void cpu_bias_add(ferry_device_t *dev, float *restrict y,
                           const float *restrict bias, int rows, int cols)
{
    (void)dev;
    for (int i = 0; i < rows; i++) {
        float *restrict row = y + (size_t)i * cols;
        for (int j = 0; j < cols; j++)
            row[j] += bias[j];
    }
}

/* bias_add then relu in one pass over y: the same sum, the same test. */
CPU_WIDE void cpu_bias_relu(ferry_device_t *dev, float *restrict y,
                            const float *restrict bias, int rows, int cols)
{
    (void)dev;
    for (int i = 0; i < rows; i++) {
        float *restrict row = y + (size_t)i * cols;
        for (int j = 0; j < cols; j++) {
            float v = row[j] + bias[j];
            row[j] = v <= 0.f ? 0.f : v;
        }
    }
}

/* Row by row, so that dy is read once, in order, and the sums vectorise
 * across columns. */
CPU_WIDE void cpu_bias_grad(ferry_device_t *dev, float *restrict dbias,
                            const float *restrict dy, int rows, int cols)
{
    (void)dev;
    for (int j = 0; j < cols; j++)
        dbias[j] = 0.f;
    for (int i = 0; i < rows; i++) {
        const float *restrict row = dy + (size_t)i * cols;
        for (int j = 0; j < cols; j++)
            dbias[j] += row[j];
    }
}

/* Written so that NaN passes through, as PyTorch's does: a ReLU that maps
 * NaN to 0 would hide a diverging model from the trainer's NaN stop. */
static void relu_inplace(float *restrict x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = x[i] <= 0.f ? 0.f : x[i];
}

CPU_WIDE void cpu_relu(ferry_device_t *dev, float *restrict y, const float *restrict x,
                       size_t n)
{
    (void)dev;
    if ((const float *)y == x) {
        relu_inplace(y, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] <= 0.f ? 0.f : x[i];
}

static void relu_grad_inplace(float *restrict d, const float *restrict y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        d[i] = y[i] > 0.f ? d[i] : 0.f;
}

CPU_WIDE void cpu_relu_grad(ferry_device_t *dev, float *restrict dx,
                            const float *restrict dy, const float *restrict y, size_t n)
{
    (void)dev;
    if ((const float *)dx == dy) {
        relu_grad_inplace(dx, y, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        dx[i] = y[i] > 0.f ? dy[i] : 0.f;
}

/* tests/cuda — double-precision references for the convolutional ops, and
 * a check of any device against them at a given shape: the same check runs
 * on the cpu backend (in CI: it proves the references) and on the GPU
 * (where it holds whatever algorithm cuDNN picks to the references). */
#ifndef FERRY_TESTS_CUDA_TREF_H
#define FERRY_TESTS_CUDA_TREF_H

#include <stddef.h>

#include <ferry/device.h>

/* tasks/cnn's two convolutions at batch n: 1->16 5x5 pad 2 on 28x28, then
 * 16->32 5x5 pad 2 on 14x14. */
static inline ferry_conv_t tref_cnn_conv1(int n)
{
    return (ferry_conv_t){
        .n = n, .c = 1, .h = 28, .w = 28, .k = 16, .r = 5, .s = 5, .pad = 2, .stride = 1};
}

static inline ferry_conv_t tref_cnn_conv2(int n)
{
    return (ferry_conv_t){
        .n = n, .c = 16, .h = 14, .w = 14, .k = 32, .r = 5, .s = 5, .pad = 2, .stride = 1};
}

/* y = conv(x, w) + bias (bias NULL: none), dx = conv^T(dy, w),
 * dw = sum over the batch of x (*) dy, dbias = sum of dy per filter: every
 * output overwritten, summed in double. Any of y, dx, dw, dbias may be NULL
 * (not wanted); dy may be NULL when only y is. */
void tref_conv(const ferry_conv_t *s, const double *x, const double *w,
               const double *bias, const double *dy, double *y, double *dx, double *dw,
               double *dbias);

/* y = max over each window; dx gets each window's dy at the window's first
 * (row-major) maximum, summed where windows overlap. dx may be NULL. */
void tref_pool(const ferry_pool_t *p, const double *x, const double *dy, double *y,
               double *dx);

/* The largest |got - want| over the largest |want| (NaN: infinity). */
double tref_error(const double *got, const double *want, size_t n);

/* Runs conv2d and conv2d_grad (dx, dw, dbias) on `dev` at shape `s` from
 * random float inputs drawn from `seed`, and asserts each output within
 * `tol` (relative, as tref_error) of tref_conv's. */
void tref_check_conv(ferry_device_t *dev, ferry_conv_t s, unsigned long long seed,
                     double tol);
/* The same for maxpool and maxpool_grad, on relu-like inputs (a quarter
 * zeros: ties). */
void tref_check_pool(ferry_device_t *dev, ferry_pool_t p, unsigned long long seed,
                     double tol);

#endif

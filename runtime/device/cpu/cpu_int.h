/* runtime/device/cpu — the private header of the cpu backend: the device's
 * own state and the operations each file implements. Every operation runs
 * on the calling thread and has finished when it returns, so sync has
 * nothing to wait for. */
#ifndef FERRY_RUNTIME_DEVICE_CPU_INT_H
#define FERRY_RUNTIME_DEVICE_CPU_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ferry/device.h>

/* The loops of this backend run on every element of every training step,
 * and gcc's -O2 (the project's default) vectorises only loops whose trip
 * count it knows. Every file of the backend includes this header last, so
 * the functions it defines are compiled as at -O3, and without errno from
 * math calls (sqrtf would not vectorise). Meson cannot give files of one
 * library their own flags. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3", "no-math-errno")
#endif

/* The loops every training step runs over every parameter and activation
 * (the optimizer's, the bias and ReLU passes) are built twice, for the
 * baseline x86-64 the project targets and for AVX2, and the loader picks
 * the one the CPU runs: eight floats an instruction instead of four. The
 * same operations in the same order either way (AVX2 alone has no fused
 * multiply-add, and ISO C mode contracts nothing), so the results are the
 * same bits. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__AVX2__)
#define CPU_WIDE __attribute__((target_clones("avx2", "default")))
#else
#define CPU_WIDE
#endif

/* Behind ferry_device_t.impl. A device is used by one thread at a time, so
 * one scratch buffer per device (not per thread) serves every operation:
 * nothing is left behind in threads that used it once. */
typedef struct cpu_impl {
    float *scratch;   /* im2col columns; grows, never shrinks */
    size_t scratch_n; /* floats in scratch */
    char name[8];     /* "cpu" */
    char desc[256];   /* "cpu: <model> (N cores), OpenBLAS x.y.z (T threads)" */
} cpu_impl;

/* `n` floats of scratch, valid until the next call; NULL if out of memory. */
float *cpu_scratch(ferry_device_t *dev, size_t n);

/* cpu_vector.c */
void cpu_fill(ferry_device_t *dev, float *x, float value, size_t n);
void cpu_scale(ferry_device_t *dev, float *x, float a, size_t n);
void cpu_axpy(ferry_device_t *dev, float *y, float a, const float *x, size_t n);
void cpu_bias_add(ferry_device_t *dev, float *y, const float *bias, int rows, int cols);
void cpu_bias_relu(ferry_device_t *dev, float *y, const float *bias, int rows, int cols);
void cpu_bias_grad(ferry_device_t *dev, float *dbias, const float *dy, int rows,
                   int cols);
void cpu_relu(ferry_device_t *dev, float *y, const float *x, size_t n);
void cpu_relu_grad(ferry_device_t *dev, float *dx, const float *dy, const float *y,
                   size_t n);

/* cpu_gemm.c */
void cpu_gemm(ferry_device_t *dev, bool trans_a, bool trans_b, int m, int n, int k,
              float alpha, const float *a, const float *b, float beta, float *c);

/* cpu_loss.c */
int cpu_softmax_xent(ferry_device_t *dev, const float *logits, const int32_t *labels,
                     int rows, int classes, float *dlogits, float *loss, int *correct);
int cpu_mse(ferry_device_t *dev, const float *pred, const float *target, int rows,
            int cols, float *dpred, float *loss);

/* cpu_conv.c */
int cpu_conv2d(ferry_device_t *dev, const ferry_conv_t *s, const float *x, const float *w,
               const float *bias, float *y);
int cpu_conv2d_grad(ferry_device_t *dev, const ferry_conv_t *s, const float *x,
                    const float *w, const float *dy, float *dx, float *dw, float *dbias);

/* cpu_pool.c */
int cpu_maxpool(ferry_device_t *dev, const ferry_pool_t *p, const float *x, float *y);
int cpu_maxpool_grad(ferry_device_t *dev, const ferry_pool_t *p, const float *x,
                     const float *y, const float *dy, float *dx);

/* cpu_optim.c */
void cpu_sgd_step(ferry_device_t *dev, float *p, const float *g, float *v, size_t n,
                  float lr, float mu, float wd);
void cpu_adam_step(ferry_device_t *dev, float *p, const float *g, float *m, float *v,
                   size_t n, float lr, float b1, float b2, float eps, float wd, int t);

/* cpu_nn.c: what <ferry/nn.h>'s layers add. */
void cpu_activation(ferry_device_t *dev, int act, float alpha, float *y, const float *x,
                    size_t n);
void cpu_activation_grad(ferry_device_t *dev, int act, float alpha, float *dx,
                         const float *dy, const float *x, const float *y, size_t n);
void cpu_mul(ferry_device_t *dev, float *z, const float *x, const float *y, size_t n);
void cpu_dropout_mask(ferry_device_t *dev, float *mask, size_t n, float p, uint64_t seed);
int cpu_avgpool(ferry_device_t *dev, const ferry_pool_t *p, const float *x, float *y);
int cpu_avgpool_grad(ferry_device_t *dev, const ferry_pool_t *p, const float *dy, float *dx);
int cpu_bce_logits(ferry_device_t *dev, const float *logits, const float *targets, int rows,
                   int cols, float *dlogits, float *loss);
int cpu_layernorm(ferry_device_t *dev, const float *x, const float *gamma, const float *beta,
                  int rows, int cols, float eps, float *y, float *mean, float *rstd);
int cpu_layernorm_grad(ferry_device_t *dev, const float *x, const float *gamma,
                       const float *mean, const float *rstd, const float *dy, int rows,
                       int cols, float *dx, float *dgamma, float *dbeta);

/* cpu_bnorm.c: batch normalisation. */
int cpu_batchnorm(ferry_device_t *dev, const float *x, const float *gamma,
                  const float *beta, int n, int c, int hw, float eps, float momentum,
                  float *y, float *mean, float *rstd, float *running_mean,
                  float *running_var);
int cpu_batchnorm_infer(ferry_device_t *dev, const float *x, const float *gamma,
                        const float *beta, const float *running_mean,
                        const float *running_var, int n, int c, int hw, float eps,
                        float *y);
int cpu_batchnorm_grad(ferry_device_t *dev, const float *x, const float *gamma,
                       const float *mean, const float *rstd, const float *dy, int n,
                       int c, int hw, float eps, float *dx, float *dgamma,
                       float *dbeta);

#endif

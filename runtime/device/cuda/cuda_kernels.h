/* runtime/device/cuda — the launchers of cuda_kernels.cu, for the ops no
 * cuBLAS or cuDNN call fits. Each queues its kernels on `stream` and returns
 * the launch's status (cudaGetLastError); failures while running show up at
 * the stream's next synchronisation. Included by C and by nvcc's C++. */
#ifndef FERRY_CUDA_KERNELS_H
#define FERRY_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A loss reduced on the device, downloaded in one copy. */
typedef struct cuda_loss {
    double sum;  /* sum of the per-row losses, or of the squared errors */
    int correct; /* softmax_xent: rows whose first largest logit is the label */
    int bad;     /* softmax_xent: labels out of range */
} cuda_loss_t;

/* The most partial sums cuda_k_mse writes to its scratch. */
#define CUDA_MSE_PARTS 256

cudaError_t cuda_k_fill(cudaStream_t stream, float *x, float value, size_t n);
cudaError_t cuda_k_relu(cudaStream_t stream, float *y, const float *x, size_t n);
cudaError_t cuda_k_relu_grad(cudaStream_t stream, float *dx, const float *dy,
                             const float *y, size_t n);
cudaError_t cuda_k_bias_add(cudaStream_t stream, float *y, const float *bias, int rows,
                            int cols);
/* bias_add then relu in one kernel: y = max(y + bias[col], 0). */
cudaError_t cuda_k_bias_relu(cudaStream_t stream, float *y, const float *bias, int rows,
                             int cols);

/* Checks the labels (any out of range: out->bad, and nothing else is
 * written), then per row the loss, the first argmax and the gradient
 * (dlogits NULL: none; it may be the logits), into row_loss[rows] and
 * row_correct[rows], reduced into *out. */
cudaError_t cuda_k_softmax_xent(cudaStream_t stream, const float *logits,
                                const int32_t *labels, int rows, int classes,
                                float *dlogits, double *row_loss, int *row_correct,
                                cuda_loss_t *out);
/* out->sum = sum (pred - target)^2 over n; dpred (NULL: none) =
 * (pred - target) * inv_rows. parts: CUDA_MSE_PARTS doubles of scratch. */
cudaError_t cuda_k_mse(cudaStream_t stream, const float *pred, const float *target,
                       size_t n, float inv_rows, float *dpred, double *parts,
                       cuda_loss_t *out);

/* dx from dy, x and y, each window's gradient to its first maximum (the
 * first element, row-major, equal to its output); deterministic (no
 * atomics). */
cudaError_t cuda_k_maxpool_grad(cudaStream_t stream, int n, int c, int h, int w, int size,
                                int stride, int oh, int ow, const float *x,
                                const float *y, const float *dy, float *dx);

/* v NULL: no momentum (the caller passes NULL when mu is 0). */
cudaError_t cuda_k_sgd(cudaStream_t stream, float *p, const float *g, float *v, size_t n,
                       float lr, float mu, float wd);
/* step = lr / (1 - b1^t), bc2_sqrt = sqrt(1 - b2^t), computed by the caller
 * in double. */
cudaError_t cuda_k_adam(cudaStream_t stream, float *p, const float *g, float *m, float *v,
                        size_t n, float b1, float b2, float eps, float wd, float step,
                        float bc2_sqrt);

/* Row i of dst = row idx[i] of src, rows of `words` 32-bit words each (the
 * loader's batches: float pixels, int32 labels). */
cudaError_t cuda_k_gather(cudaStream_t stream, uint32_t *dst, const uint32_t *src,
                          const uint32_t *idx, size_t rows, size_t words);

/* The bf16 precision's roundings (cuda_bf16_round.h): n floats to
 * bfloat16 (cuBLAS's inputs), or to the nearest bfloat16 kept as float32
 * (cuDNN's, run with TF32 math, exact on such values). */
cudaError_t cuda_k_to_bf16(cudaStream_t stream, uint16_t *dst, const float *src,
                           size_t n);
cudaError_t cuda_k_round_bf16(cudaStream_t stream, float *dst, const float *src,
                              size_t n);

/* The layers of <ferry/nn.h>: activations (FERRY_ACT_*), the elementwise
 * product, dropout's mask (runtime/device/device_hash.h), average pooling
 * and its gradient, and binary cross-entropy with logits (its sum into
 * out->sum through at most CUDA_MSE_PARTS partial sums in `parts`). */
cudaError_t cuda_k_activation(cudaStream_t stream, int act, float alpha, float *y,
                              const float *x, size_t n);
cudaError_t cuda_k_activation_grad(cudaStream_t stream, int act, float alpha, float *dx,
                                   const float *dy, const float *x, const float *y,
                                   size_t n);
cudaError_t cuda_k_mul(cudaStream_t stream, float *z, const float *x, const float *y,
                       size_t n);
cudaError_t cuda_k_dropout_mask(cudaStream_t stream, float *mask, size_t n, float p,
                                uint64_t seed);
cudaError_t cuda_k_avgpool(cudaStream_t stream, int n, int c, int h, int w, int size,
                           int stride, int oh, int ow, const float *x, float *y);
cudaError_t cuda_k_avgpool_grad(cudaStream_t stream, int n, int c, int h, int w, int size,
                                int stride, int oh, int ow, const float *dy, float *dx);
/* Layer normalisation: a block a row; the parameters' gradients a thread a
 * column. */
cudaError_t cuda_k_layernorm(cudaStream_t stream, const float *x, const float *gamma,
                             const float *beta, int rows, int cols, float eps, float *y,
                             float *mean, float *rstd);
cudaError_t cuda_k_layernorm_grad(cudaStream_t stream, const float *x, const float *gamma,
                                  const float *mean, const float *rstd, const float *dy,
                                  int rows, int cols, float *dx, float *dgamma, float *dbeta);
cudaError_t cuda_k_bce_logits(cudaStream_t stream, const float *z, const float *t, size_t n,
                              float inv, float *dz, double *parts, cuda_loss_t *out);

#ifdef __cplusplus
}
#endif

#endif

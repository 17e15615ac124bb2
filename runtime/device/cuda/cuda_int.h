/* runtime/device/cuda — the private header of ferry-cuda.so.
 *
 * The backend is a shared object of its own, dlopened by device.c and linked
 * only against the CUDA libraries: it calls no ferry function, and every
 * symbol but ferry_cuda_open/ferry_cuda_close is hidden.
 *
 *   cuda_open.c     open/close, the handles
 *   cuda_status.c   library statuses turned into FERRY_E* codes (with the
 *                   text kept on the device); a capture's refusals
 *   cuda_mem.c      memory (tracked, so close frees what a model leaked),
 *                   copies, sync, the device-owned scratch buffers
 *   cuda_blas.c     gemm, scale, axpy, bias_grad on cuBLAS
 *   cuda_dnn.c      convolutions and pooling on cuDNN
 *   cuda_algo.c     which cuDNN convolution algorithm runs (the rule itself
 *                   in cuda_algo_rule.c, tested without a GPU)
 *   cuda_ops.c      the ops that run kernels of cuda_kernels.cu
 *   cuda_ext.c      the runtime's extension table (memory info, gather,
 *                   precision): ferry_cuda_ext
 *   cuda_stage.c    its staging members: pinned host memory, the copy
 *                   stream, events between the two streams
 *   cuda_graph.c    its graph members: a step captured and replayed
 *
 * Every op runs on the device's stream, in issue order; only the staging
 * copies (upload_async) run on the second, copy stream. Ops that return
 * void keep their first failure on the device; sync (and download) return
 * it. */
#ifndef FERRY_CUDA_INT_H
#define FERRY_CUDA_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <ferry/device.h>
#include <ferry/error.h>

#include "cuda_algo_rule.h"
#include "cuda_bf16_round.h"
#include "cuda_kernels.h"

#define CUDA_EXPORT __attribute__((visibility("default")))

/* The set of live allocations: open addressing on the pointer, so close can
 * free what was never freed. */
typedef struct cuda_ptrset {
    void **slots; /* NULL: empty; CUDA_TOMBSTONE: freed */
    size_t cap, used, live;
} cuda_ptrset_t;

/* How many shapes of convolution and pooling keep their descriptors and
 * chosen algorithms: a CNN has a handful of layers, and an evaluation batch
 * that differs from the training batch doubles them. */
#define CUDA_PLANS 8

/* The most loss results one captured step may defer (cuda_graph.c). */
#define CUDA_GRAPH_RESULTS 4

/* One direction's algorithm, with the math type the descriptor must carry
 * when it runs (one descriptor serves the three directions). */
typedef struct cuda_conv_algo {
    bool have;
    int algo; /* the direction's cudnnConvolution*Algo_t */
    cudnnMathType_t math;
    size_t ws; /* workspace bytes */
} cuda_conv_algo_t;

typedef struct cuda_conv_plan {
    bool used;
    ferry_conv_t shape;
    cudnnTensorDescriptor_t x, y, bias;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    /* Chosen on first use by cuda_conv_choose, indexed by cuda_conv_dir_t. */
    cuda_conv_algo_t algo[3];
} cuda_conv_plan_t;

typedef struct cuda_pool_plan {
    bool used;
    ferry_pool_t shape;
    cudnnTensorDescriptor_t x, y;
    cudnnPoolingDescriptor_t pool;
} cuda_pool_plan_t;

typedef struct cuda_dev {
    ferry_device_t pub; /* first: a ferry_device_t * is a cuda_dev_t * */
    int index;
    int cc_major, cc_minor; /* compute capability */
    cudaStream_t stream;
    cudaStream_t copy_stream; /* upload_async's (cuda_stage.c) */
    cublasHandle_t blas;
    cudnnHandle_t dnn;
    bool pools;                 /* stream-ordered allocation (cudaMallocAsync) works */
    cuda_precision_t precision; /* fp32 unless the trainer asks for more */
    cudaMemPool_t mempool;      /* then: the device's default pool */

    int err;           /* first failure of a void op, 0 when none */
    char errtext[320]; /* what failed, for the last failure of any op */

    cuda_ptrset_t live;
    void *ws; /* cuDNN workspace, grown on demand */
    size_t ws_bytes;
    void *scratch; /* the losses' per-row results and partial sums */
    size_t scratch_bytes;
    float *ones; /* bias_grad's vector of ones */
    size_t ones_n;
    cuda_loss_t *result; /* device: a loss's reduced result */

    /* The bf16 precision's rounded copies of a product's or a
     * convolution's inputs (cuda_bf16_copy), grown on demand. */
    void *bf[3];
    size_t bf_bytes[3];
    void *blas_ws; /* cuBLAS's workspace, fixed: captured graphs bake it in */
    /* Bumped whenever a buffer above moves (cuda_grow): a graph captured
     * before holds the old address. */
    uint64_t bufgen;

    /* A capture in progress (cuda_graph.c). */
    bool capturing;
    int cap_rc;      /* the first reason it cannot stand, 0 when none */
    float *cap_loss; /* the one host pointer a loss may be deferred to */
    int cap_nres;    /* deferred results recorded */
    float *cap_dst[CUDA_GRAPH_RESULTS];
    double cap_div[CUDA_GRAPH_RESULTS];
    cuda_loss_t *cap_host; /* pinned: the results each run copies out */

    cuda_conv_plan_t conv[CUDA_PLANS];
    cuda_pool_plan_t pool[CUDA_PLANS];
    unsigned conv_next, pool_next; /* round-robin eviction */

    char name[24];
    char description[320];
} cuda_dev_t;

static inline cuda_dev_t *cuda_dev(ferry_device_t *dev)
{
    return (cuda_dev_t *)dev;
}

/* ---- cuda_status.c: statuses -> FERRY_E*, with the text kept in errtext -- */

/* Each records "<name>: <what>: <library's text>" in d->errtext, writes it to
 * stderr (the worker's log: the ABI has no channel for it) and returns the
 * FERRY_E* code. */
int cuda_rt_fail(cuda_dev_t *d, const char *what, cudaError_t e);
int cuda_blas_fail(cuda_dev_t *d, const char *what, cublasStatus_t s);
int cuda_dnn_fail(cuda_dev_t *d, const char *what, cudnnStatus_t s);
/* A caller's mistake (a bad size, a label out of range): kept in errtext,
 * not logged. Returns FERRY_EINVAL. */
int cuda_einval(cuda_dev_t *d, const char *what);
/* For ops that return void: keeps rc (if it is the first) for sync. */
void cuda_defer(cuda_dev_t *d, int rc);
/* Makes the device current on the calling thread: ops may be issued from
 * any thread, one at a time, and the handles belong to the device. */
int cuda_enter(cuda_dev_t *d);
/* Breaks the graph capture in progress (cuda_graph.c): keeps the first
 * reason, returns FERRY_EAGAIN. */
int cuda_capture_fail(cuda_dev_t *d, const char *what);

/* Jump to `label` with rc set when a call fails (NCCL's CUDACHECKGOTO). */
#define CUDA_RT_TRY(d, call, label)                                                      \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            rc = cuda_rt_fail((d), #call, e_);                                           \
            goto label;                                                                  \
        }                                                                                \
    } while (0)
#define CUDA_BLAS_TRY(d, call, label)                                                    \
    do {                                                                                 \
        cublasStatus_t s_ = (call);                                                      \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                               \
            rc = cuda_blas_fail((d), #call, s_);                                         \
            goto label;                                                                  \
        }                                                                                \
    } while (0)
#define CUDA_DNN_TRY(d, call, label)                                                     \
    do {                                                                                 \
        cudnnStatus_t s_ = (call);                                                       \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                \
            rc = cuda_dnn_fail((d), #call, s_);                                          \
            goto label;                                                                  \
        }                                                                                \
    } while (0)

/* ---- cuda_mem.c ---- */

void *cuda_alloc(ferry_device_t *dev, size_t bytes);
void cuda_free(ferry_device_t *dev, void *p);
int cuda_upload(ferry_device_t *dev, void *dst, const void *host, size_t bytes);
int cuda_download(ferry_device_t *dev, void *host, const void *src, size_t bytes);
int cuda_copy(ferry_device_t *dev, void *dst, const void *src, size_t bytes);
int cuda_sync(ferry_device_t *dev);

/* Device memory for the backend's own use, freed by cuda_mem_fini, outside
 * the tracked set. */
int cuda_raw_alloc(cuda_dev_t *d, void **p, size_t bytes);
void cuda_raw_free(cuda_dev_t *d, void *p);
/* Grows *buf (of *have bytes) to at least `bytes`, stream-ordered: work
 * issued earlier on the old buffer still sees it. */
int cuda_grow(cuda_dev_t *d, void **buf, size_t *have, size_t bytes);
/* The bf16 precision's copy of n floats of `src` in scratch buffer
 * `which` (0..2): as bfloat16 (as_bf16: cuBLAS's inputs) or as floats
 * rounded to bfloat16 (cuDNN's). Issued on the stream; *out is the copy,
 * valid until the next call for `which`. */
int cuda_bf16_copy(cuda_dev_t *d, int which, const float *src, size_t n, bool as_bf16,
                   const void **out);
/* Frees every tracked allocation and the backend's buffers. */
void cuda_mem_fini(cuda_dev_t *d);

/* ---- cuda_blas.c ---- */

void cuda_scale(ferry_device_t *dev, float *x, float a, size_t n);
void cuda_axpy(ferry_device_t *dev, float *y, float a, const float *x, size_t n);
void cuda_gemm(ferry_device_t *dev, bool trans_a, bool trans_b, int m, int n, int k,
               float alpha, const float *a, const float *b, float beta, float *c);
void cuda_bias_grad(ferry_device_t *dev, float *dbias, const float *dy, int rows,
                    int cols);

/* ---- cuda_dnn.c ---- */

int cuda_conv2d(ferry_device_t *dev, const ferry_conv_t *s, const float *x,
                const float *w, const float *bias, float *y);
int cuda_conv2d_grad(ferry_device_t *dev, const ferry_conv_t *s, const float *x,
                     const float *w, const float *dy, float *dx, float *dw, float *dbias);
int cuda_maxpool(ferry_device_t *dev, const ferry_pool_t *p, const float *x, float *y);
int cuda_maxpool_grad(ferry_device_t *dev, const ferry_pool_t *p, const float *x,
                      const float *y, const float *dy, float *dx);
/* Destroys the cached descriptors. */
void cuda_dnn_fini(cuda_dev_t *d);
/* Forgets every plan's chosen algorithms (the precision changed). */
void cuda_dnn_forget_algos(cuda_dev_t *d);

/* ---- cuda_algo.c ---- */

/* Chooses p->algo[dir] by the rule documented in cuda_algo.c. 0, or
 * FERRY_ENOTSUP when no allowed algorithm can run the shape. */
int cuda_conv_choose(cuda_dev_t *d, cuda_conv_plan_t *p, cuda_conv_dir_t dir);

/* ---- cuda_stage.c: the extension table's staging members ---- */

void *cuda_host_alloc(ferry_device_t *dev, size_t bytes);
void cuda_host_free(ferry_device_t *dev, void *p);
int cuda_mark_create(ferry_device_t *dev, void **mark);
void cuda_mark_destroy(ferry_device_t *dev, void *mark);
int cuda_mark_record(ferry_device_t *dev, void *mark, int queue);
int cuda_mark_wait(ferry_device_t *dev, void *mark, int queue);
int cuda_mark_sync(ferry_device_t *dev, void *mark);
int cuda_upload_async(ferry_device_t *dev, void *dst, const void *host, size_t bytes);

/* ---- cuda_graph.c: the extension table's graph members ---- */

int cuda_capture_begin(ferry_device_t *dev, float *loss);
int cuda_capture_end(ferry_device_t *dev, bool keep, void **graph, char *err,
                     size_t errlen);
int cuda_graph_run(ferry_device_t *dev, void *graph);
void cuda_graph_destroy(ferry_device_t *dev, void *graph);
/* A loss op's result during a capture: copied to a pinned slot by every run
 * of the graph and written to *loss as sum / div after it. 0, or
 * FERRY_EAGAIN (another pointer, a count of correct rows, no slot left). */
int cuda_capture_loss(cuda_dev_t *d, float *loss, int *correct, double div);

/* ---- cuda_ops.c ---- */

extern const ferry_device_ops_t cuda_ops; /* the table, every op above */

void cuda_fill(ferry_device_t *dev, float *x, float value, size_t n);
void cuda_bias_add(ferry_device_t *dev, float *y, const float *bias, int rows, int cols);
void cuda_bias_relu(ferry_device_t *dev, float *y, const float *bias, int rows, int cols);
void cuda_relu(ferry_device_t *dev, float *y, const float *x, size_t n);
void cuda_relu_grad(ferry_device_t *dev, float *dx, const float *dy, const float *y,
                    size_t n);
int cuda_softmax_xent(ferry_device_t *dev, const float *logits, const int32_t *labels,
                      int rows, int classes, float *dlogits, float *loss, int *correct);
int cuda_mse(ferry_device_t *dev, const float *pred, const float *target, int rows,
             int cols, float *dpred, float *loss);
void cuda_sgd_step(ferry_device_t *dev, float *p, const float *g, float *v, size_t n,
                   float lr, float mu, float wd);
void cuda_adam_step(ferry_device_t *dev, float *p, const float *g, float *m, float *v,
                    size_t n, float lr, float b1, float b2, float eps, float wd, int t);

/* cuda_nn.c: what <ferry/nn.h>'s layers add to the table. */
void cuda_activation(ferry_device_t *dev, int act, float alpha, float *y, const float *x,
                     size_t n);
void cuda_activation_grad(ferry_device_t *dev, int act, float alpha, float *dx,
                          const float *dy, const float *x, const float *y, size_t n);
void cuda_mul(ferry_device_t *dev, float *z, const float *x, const float *y, size_t n);
void cuda_dropout_mask(ferry_device_t *dev, float *mask, size_t n, float p,
                       uint64_t seed);
int cuda_avgpool(ferry_device_t *dev, const ferry_pool_t *p, const float *x, float *y);
int cuda_avgpool_grad(ferry_device_t *dev, const ferry_pool_t *p, const float *dy,
                      float *dx);
/* A loss summed on the device through at most CUDA_MSE_PARTS partial sums
 * (mse, bce_logits): `kernel` issued on a and b's n elements with `scale`
 * and `grad`, its sum downloaded (or deferred, while capturing) and
 * divided by `div` into *loss (NULL: not wanted). */
typedef cudaError_t (*cuda_sum_kernel)(cudaStream_t stream, const float *a,
                                       const float *b, size_t n, float scale, float *grad,
                                       double *parts, cuda_loss_t *out);
int cuda_sum_loss(cuda_dev_t *d, cuda_sum_kernel kernel, const float *a, const float *b,
                  size_t n, float scale, float *grad, double div, float *loss);
int cuda_bce_logits(ferry_device_t *dev, const float *logits, const float *targets,
                    int rows, int cols, float *dlogits, float *loss);
int cuda_layernorm(ferry_device_t *dev, const float *x, const float *gamma,
                   const float *beta, int rows, int cols, float eps, float *y,
                   float *mean, float *rstd);
int cuda_layernorm_grad(ferry_device_t *dev, const float *x, const float *gamma,
                        const float *mean, const float *rstd, const float *dy, int rows,
                        int cols, float *dx, float *dgamma, float *dbeta);

/* cuda_bnorm.c: batch normalisation on cuDNN. */
int cuda_batchnorm(ferry_device_t *dev, const float *x, const float *gamma,
                   const float *beta, int n, int c, int hw, float eps, float momentum,
                   float *y, float *mean, float *rstd, float *running_mean,
                   float *running_var);
int cuda_batchnorm_infer(ferry_device_t *dev, const float *x, const float *gamma,
                         const float *beta, const float *running_mean,
                         const float *running_var, int n, int c, int hw, float eps,
                         float *y);
int cuda_batchnorm_grad(ferry_device_t *dev, const float *x, const float *gamma,
                        const float *mean, const float *rstd, const float *dy, int n,
                        int c, int hw, float eps, float *dx, float *dgamma, float *dbeta);

#endif

/* Choosing a convolution algorithm: one routine for the forward,
 * backward-data and backward-filter directions, so that one rule holds for
 * all three.
 *
 * The rule, in order:
 *   1. Never a transform algorithm on float32 data: FFT, FFT_TILING,
 *      WINOGRAD and WINOGRAD_NONFUSED compute in a transformed domain whose
 *      rounding error grows with the tile and the reduction length. On an
 *      H100, cuDNN 9.19's heuristics picked BWD_FILTER_ALGO_WINOGRAD_NONFUSED
 *      for the CNN's first layer (n=32 c=1 28x28, k=16 5x5 pad 2) and its dw
 *      was 7% off at some weights, 0.166 against a limit of 0.016: a gradient
 *      a training system must not ship. The direct and GEMM-based families
 *      that remain accumulate in float32 like the cpu backend does, and are
 *      held to the same tolerance by tests/cuda.
 *   2. Only the math the device's precision allows: fp32 runs CUDNN_FMA_MATH
 *      (no TF32 tensor cores, so cuda and cpu agree to float rounding); tf32
 *      also lets cuDNN use tensor-core math.
 *   3. Deterministic algorithms first (the same inputs give the same bits,
 *      which keeps "same seed, same parameters" true on a given GPU), then
 *      the non-deterministic ones; within each group, the heuristics' order.
 *   4. The first whose workspace size cuDNN reports is taken. When the
 *      heuristics offer nothing that passes, the GEMM-based algorithms are
 *      tried in a fixed order, deterministic first, before giving up.
 *
 * cudnnFind* (timing every algorithm, PyTorch's cudnn.benchmark) is not used:
 * its choice can change from run to run with the timings, and with it the
 * bits of the result. */
#include "cuda_int.h"

/* The largest of the three directions' algorithm counts. */
#define MAX_ALGOS 8
_Static_assert(CUDNN_CONVOLUTION_FWD_ALGO_COUNT <= MAX_ALGOS, "fwd algorithms");
_Static_assert(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT <= MAX_ALGOS, "data algorithms");
_Static_assert(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT <= MAX_ALGOS, "filter algorithms");

/* Any direction's perf results as candidates. */
#define CANDS(perf, got, out)                                                            \
    for (int i_ = 0; i_ < (got); i_++)                                                   \
    (out)[i_] = (cuda_algo_cand_t){(int)(perf)[i_].algo, (perf)[i_].status,              \
                                   (perf)[i_].determinism == CUDNN_DETERMINISTIC,        \
                                   (perf)[i_].mathType}

/* The heuristics' answers for `dir`, into c[MAX_ALGOS]. */
static int heuristics(cuda_dev_t *d, cuda_conv_plan_t *p, cuda_conv_dir_t dir,
                      cuda_algo_cand_t *c, int *got)
{
    int rc = 0;
    *got = 0;
    switch (dir) {
    case CUDA_CONV_FWD: {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        CUDA_DNN_TRY(d,
                     cudnnGetConvolutionForwardAlgorithm_v7(
                         d->dnn, p->x, p->w, p->conv, p->y,
                         CUDNN_CONVOLUTION_FWD_ALGO_COUNT, got, perf),
                     out);
        CANDS(perf, *got, c);
        break;
    }
    case CUDA_CONV_DATA: {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        CUDA_DNN_TRY(d,
                     cudnnGetConvolutionBackwardDataAlgorithm_v7(
                         d->dnn, p->w, p->y, p->conv, p->x,
                         CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, got, perf),
                     out);
        CANDS(perf, *got, c);
        break;
    }
    case CUDA_CONV_FILTER: {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        CUDA_DNN_TRY(d,
                     cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                         d->dnn, p->x, p->y, p->conv, p->w,
                         CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, got, perf),
                     out);
        CANDS(perf, *got, c);
        break;
    }
    }
out:
    return rc;
}

/* cuDNN's workspace for `algo` under the descriptor's current math type;
 * anything but success means the algorithm cannot run this shape. */
static cudnnStatus_t ws_size(cuda_dev_t *d, cuda_conv_plan_t *p, cuda_conv_dir_t dir,
                             int algo, size_t *ws)
{
    switch (dir) {
    case CUDA_CONV_FWD:
        return cudnnGetConvolutionForwardWorkspaceSize(
            d->dnn, p->x, p->w, p->conv, p->y, (cudnnConvolutionFwdAlgo_t)algo, ws);
    case CUDA_CONV_DATA:
        return cudnnGetConvolutionBackwardDataWorkspaceSize(
            d->dnn, p->w, p->y, p->conv, p->x, (cudnnConvolutionBwdDataAlgo_t)algo, ws);
    case CUDA_CONV_FILTER:
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(
            d->dnn, p->x, p->y, p->conv, p->w, (cudnnConvolutionBwdFilterAlgo_t)algo, ws);
    }
    return CUDNN_STATUS_BAD_PARAM;
}

/* Rule 4's fallbacks: GEMM-based, deterministic first, -1 ends. */
static const int fallback[3][4] = {
    [CUDA_CONV_FWD] = {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                       CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                       CUDNN_CONVOLUTION_FWD_ALGO_GEMM, -1},
    [CUDA_CONV_DATA] = {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
                        -1, -1},
    [CUDA_CONV_FILTER] = {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                          CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0,
                          CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, -1},
};

static const char *const no_algo_text[3] = {
    [CUDA_CONV_FWD] = "conv2d: no forward algorithm for this shape",
    [CUDA_CONV_DATA] = "conv2d_grad: no backward-data algorithm for this shape",
    [CUDA_CONV_FILTER] = "conv2d_grad: no backward-filter algorithm for this shape",
};

/* fp32 runs every algorithm in FMA math, whatever math type the heuristics
 * name: CUDNN_DEFAULT_MATH would let an Ampere or later GPU use TF32. */
static int take(cuda_dev_t *d, cuda_conv_plan_t *p, cuda_conv_dir_t dir, int algo,
                cudnnMathType_t math)
{
    size_t ws = 0;
    if (d->precision == CUDA_PREC_FP32)
        math = CUDNN_FMA_MATH;
    if (cudnnSetConvolutionMathType(p->conv, math) != CUDNN_STATUS_SUCCESS ||
        ws_size(d, p, dir, algo, &ws) != CUDNN_STATUS_SUCCESS)
        return -1;
    cuda_conv_algo_t *a = &p->algo[dir];
    *a = (cuda_conv_algo_t){.have = true, .algo = algo, .math = math, .ws = ws};
    return 0;
}

int cuda_conv_choose(cuda_dev_t *d, cuda_conv_plan_t *p, cuda_conv_dir_t dir)
{
    cudnnMathType_t base = d->precision == CUDA_PREC_FP32 ? CUDNN_FMA_MATH
                                                          : CUDNN_DEFAULT_MATH;
    cuda_algo_cand_t c[MAX_ALGOS];
    int got = 0, order[MAX_ALGOS];
    /* The heuristics answer for the descriptor's math type. */
    int rc = 0;
    CUDA_DNN_TRY(d, cudnnSetConvolutionMathType(p->conv, base), out);
    if ((rc = heuristics(d, p, dir, c, &got)) != 0)
        return rc;
    int n = cuda_algo_rank(d->precision, dir, c, got, order);
    for (int i = 0; i < n; i++)
        if (take(d, p, dir, c[order[i]].algo, c[order[i]].math) == 0)
            return 0;
    for (int i = 0; fallback[dir][i] >= 0; i++)
        if (take(d, p, dir, fallback[dir][i], base) == 0)
            return 0;
    rc = cuda_dnn_fail(d, no_algo_text[dir], CUDNN_STATUS_NOT_SUPPORTED);
out:
    return rc;
}

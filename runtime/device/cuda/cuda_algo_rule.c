/* The rule of cuda_algo.c as pure functions of cuDNN's enums. */
#include "cuda_algo_rule.h"

bool cuda_algo_is_transform(cuda_conv_dir_t dir, int algo)
{
    switch (dir) {
    case CUDA_CONV_FWD:
        return algo < 0 || algo >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT ||
               algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT ||
               algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
               algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD ||
               algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
    case CUDA_CONV_DATA:
        return algo < 0 || algo >= CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT ||
               algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT ||
               algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
               algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD ||
               algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
    case CUDA_CONV_FILTER:
        return algo < 0 || algo >= CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT ||
               algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT ||
               algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
               algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD ||
               algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
    }
    return true;
}

bool cuda_algo_math_ok(cuda_precision_t prec, cudnnMathType_t math)
{
    if (prec == CUDA_PREC_FP32)
        return math == CUDNN_FMA_MATH || math == CUDNN_DEFAULT_MATH;
    return true;
}

int cuda_algo_rank(cuda_precision_t prec, cuda_conv_dir_t dir, const cuda_algo_cand_t *c,
                   int got, int *order)
{
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < got; i++)
            if (c[i].status == CUDNN_STATUS_SUCCESS &&
                !cuda_algo_is_transform(dir, c[i].algo) &&
                cuda_algo_math_ok(prec, c[i].math) && c[i].deterministic == (pass == 0))
                order[n++] = i;
    return n;
}

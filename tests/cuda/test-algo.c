/* The rule that picks a cuDNN convolution algorithm (cuda_algo_rule.c),
 * checked on heuristic answers made up to look like cuDNN's: it needs
 * cuDNN's headers, not a GPU. */
#include <criterion/criterion.h>

#include "runtime/device/cuda/cuda_algo_rule.h"

#define OK CUDNN_STATUS_SUCCESS

/* What cuDNN 9.19 answered on an H100 for layer 1's backward filter at
 * batch 32, in its order: Winograd-nonfused first, the answer that gave a
 * dw 7% off. */
Test(cuda_algo, winograd_nonfused_is_never_chosen_for_float32_even_when_ranked_first)
{
    const cuda_algo_cand_t c[] = {
        {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, OK, true, CUDNN_FMA_MATH},
        {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING, OK, true, CUDNN_FMA_MATH},
        {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, OK, false, CUDNN_FMA_MATH},
        {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, OK, true, CUDNN_FMA_MATH},
        {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, OK, true, CUDNN_FMA_MATH},
        {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, OK, false, CUDNN_FMA_MATH},
    };
    int order[6];
    for (int prec = CUDA_PREC_FP32; prec <= CUDA_PREC_TF32; prec++) {
        int n = cuda_algo_rank((cuda_precision_t)prec, CUDA_CONV_FILTER, c, 6, order);
        cr_assert_eq(n, 3, "precision %d: %d candidates", prec, n);
        cr_assert_eq(c[order[0]].algo, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
                     "the deterministic one first");
        cr_assert_eq(c[order[1]].algo, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0);
        cr_assert_eq(c[order[2]].algo, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3);
    }
}

Test(cuda_algo, every_transform_family_is_refused_in_every_direction)
{
    const struct {
        cuda_conv_dir_t dir;
        int algo;
        bool transform;
    } t[] = {
        {CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, false},
        {CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, false},
        {CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_GEMM, false},
        {CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, false},
        {CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_FFT, true},
        {CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, true},
        {CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, true},
        {CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, true},
        {CUDA_CONV_FWD, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, true},
        {CUDA_CONV_DATA, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, false},
        {CUDA_CONV_DATA, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, false},
        {CUDA_CONV_DATA, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, true},
        {CUDA_CONV_DATA, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, true},
        {CUDA_CONV_DATA, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD, true},
        {CUDA_CONV_DATA, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, true},
        {CUDA_CONV_DATA, -1, true},
        {CUDA_CONV_FILTER, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, false},
        {CUDA_CONV_FILTER, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, false},
        {CUDA_CONV_FILTER, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, false},
        {CUDA_CONV_FILTER, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, true},
        {CUDA_CONV_FILTER, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING, true},
        {CUDA_CONV_FILTER, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD, true},
        {CUDA_CONV_FILTER, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, true},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        cr_assert_eq(cuda_algo_is_transform(t[i].dir, t[i].algo), t[i].transform,
                     "direction %d algorithm %d", t[i].dir, t[i].algo);
        cuda_algo_cand_t c = {t[i].algo, OK, true, CUDNN_FMA_MATH};
        int order[1];
        cr_assert_eq(cuda_algo_rank(CUDA_PREC_FP32, t[i].dir, &c, 1, order),
                     t[i].transform ? 0 : 1, "direction %d algorithm %d", t[i].dir,
                     t[i].algo);
    }
}

Test(cuda_algo, fp32_refuses_tensor_core_math_and_tf32_allows_it)
{
    const cuda_algo_cand_t c[] = {
        {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, OK, true, CUDNN_TENSOR_OP_MATH},
        {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, OK, true,
         CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION},
        {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, OK, true, CUDNN_FMA_MATH},
    };
    int order[3];
    cr_assert_eq(cuda_algo_rank(CUDA_PREC_FP32, CUDA_CONV_FWD, c, 3, order), 1);
    cr_assert_eq(order[0], 2);
    cr_assert_eq(cuda_algo_rank(CUDA_PREC_TF32, CUDA_CONV_FWD, c, 3, order), 3);
    cr_assert_eq(order[0], 0, "tf32 keeps the heuristics' order");
}

Test(cuda_algo, answers_that_did_not_run_are_skipped_and_nothing_left_is_zero)
{
    const cuda_algo_cand_t c[] = {
        {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_STATUS_NOT_SUPPORTED, true,
         CUDNN_FMA_MATH},
        {CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, OK, true, CUDNN_FMA_MATH},
        {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, OK, false, CUDNN_DEFAULT_MATH},
    };
    int order[3];
    cr_assert_eq(cuda_algo_rank(CUDA_PREC_FP32, CUDA_CONV_DATA, c, 3, order), 1);
    cr_assert_eq(order[0], 2);
    cr_assert_eq(cuda_algo_rank(CUDA_PREC_FP32, CUDA_CONV_DATA, c, 2, order), 0);
}

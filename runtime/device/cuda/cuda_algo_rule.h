/* runtime/device/cuda — the rule that picks a cuDNN convolution algorithm
 * (see cuda_algo.c), apart from the cuDNN calls that feed it, so that the
 * tests check it on machines without a GPU. Needs cuDNN's headers only:
 * nothing here calls the library. */
#ifndef FERRY_CUDA_ALGO_RULE_H
#define FERRY_CUDA_ALGO_RULE_H

#include <stdbool.h>

#include <cudnn.h>

/* The three directions a convolution plan chooses an algorithm for. */
typedef enum cuda_conv_dir {
    CUDA_CONV_FWD = 0,
    CUDA_CONV_DATA = 1,   /* backward data: dx */
    CUDA_CONV_FILTER = 2, /* backward filter: dw */
} cuda_conv_dir_t;

/* What the products and convolutions may compute in: fp32 is plain float32
 * FMA (the default, agreeing with the cpu); tf32 lets cuBLAS and cuDNN use
 * TF32 tensor cores on GPUs that have them; bf16 rounds the inputs of every
 * product and convolution to bfloat16 and sums in float32 (tensor-core
 * math allowed: a bfloat16 is exact in TF32). */
typedef enum cuda_precision {
    CUDA_PREC_FP32 = 0,
    CUDA_PREC_TF32 = 1,
    CUDA_PREC_BF16 = 2,
} cuda_precision_t;

/* One heuristic answer, whatever its direction. */
typedef struct cuda_algo_cand {
    int algo; /* that direction's cudnnConvolution*Algo_t */
    cudnnStatus_t status;
    bool deterministic;
    cudnnMathType_t math;
} cuda_algo_cand_t;

/* Whether `algo` of `dir` computes in a transformed domain (FFT,
 * FFT_TILING, WINOGRAD, WINOGRAD_NONFUSED): never used on float32. An
 * algorithm number the direction does not know counts as one. */
bool cuda_algo_is_transform(cuda_conv_dir_t dir, int algo);
/* Whether a candidate's math type is allowed at `prec`. */
bool cuda_algo_math_ok(cuda_precision_t prec, cudnnMathType_t math);
/* The candidates to try, in order, as indices into c[0..got) written to
 * order[] (room for got): those that ran, are no transform and use allowed
 * math; deterministic ones first, each group in the heuristics' order.
 * Returns how many. */
int cuda_algo_rank(cuda_precision_t prec, cuda_conv_dir_t dir, const cuda_algo_cand_t *c,
                   int got, int *order);

#endif

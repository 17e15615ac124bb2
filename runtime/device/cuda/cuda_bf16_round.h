/* runtime/device/cuda — float32 <-> bfloat16, the one rounding the bf16
 * precision uses, for the host (tests/cuda checks it against a reference
 * without a GPU) and for the kernels of cuda_kernels.cu alike. bfloat16 is
 * the top half of a float32: sign, the same 8 exponent bits, 7 mantissa
 * bits. Plain C (and C++ for nvcc); no CUDA header needed. */
#ifndef FERRY_CUDA_BF16_ROUND_H
#define FERRY_CUDA_BF16_ROUND_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define CUDA_HD __host__ __device__
#else
#define CUDA_HD
#endif

static inline CUDA_HD uint32_t cuda_f32_bits(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

static inline CUDA_HD float cuda_f32_of_bits(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* Round to nearest, ties to even (the hardware's and PyTorch's rounding);
 * past the largest bfloat16 goes to infinity; a NaN stays a NaN, made
 * quiet, its sign kept. */
static inline CUDA_HD uint16_t cuda_bf16_from_f32(float f)
{
    uint32_t u = cuda_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline CUDA_HD float cuda_f32_from_bf16(uint16_t h)
{
    return cuda_f32_of_bits((uint32_t)h << 16);
}

/* f rounded to the nearest bfloat16, as a float32 (exact in TF32 too). */
static inline CUDA_HD float cuda_bf16_round(float f)
{
    return cuda_f32_from_bf16(cuda_bf16_from_f32(f));
}

#endif

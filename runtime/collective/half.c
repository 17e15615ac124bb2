/* float32 <-> IEEE binary16 for --grad-compression fp16. The compiler's
 * _Float16 does the rounding (to nearest even, NaN and Inf kept); on a CPU
 * with F16C the hardware does it eight values at a time, which matters:
 * the software conversion costs more than sending the bytes it saves. */
#include <immintrin.h>
#include <string.h>

#include "coll_int.h"

static bool have_f16c(void)
{
    static int have = -1;
    if (have < 0)
        have = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
    return have;
}

static inline float h2f(uint16_t h)
{
    _Float16 v;
    memcpy(&v, &h, sizeof v);
    return (float)v;
}

static inline uint16_t f2h(float f)
{
    _Float16 v = (_Float16)f;
    uint16_t h;
    memcpy(&h, &v, sizeof h);
    return h;
}

__attribute__((target("avx,f16c"))) static size_t to_half_f16c(uint16_t *dst,
                                                               const float *src, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    return i;
}

__attribute__((target("avx,f16c"))) static size_t to_float_f16c(float *dst,
                                                                const uint16_t *src,
                                                                size_t n, bool add)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i)));
        if (add)
            v = _mm256_add_ps(v, _mm256_loadu_ps(dst + i));
        _mm256_storeu_ps(dst + i, v);
    }
    return i;
}

void rt_half_from_float(uint16_t *dst, const float *src, size_t n)
{
    size_t i = have_f16c() ? to_half_f16c(dst, src, n) : 0;
    for (; i < n; i++)
        dst[i] = f2h(src[i]);
}

void rt_half_to_float(float *dst, const uint16_t *src, size_t n)
{
    size_t i = have_f16c() ? to_float_f16c(dst, src, n, false) : 0;
    for (; i < n; i++)
        dst[i] = h2f(src[i]);
}

void rt_half_add_to_float(float *dst, const uint16_t *src, size_t n)
{
    size_t i = have_f16c() ? to_float_f16c(dst, src, n, true) : 0;
    for (; i < n; i++)
        dst[i] += h2f(src[i]);
}

void rt_half_round(float *x, size_t n)
{
    uint16_t tmp[256];
    for (size_t at = 0; at < n; at += 256) {
        size_t k = n - at < 256 ? n - at : 256;
        rt_half_from_float(tmp, x + at, k);
        rt_half_to_float(x + at, tmp, k);
    }
}

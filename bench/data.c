/* bench — deterministic payload generators. */
#include "data.h"

#include <math.h>
#include <string.h>

/* xorshift64*: fast, good enough for test data. */
static uint64_t next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [0, 1) with 24 bits. */
static float unit(uint64_t *s)
{
    return (float)(next(s) >> 40) * (1.0f / 16777216.0f);
}

const char *bench_data_name(bench_data_kind kind)
{
    return kind == BENCH_DATA_GRADIENT ? "gradient" : "random";
}

void bench_data_fill(float *f, size_t n, bench_data_kind kind, uint64_t seed)
{
    uint64_t s = seed ? seed : 0x9E3779B97F4A7C15ULL;
    if (kind == BENCH_DATA_RANDOM) {
        for (size_t i = 0; i < n; i++)
            f[i] = unit(&s) * 2.0f - 1.0f;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (next(&s) % 10 != 0) {
            f[i] = 0.0f;
            continue;
        }
        /* Box-Muller, one of the pair. */
        float u1 = unit(&s), u2 = unit(&s);
        if (u1 < 1e-7f)
            u1 = 1e-7f;
        f[i] = 1e-3f * sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
    }
}

void bench_touch(void *buf, size_t len)
{
    memset(buf, 0, len);
}

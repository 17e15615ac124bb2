/* runtime/device — the hash dropout's mask is drawn from, shared by the cpu
 * and cuda backends (C and nvcc's C++) so that a seed gives one mask on
 * every device. */
#ifndef FERRY_RUNTIME_DEVICE_HASH_H
#define FERRY_RUNTIME_DEVICE_HASH_H

#include <stdint.h>

#ifdef __CUDACC__
#define RT_HOST_DEVICE __host__ __device__
#else
#define RT_HOST_DEVICE
#endif

/* Element i's factor: 0 with probability p, else 1 / (1 - p) (splitmix64
 * of the seed and the index, its top 24 bits as a uniform in [0, 1)). */
static inline RT_HOST_DEVICE float rt_dropout_factor(uint64_t seed, uint64_t i, float p)
{
    uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    float u = (float)(z >> 40) * (1.0f / 16777216.0f);
    return u < p ? 0.0f : 1.0f / (1.0f - p);
}

#endif

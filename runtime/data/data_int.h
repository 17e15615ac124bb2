/* runtime/data — what its files share: a seeded random generator (the
 * shuffles and the synthetic set draw from it, so a seed means the same
 * numbers on every machine and every rank) and the arrays' allocator. */
#ifndef FERRY_RUNTIME_DATA_INT_H
#define FERRY_RUNTIME_DATA_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "runtime/data/data.h"

/* xoshiro256** seeded through splitmix64, with Box-Muller normals. Small,
 * fast and the same everywhere, unlike rand(3). Not for cryptography. */
typedef struct rt_rng {
    uint64_t s[4];
    double spare; /* Box-Muller draws two normals; the second waits here */
    bool has_spare;
} rt_rng;

/* Seeds `r` from (seed, stream): distinct streams of one seed are
 * independent sequences (the loader uses the epoch as the stream). */
void rt_rng_seed(rt_rng *r, uint64_t seed, uint64_t stream);
uint64_t rt_rng_next(rt_rng *r);
/* Uniform in [0, bound), without modulo bias; 0 when bound is 0. */
uint64_t rt_rng_below(rt_rng *r, uint64_t bound);
/* Uniform in (0, 1]: never 0, so log() of it is finite. */
double rt_rng_uniform(rt_rng *r);
/* Standard normal N(0, 1). */
double rt_rng_normal(rt_rng *r);

/* 64-byte aligned memory for n bytes (a whole number of cache lines,
 * at least one; 2 MiB-aligned transparent huge pages from 2 MiB up),
 * released with free(); NULL when out of memory. */
void *rt_data_alloc(size_t n);

#endif

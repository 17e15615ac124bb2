/* bench — test payloads: dense random float32 and gradient-like float32. */
#ifndef FERRY_BENCH_DATA_H
#define FERRY_BENCH_DATA_H

#include <stddef.h>
#include <stdint.h>

typedef enum { BENCH_DATA_RANDOM = 0, BENCH_DATA_GRADIENT = 1 } bench_data_kind;

/* "random" or "gradient". */
const char *bench_data_name(bench_data_kind kind);

/* Fills f[0..n) from a fixed seed: RANDOM is uniform in [-1, 1); GRADIENT is
 * 90% exact zeros, the rest normals with standard deviation 1e-3. */
void bench_data_fill(float *f, size_t n, bench_data_kind kind, uint64_t seed);

/* Writes to every page of buf[0..len) so that later use takes no page fault. */
void bench_touch(void *buf, size_t len);

#endif

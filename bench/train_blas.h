/* bench/train — the compute baseline: the eight sgemm products of one
 * training step of the MLP 784-256-128-10, with cblas_sgemm and nothing
 * else (no activations, no loss, no optimizer, no data), on operands that
 * stay in place. What the model's step costs at best on this BLAS. */
#ifndef FERRY_BENCH_TRAIN_BLAS_H
#define FERRY_BENCH_TRAIN_BLAS_H

#include <stddef.h>

typedef struct bench_blas bench_blas;

/* Operands for batch `batch`, filled with small pseudo-random values.
 * NULL when out of memory. */
bench_blas *bench_blas_create(int batch);
void bench_blas_destroy(bench_blas *b);

/* Floating-point operations of one step's eight products. */
double bench_blas_step_flops(const bench_blas *b);

/* Runs `steps` steps of the eight products; returns the seconds taken. */
double bench_blas_run(bench_blas *b, int steps);

#endif

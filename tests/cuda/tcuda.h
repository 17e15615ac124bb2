/* tests/cuda — the cuda backend's checks. Each GPU test opens a fresh cuda
 * device (G), and the cpu device (C) where it compares the two; with no GPU
 * visible tc_gpu() prints "skipped: <why>" and skips the test, so the suite
 * builds and runs everywhere and checks the GPU where there is one.
 *
 * Results are compared in double against references computed in double (or
 * against the cpu backend's), by the largest error relative to the largest
 * reference value. */
#ifndef FERRY_TESTS_CUDA_TCUDA_H
#define FERRY_TESTS_CUDA_TCUDA_H

#include <stddef.h>
#include <stdint.h>

#include <criterion/criterion.h>

#include <ferry/device.h>

#define TC_TOL 1e-4

extern ferry_device_t *G, *C;

/* Opens "cuda" into G, or prints "skipped: <why>" and skips the test. */
void tc_gpu(void);
/* Opens "cpu" into C (asserts it opened). */
void tc_cpu(void);
/* Checks that G has no failure pending, closes G and C, and fails the test
 * if anything leaked. */
void tc_finish(void);

/* A deterministic generator (splitmix64): uniform in [lo, hi). */
void tc_rand(double *x, size_t n, double lo, double hi, uint64_t *state);
/* calloc that asserts; freed with free(). */
double *tc_new(size_t n);
/* Device copies of host doubles as floats, and back (download asserts 0). */
float *tc_put(ferry_device_t *dev, const double *host, size_t n);
void tc_get(ferry_device_t *dev, double *host, const float *p, size_t n);
int32_t *tc_put_labels(ferry_device_t *dev, const int32_t *labels, size_t n);

/* Asserts max |got - want| <= tol * max(1e-30, max |want|). */
void tc_close(const double *got, const double *want, size_t n, double tol,
              const char *what);

#endif

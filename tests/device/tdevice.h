/* tests/device — the cpu backend's checks against double-precision
 * references. Each test opens a fresh cpu device (D) and ends with
 * td_finish(), which closes it and runs the leak check in the test body
 * (Criterion 2.4.1 ignores failures in .fini).
 *
 * Gradients are checked against central differences of a reference forward
 * pass computed in double, so the only float error is the device's own;
 * values are compared by the largest error relative to the largest
 * reference value (TD_TOL unless a test says otherwise). */
#ifndef FERRY_TESTS_DEVICE_TDEVICE_H
#define FERRY_TESTS_DEVICE_TDEVICE_H

#include <stddef.h>
#include <stdint.h>

#include <criterion/criterion.h>

#include <ferry/device.h>

#define TD_TOL  1e-4
#define TD_STEP 1e-5 /* finite-difference step, in double */

extern ferry_device_t *D;

/* Opens the cpu device into D (asserts it opened). */
void td_open(void);
/* Closes D and fails the test if anything leaked. */
void td_finish(void);

/* A deterministic generator (splitmix64): uniform in [lo, hi). */
void td_rand(double *x, size_t n, double lo, double hi, uint64_t *state);
/* Device copies of host doubles as floats, and back. */
float *td_put(const double *host, size_t n);
float *td_zeros(size_t n);
void td_get(double *host, const float *dev, size_t n);
/* malloc that asserts; freed with free(). */
double *td_new(size_t n);

/* Asserts max |got - want| <= tol * max(1e-30, max |want|). */
void td_close(const double *got, const double *want, size_t n, double tol,
              const char *what);

/* grad[i] = d f / d x[i] by central differences; x is restored. */
typedef double (*td_fn)(const double *x, void *ctx);
void td_numgrad(td_fn f, double *x, size_t n, void *ctx, double *grad);

/* sum a[i] b[i] */
double td_dot(const double *a, const double *b, size_t n);

#endif

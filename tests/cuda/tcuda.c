#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ferry/error.h>

#include "runtime/device/device.h"
#include "tcommon.h"
#include "tcuda.h"

ferry_device_t *G, *C;

void tc_gpu(void)
{
    char err[512] = "";
    int rc = rt_device_open("cuda", &G, err, sizeof err);
    if (rc == FERRY_ENODEV) {
        cr_assert(err[0] != '\0', "FERRY_ENODEV without a reason");
        /* The failed open must not have leaked either. */
        tcom_assert_no_leaks();
        fprintf(stderr, "skipped: %s\n", err);
        cr_skip_test("%s", err);
    }
    cr_assert_eq(rc, 0, "rt_device_open(cuda): %d %s", rc, err);
    cr_assert_not_null(G);
}

void tc_cpu(void)
{
    char err[256] = "";
    int rc = rt_device_open("cpu", &C, err, sizeof err);
    cr_assert_eq(rc, 0, "rt_device_open(cpu): %d %s", rc, err);
    cr_assert_not_null(C);
}

void tc_finish(void)
{
    if (G) {
        int rc = G->ops->sync(G);
        cr_assert_eq(rc, 0, "a failure was pending on %s: %s", G->name,
                     ferry_strerror(rc));
    }
    rt_device_close(G);
    rt_device_close(C);
    G = C = NULL;
    tcom_assert_no_leaks();
}

void tc_rand(double *x, size_t n, double lo, double hi, uint64_t *state)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        x[i] = lo + (hi - lo) * (double)(z >> 11) / 9007199254740992.0;
    }
}

double *tc_new(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof(double));
    cr_assert_not_null(p);
    return p;
}

float *tc_put(ferry_device_t *dev, const double *host, size_t n)
{
    float *tmp = malloc(n * sizeof(float) + 1);
    cr_assert_not_null(tmp);
    for (size_t i = 0; i < n; i++)
        tmp[i] = (float)host[i];
    float *p = dev->ops->alloc(dev, n * sizeof(float));
    cr_assert_not_null(p, "%s: alloc of %zu floats", dev->name, n);
    cr_assert_eq(dev->ops->upload(dev, p, tmp, n * sizeof(float)), 0);
    free(tmp);
    return p;
}

void tc_get(ferry_device_t *dev, double *host, const float *p, size_t n)
{
    float *tmp = malloc(n * sizeof(float) + 1);
    cr_assert_not_null(tmp);
    int rc = dev->ops->download(dev, tmp, p, n * sizeof(float));
    cr_assert_eq(rc, 0, "%s: download: %s", dev->name, ferry_strerror(rc));
    for (size_t i = 0; i < n; i++)
        host[i] = tmp[i];
    free(tmp);
}

int32_t *tc_put_labels(ferry_device_t *dev, const int32_t *labels, size_t n)
{
    int32_t *p = dev->ops->alloc(dev, n * sizeof(int32_t));
    cr_assert_not_null(p);
    cr_assert_eq(dev->ops->upload(dev, p, labels, n * sizeof(int32_t)), 0);
    return p;
}

void tc_close(const double *got, const double *want, size_t n, double tol,
              const char *what)
{
    double scale = 1e-30, worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(want[i]) > scale)
            scale = fabs(want[i]);
    for (size_t i = 0; i < n; i++) {
        double e = fabs(got[i] - want[i]);
        if (!(e <= worst)) { /* NaN counts as the worst */
            worst = e;
            at = i;
        }
    }
    cr_assert(worst <= tol * scale,
              "%s: [%zu] got %.9g want %.9g (error %.3g, limit %.3g)", what, at,
              n ? got[at] : 0.0, n ? want[at] : 0.0, worst, tol * scale);
}

#include <math.h>
#include <stdlib.h>

#include "runtime/device/device.h"
#include "tcommon.h"
#include "tdevice.h"

ferry_device_t *D;

void td_open(void)
{
    char err[256] = "";
    int rc = rt_device_open("cpu", &D, err, sizeof err);
    cr_assert_eq(rc, 0, "rt_device_open(cpu): %d %s", rc, err);
    cr_assert_not_null(D);
}

void td_finish(void)
{
    rt_device_close(D);
    D = NULL;
    tcom_assert_no_leaks();
}

void td_rand(double *x, size_t n, double lo, double hi, uint64_t *state)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        x[i] = lo + (hi - lo) * (double)(z >> 11) / 9007199254740992.0;
    }
}

float *td_zeros(size_t n)
{
    float *d = D->ops->alloc(D, n * sizeof(float));
    cr_assert_not_null(d);
    D->ops->fill(D, d, 0.f, n);
    return d;
}

float *td_put(const double *host, size_t n)
{
    float *tmp = malloc(n * sizeof(float) + 1);
    cr_assert_not_null(tmp);
    for (size_t i = 0; i < n; i++)
        tmp[i] = (float)host[i];
    float *d = D->ops->alloc(D, n * sizeof(float));
    cr_assert_not_null(d);
    cr_assert_eq(D->ops->upload(D, d, tmp, n * sizeof(float)), 0);
    free(tmp);
    return d;
}

void td_get(double *host, const float *dev, size_t n)
{
    float *tmp = malloc(n * sizeof(float) + 1);
    cr_assert_not_null(tmp);
    cr_assert_eq(D->ops->download(D, tmp, dev, n * sizeof(float)), 0);
    for (size_t i = 0; i < n; i++)
        host[i] = tmp[i];
    free(tmp);
}

double *td_new(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof(double));
    cr_assert_not_null(p);
    return p;
}

void td_close(const double *got, const double *want, size_t n, double tol,
              const char *what)
{
    double scale = 1e-30, worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(want[i]) > scale)
            scale = fabs(want[i]);
    for (size_t i = 0; i < n; i++) {
        double e = fabs(got[i] - want[i]);
        if (isnan(e)) {
            worst = INFINITY;
            at = i;
            break;
        }
        if (e > worst) {
            worst = e;
            at = i;
        }
    }
    cr_assert(worst <= tol * scale,
              "%s: element %zu is %.9g, want %.9g (error %.3g, allowed %.3g)", what, at,
              got[at], want[at], worst, tol * scale);
}

void td_numgrad(td_fn f, double *x, size_t n, void *ctx, double *grad)
{
    for (size_t i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + TD_STEP;
        double up = f(x, ctx);
        x[i] = keep - TD_STEP;
        double down = f(x, ctx);
        x[i] = keep;
        grad[i] = (up - down) / (2 * TD_STEP);
    }
}

double td_dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

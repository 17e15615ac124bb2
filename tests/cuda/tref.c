/* The double-precision references. The convolution runs one pass over
 * (sample, filter, channel, tap, output row) with the output columns that
 * touch the input in the innermost loop, so that the CNN's second layer at
 * batch 1024 (2.6e9 taps) takes seconds, not minutes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ferry/error.h>

#include "tcuda.h"
#include "tref.h"

/* The output columns [lo, hi) whose tap q lands inside the input row. */
static void tap_range(int q, int pad, int stride, int w, int ow, int *lo, int *hi)
{
    int a = pad - q; /* ox * stride >= a */
    *lo = a > 0 ? (a + stride - 1) / stride : 0;
    int b = w - 1 + pad - q; /* ox * stride <= b */
    *hi = b < 0 ? 0 : b / stride + 1;
    if (*hi > ow)
        *hi = ow;
    if (*lo > *hi)
        *lo = *hi;
}

void tref_conv(const ferry_conv_t *s, const double *x, const double *w,
               const double *bias, const double *dy, double *y, double *dx, double *dw,
               double *dbias)
{
    size_t plane = (size_t)s->oh * s->ow, in = (size_t)s->h * s->w;
    size_t nx = (size_t)s->n * s->c * in, ny = (size_t)s->n * s->k * plane;
    size_t nw = (size_t)s->k * s->c * s->r * s->s;
    if (y)
        for (size_t i = 0; i < ny; i++)
            y[i] = bias ? bias[(i / plane) % (size_t)s->k] : 0;
    if (dx)
        memset(dx, 0, nx * sizeof *dx);
    if (dw)
        memset(dw, 0, nw * sizeof *dw);
    if (dbias) {
        memset(dbias, 0, (size_t)s->k * sizeof *dbias);
        for (size_t i = 0; i < ny; i++)
            dbias[(i / plane) % (size_t)s->k] += dy[i];
    }
    for (int n = 0; n < s->n; n++)
        for (int k = 0; k < s->k; k++)
            for (int c = 0; c < s->c; c++) {
                const double *xp = x + ((size_t)n * s->c + c) * in;
                double *dxp = dx ? dx + ((size_t)n * s->c + c) * in : NULL;
                size_t yo = ((size_t)n * s->k + k) * plane;
                for (int r = 0; r < s->r; r++)
                    for (int q = 0; q < s->s; q++) {
                        size_t wi = (((size_t)k * s->c + c) * s->r + r) * s->s + q;
                        double wv = w[wi], acc = 0;
                        int lo, hi;
                        tap_range(q, s->pad, s->stride, s->w, s->ow, &lo, &hi);
                        for (int oy = 0; oy < s->oh; oy++) {
                            int iy = oy * s->stride + r - s->pad;
                            if (iy < 0 || iy >= s->h)
                                continue;
                            /* Signed: the row's first tap may lie left of
                             * it; the columns in [lo, hi) never do. */
                            long row = (long)iy * s->w + q - s->pad;
                            size_t yr = yo + (size_t)oy * s->ow;
                            for (int ox = lo; ox < hi; ox++) {
                                size_t xi = (size_t)(row + (long)ox * s->stride);
                                if (y)
                                    y[yr + ox] += xp[xi] * wv;
                                if (dy) {
                                    if (dxp)
                                        dxp[xi] += wv * dy[yr + ox];
                                    acc += xp[xi] * dy[yr + ox];
                                }
                            }
                        }
                        if (dw)
                            dw[wi] += acc;
                    }
            }
}

void tref_pool(const ferry_pool_t *p, const double *x, const double *dy, double *y,
               double *dx)
{
    size_t planes = (size_t)p->n * p->c, in = (size_t)p->h * p->w;
    size_t out = (size_t)p->oh * p->ow;
    if (dx)
        memset(dx, 0, planes * in * sizeof *dx);
    for (size_t pl = 0; pl < planes; pl++)
        for (int oy = 0; oy < p->oh; oy++)
            for (int ox = 0; ox < p->ow; ox++) {
                const double *xp = x + pl * in;
                size_t best = (size_t)oy * p->stride * p->w + (size_t)ox * p->stride;
                for (int i = 0; i < p->size; i++)
                    for (int j = 0; j < p->size; j++) {
                        size_t at = (size_t)(oy * p->stride + i) * p->w +
                                    (size_t)ox * p->stride + j;
                        if (xp[at] > xp[best])
                            best = at;
                    }
                size_t o = pl * out + (size_t)oy * p->ow + ox;
                y[o] = xp[best];
                if (dx)
                    dx[pl * in + best] += dy[o];
            }
}

double tref_error(const double *got, const double *want, size_t n)
{
    double scale = 1e-30, worst = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(want[i]) > scale)
            scale = fabs(want[i]);
    for (size_t i = 0; i < n; i++) {
        double e = fabs(got[i] - want[i]);
        if (!(e <= worst)) /* NaN counts as the worst */
            worst = isnan(e) ? INFINITY : e;
    }
    return worst / scale;
}

/* Uniform floats in [lo, hi), kept in double. */
static double *rand_floats(size_t n, double lo, double hi, uint64_t *seed)
{
    double *p = tc_new(n);
    tc_rand(p, n, lo, hi, seed);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)p[i];
    return p;
}

static void expect(ferry_device_t *dev, const float *p, const double *want, size_t n,
                   double tol, const char *what, const char *shape)
{
    double *got = tc_new(n);
    tc_get(dev, got, p, n);
    double e = tref_error(got, want, n);
    free(got);
    cr_assert(e <= tol, "%s: %s at %s: error %.3g of the largest value, limit %.3g",
              dev->name, what, shape, e, tol);
}

void tref_check_conv(ferry_device_t *dev, ferry_conv_t s, unsigned long long seed,
                     double tol)
{
    cr_assert(ferry_conv_shape(&s));
    size_t nx = (size_t)s.n * s.c * s.h * s.w, ny = (size_t)s.n * s.k * s.oh * s.ow;
    size_t nw = (size_t)s.k * s.c * s.r * s.s, nk = (size_t)s.k;
    uint64_t st = seed;
    double *x = rand_floats(nx, -1, 1, &st), *w = rand_floats(nw, -0.5, 0.5, &st);
    double *b = rand_floats(nk, -1, 1, &st), *dy = rand_floats(ny, -1, 1, &st);
    double *y = tc_new(ny), *dx = tc_new(nx), *dw = tc_new(nw), *db = tc_new(nk);
    tref_conv(&s, x, w, b, dy, y, dx, dw, db);

    char shape[96];
    snprintf(shape, sizeof shape, "n=%d c=%d %dx%d k=%d %dx%d pad %d stride %d", s.n, s.c,
             s.h, s.w, s.k, s.r, s.s, s.pad, s.stride);
    const ferry_device_ops_t *o = dev->ops;
    float *gx = tc_put(dev, x, nx), *gw = tc_put(dev, w, nw), *gb = tc_put(dev, b, nk);
    float *gdy = tc_put(dev, dy, ny), *gy = o->alloc(dev, ny * sizeof(float));
    float *gdx = o->alloc(dev, nx * sizeof(float)), *gdw = o->alloc(dev, nw * sizeof(float));
    float *gdb = o->alloc(dev, nk * sizeof(float));
    cr_assert(gy && gdx && gdw && gdb, "%s: alloc at %s", dev->name, shape);
    int rc = o->conv2d(dev, &s, gx, gw, gb, gy);
    cr_assert_eq(rc, 0, "%s: conv2d at %s: %s", dev->name, shape, ferry_strerror(rc));
    expect(dev, gy, y, ny, tol, "conv2d y", shape);
    rc = o->conv2d_grad(dev, &s, gx, gw, gdy, gdx, gdw, gdb);
    cr_assert_eq(rc, 0, "%s: conv2d_grad at %s: %s", dev->name, shape, ferry_strerror(rc));
    expect(dev, gdx, dx, nx, tol, "conv2d_grad dx", shape);
    expect(dev, gdw, dw, nw, tol, "conv2d_grad dw", shape);
    expect(dev, gdb, db, nk, tol, "conv2d_grad dbias", shape);
    /* The first layer wants no dx: dw alone must be the same. */
    o->fill(dev, gdw, 0.0f, nw);
    cr_assert_eq(o->conv2d_grad(dev, &s, gx, gw, gdy, NULL, gdw, NULL), 0);
    expect(dev, gdw, dw, nw, tol, "conv2d_grad dw without dx", shape);

    float *dev_all[] = {gx, gw, gb, gdy, gy, gdx, gdw, gdb};
    for (size_t i = 0; i < sizeof dev_all / sizeof *dev_all; i++)
        o->free(dev, dev_all[i]);
    double *host[] = {x, w, b, dy, y, dx, dw, db};
    for (size_t i = 0; i < sizeof host / sizeof *host; i++)
        free(host[i]);
}

void tref_check_pool(ferry_device_t *dev, ferry_pool_t p, unsigned long long seed,
                     double tol)
{
    cr_assert(ferry_pool_shape(&p));
    size_t nx = (size_t)p.n * p.c * p.h * p.w, ny = (size_t)p.n * p.c * p.oh * p.ow;
    uint64_t st = seed;
    double *x = rand_floats(nx, -0.5, 1.5, &st), *dy = rand_floats(ny, -1, 1, &st);
    for (size_t i = 0; i < nx; i++) /* after a relu: ties among zeros */
        x[i] = x[i] > 0 ? x[i] : 0;
    double *y = tc_new(ny), *dx = tc_new(nx);
    tref_pool(&p, x, dy, y, dx);
    char shape[96];
    snprintf(shape, sizeof shape, "n=%d c=%d %dx%d size %d stride %d", p.n, p.c, p.h, p.w,
             p.size, p.stride);
    const ferry_device_ops_t *o = dev->ops;
    float *gx = tc_put(dev, x, nx), *gdy = tc_put(dev, dy, ny);
    float *gy = o->alloc(dev, ny * sizeof(float)), *gdx = o->alloc(dev, nx * sizeof(float));
    cr_assert(gy && gdx);
    int rc = o->maxpool(dev, &p, gx, gy);
    cr_assert_eq(rc, 0, "%s: maxpool at %s: %s", dev->name, shape, ferry_strerror(rc));
    expect(dev, gy, y, ny, 0, "maxpool y", shape);
    rc = o->maxpool_grad(dev, &p, gx, gy, gdy, gdx);
    cr_assert_eq(rc, 0, "%s: maxpool_grad at %s: %s", dev->name, shape, ferry_strerror(rc));
    expect(dev, gdx, dx, nx, tol, "maxpool_grad dx", shape);
    o->free(dev, gx);
    o->free(dev, gdy);
    o->free(dev, gy);
    o->free(dev, gdx);
    free(x);
    free(dy);
    free(y);
    free(dx);
}

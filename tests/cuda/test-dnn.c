/* Convolutions and max pooling on the GPU (cuDNN, and our maxpool_grad)
 * against direct double-precision loops (tref.c), at small and odd shapes;
 * test-cnn-shapes.c checks the CNN's own. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <ferry/error.h>

#include "tcuda.h"
#include "tref.h"

static void check_conv(ferry_conv_t s, bool with_bias, uint64_t seed)
{
    cr_assert(ferry_conv_shape(&s));
    size_t nx = (size_t)s.n * s.c * s.h * s.w, ny = (size_t)s.n * s.k * s.oh * s.ow;
    size_t nw = (size_t)s.k * s.c * s.r * s.s;
    double *x = tc_new(nx), *w = tc_new(nw), *b = tc_new(s.k), *dy = tc_new(ny);
    double *y = tc_new(ny), *dx = tc_new(nx), *dw = tc_new(nw), *db = tc_new(s.k);
    double *got = tc_new(nx > ny ? (nx > nw ? nx : nw) : (ny > nw ? ny : nw));
    tc_rand(x, nx, -1, 1, &seed);
    tc_rand(w, nw, -1, 1, &seed);
    tc_rand(b, s.k, -1, 1, &seed);
    tc_rand(dy, ny, -1, 1, &seed);
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)x[i];
    for (size_t i = 0; i < nw; i++)
        w[i] = (float)w[i];
    for (size_t i = 0; i < ny; i++)
        dy[i] = (float)dy[i];
    for (int k = 0; k < s.k; k++)
        b[k] = (float)b[k];
    tref_conv(&s, x, w, with_bias ? b : NULL, dy, y, dx, dw, db);

    float *gx = tc_put(G, x, nx), *gw = tc_put(G, w, nw), *gb = tc_put(G, b, s.k);
    float *gdy = tc_put(G, dy, ny);
    float *gy = G->ops->alloc(G, ny * sizeof(float)), *gdx = G->ops->alloc(G, nx * 4);
    float *gdw = G->ops->alloc(G, nw * sizeof(float)), *gdb = G->ops->alloc(G, s.k * 4);
    cr_assert(gy && gdx && gdw && gdb);
    char what[160];
    snprintf(what, sizeof what, "conv n%d c%d %dx%d k%d %dx%d pad %d stride %d%s", s.n,
             s.c, s.h, s.w, s.k, s.r, s.s, s.pad, s.stride, with_bias ? " bias" : "");

    int rc = G->ops->conv2d(G, &s, gx, gw, with_bias ? gb : NULL, gy);
    cr_assert_eq(rc, 0, "%s: conv2d %s", what, ferry_strerror(rc));
    tc_get(G, got, gy, ny);
    tc_close(got, y, ny, TC_TOL, what);

    rc = G->ops->conv2d_grad(G, &s, gx, gw, gdy, gdx, gdw, gdb);
    cr_assert_eq(rc, 0, "%s: conv2d_grad %s", what, ferry_strerror(rc));
    tc_get(G, got, gdx, nx);
    tc_close(got, dx, nx, TC_TOL, "dx");
    tc_get(G, got, gdw, nw);
    tc_close(got, dw, nw, TC_TOL, "dw");
    tc_get(G, got, gdb, s.k);
    tc_close(got, db, s.k, TC_TOL, "dbias");
    /* The first layer's dx is not wanted: dw alone is the same. */
    G->ops->fill(G, gdw, 0.0f, nw);
    cr_assert_eq(G->ops->conv2d_grad(G, &s, gx, gw, gdy, NULL, gdw, NULL), 0);
    tc_get(G, got, gdw, nw);
    tc_close(got, dw, nw, TC_TOL, "dw without dx");

    float *all[] = {gx, gw, gb, gdy, gy, gdx, gdw, gdb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        G->ops->free(G, all[i]);
    double *host[] = {x, w, b, dy, y, dx, dw, db, got};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++)
        free(host[i]);
}

Test(cuda_conv, conv2d_and_its_gradients_match_direct_loops)
{
    tc_gpu();
    check_conv((ferry_conv_t){.n = 2,
                              .c = 1,
                              .h = 28,
                              .w = 28,
                              .k = 8,
                              .r = 5,
                              .s = 5,
                              .pad = 2,
                              .stride = 1},
               true, 51);
    check_conv((ferry_conv_t){.n = 3,
                              .c = 8,
                              .h = 14,
                              .w = 14,
                              .k = 16,
                              .r = 3,
                              .s = 3,
                              .pad = 1,
                              .stride = 1},
               false, 52);
    check_conv((ferry_conv_t){.n = 2,
                              .c = 3,
                              .h = 9,
                              .w = 11,
                              .k = 4,
                              .r = 3,
                              .s = 2,
                              .pad = 0,
                              .stride = 2},
               true, 53);
    /* Again, from the cache of plans. */
    check_conv((ferry_conv_t){.n = 2,
                              .c = 1,
                              .h = 28,
                              .w = 28,
                              .k = 8,
                              .r = 5,
                              .s = 5,
                              .pad = 2,
                              .stride = 1},
               true, 54);
    tc_finish();
}

Test(cuda_conv, a_shape_that_does_not_add_up_is_einval)
{
    tc_gpu();
    ferry_conv_t s = {
        .n = 1, .c = 1, .h = 8, .w = 8, .k = 1, .r = 3, .s = 3, .stride = 1};
    cr_assert(ferry_conv_shape(&s));
    s.oh++;
    float *p = G->ops->alloc(G, 1024 * sizeof(float));
    cr_assert_eq(G->ops->conv2d(G, &s, p, p, NULL, p), FERRY_EINVAL);
    cr_assert_eq(G->ops->conv2d_grad(G, &s, p, p, p, p, p, p), FERRY_EINVAL);
    ferry_pool_t q = {.n = 1, .c = 1, .h = 2, .w = 2, .size = 3, .stride = 1};
    cr_assert_eq(G->ops->maxpool(G, &q, p, p), FERRY_EINVAL);
    cr_assert_eq(G->ops->maxpool_grad(G, &q, p, p, p, p), FERRY_EINVAL);
    G->ops->free(G, p);
    tc_finish();
}

/* The first maximum of each window (row-major), as an offset in the plane. */
static size_t first_max(const ferry_pool_t *p, const double *plane, int oy, int ox)
{
    size_t best = (size_t)oy * p->stride * p->w + (size_t)ox * p->stride;
    for (int i = 0; i < p->size; i++)
        for (int j = 0; j < p->size; j++) {
            size_t at = (size_t)(oy * p->stride + i) * p->w + ox * p->stride + j;
            if (plane[at] > plane[best])
                best = at;
        }
    return best;
}

static void check_pool(ferry_pool_t p, bool ties, uint64_t seed)
{
    cr_assert(ferry_pool_shape(&p));
    size_t planes = (size_t)p.n * p.c, in = (size_t)p.h * p.w, out = (size_t)p.oh * p.ow;
    double *x = tc_new(planes * in), *dy = tc_new(planes * out),
           *y = tc_new(planes * out);
    double *dx = tc_new(planes * in), *got = tc_new(planes * in);
    tc_rand(x, planes * in, -1, 1, &seed);
    tc_rand(dy, planes * out, -1, 1, &seed);
    for (size_t i = 0; i < planes * in; i++) /* few values: many ties */
        x[i] = ties ? floor(x[i] * 1.5) : (float)x[i];
    for (size_t i = 0; i < planes * out; i++)
        dy[i] = (float)dy[i];
    for (size_t pl = 0; pl < planes; pl++)
        for (int oy = 0; oy < p.oh; oy++)
            for (int ox = 0; ox < p.ow; ox++) {
                size_t at = first_max(&p, x + pl * in, oy, ox);
                size_t o = pl * out + (size_t)oy * p.ow + ox;
                y[o] = x[pl * in + at];
                dx[pl * in + at] += dy[o];
            }
    float *gx = tc_put(G, x, planes * in), *gdy = tc_put(G, dy, planes * out);
    float *gy = G->ops->alloc(G, planes * out * sizeof(float));
    float *gdx = G->ops->alloc(G, planes * in * sizeof(float));
    cr_assert(gy && gdx);
    char what[128];
    snprintf(what, sizeof what, "maxpool n%d c%d %dx%d size %d stride %d%s", p.n, p.c,
             p.h, p.w, p.size, p.stride, ties ? " ties" : "");
    cr_assert_eq(G->ops->maxpool(G, &p, gx, gy), 0, "%s", what);
    tc_get(G, got, gy, planes * out);
    tc_close(got, y, planes * out, 0, what);
    cr_assert_eq(G->ops->maxpool_grad(G, &p, gx, gy, gdy, gdx), 0, "%s", what);
    tc_get(G, got, gdx, planes * in);
    tc_close(got, dx, planes * in, 1e-6, "maxpool_grad");
    G->ops->free(G, gx);
    G->ops->free(G, gdy);
    G->ops->free(G, gy);
    G->ops->free(G, gdx);
    free(x);
    free(dy);
    free(y);
    free(dx);
    free(got);
}

Test(cuda_pool, maxpool_and_its_gradient_go_to_the_first_maximum)
{
    tc_gpu();
    check_pool((ferry_pool_t){.n = 4, .c = 8, .h = 28, .w = 28, .size = 2, .stride = 2},
               false, 61);
    check_pool((ferry_pool_t){.n = 4, .c = 8, .h = 28, .w = 28, .size = 2, .stride = 2},
               true, 62);
    /* Overlapping windows, and a border the windows do not reach. */
    check_pool((ferry_pool_t){.n = 2, .c = 3, .h = 13, .w = 10, .size = 3, .stride = 2},
               false, 63);
    check_pool((ferry_pool_t){.n = 2, .c = 3, .h = 13, .w = 10, .size = 3, .stride = 2},
               true, 64);
    tc_finish();
}

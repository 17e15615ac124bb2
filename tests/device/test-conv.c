/* Convolutions: the forward pass against a direct six-deep loop, and dx, dw
 * and dbias against finite differences, over paddings 0-2 and strides 1-2,
 * non-square inputs and filters, and the 1x1 case that skips im2col. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <ferry/error.h>

#include "tdevice.h"

static void ref_conv(const ferry_conv_t *s, const double *x, const double *w,
                     const double *bias, double *y)
{
    for (int n = 0; n < s->n; n++)
        for (int k = 0; k < s->k; k++)
            for (int oy = 0; oy < s->oh; oy++)
                for (int ox = 0; ox < s->ow; ox++) {
                    double v = bias ? bias[k] : 0;
                    for (int c = 0; c < s->c; c++)
                        for (int r = 0; r < s->r; r++)
                            for (int q = 0; q < s->s; q++) {
                                int iy = oy * s->stride - s->pad + r;
                                int ix = ox * s->stride - s->pad + q;
                                if (iy < 0 || iy >= s->h || ix < 0 || ix >= s->w)
                                    continue;
                                v += x[((size_t)(n * s->c + c) * s->h + iy) * s->w + ix] *
                                     w[((size_t)(k * s->c + c) * s->r + r) * s->s + q];
                            }
                    y[((size_t)(n * s->k + k) * s->oh + oy) * s->ow + ox] = v;
                }
}

typedef struct conv_ctx {
    const ferry_conv_t *s;
    const double *x, *w, *bias, *g;
    int wrt; /* 0 x, 1 w, 2 bias */
} conv_ctx;

static double conv_loss(const double *v, void *p)
{
    conv_ctx *c = p;
    size_t ny = (size_t)c->s->n * c->s->k * c->s->oh * c->s->ow;
    double *y = td_new(ny);
    ref_conv(c->s, c->wrt == 0 ? v : c->x, c->wrt == 1 ? v : c->w,
             c->wrt == 2 ? v : c->bias, y);
    double l = td_dot(y, c->g, ny);
    free(y);
    return l;
}

static void check_conv(int n, int c, int h, int w, int k, int r, int s, int pad,
                       int stride)
{
    ferry_conv_t cs = {.n = n,
                       .c = c,
                       .h = h,
                       .w = w,
                       .k = k,
                       .r = r,
                       .s = s,
                       .pad = pad,
                       .stride = stride};
    cr_assert(ferry_conv_shape(&cs));
    char what[128];
    int len = snprintf(what, sizeof what, "conv %dx%dx%dx%d k%d %dx%d pad %d stride %d",
                       n, c, h, w, k, r, s, pad, stride);
    const size_t nx = (size_t)n * c * h * w, nw = (size_t)k * c * r * s;
    const size_t ny = (size_t)n * k * cs.oh * cs.ow;
    uint64_t seed = 1000 + nx + nw;
    double *x = td_new(nx), *wt = td_new(nw), *bias = td_new(k), *g = td_new(ny);
    td_rand(x, nx, -1, 1, &seed);
    td_rand(wt, nw, -1, 1, &seed);
    td_rand(bias, k, -1, 1, &seed);
    td_rand(g, ny, -1, 1, &seed);
    float *dx = td_put(x, nx), *dw = td_put(wt, nw), *db = td_put(bias, k);
    float *dg = td_put(g, ny), *y = td_zeros(ny);
    float *gx = td_zeros(nx), *gw = td_zeros(nw), *gb = td_zeros(k);
    double *want = td_new(nx + nw + ny), *got = td_new(nx + nw + ny);

    cr_assert_eq(D->ops->conv2d(D, &cs, dx, dw, db, y), 0);
    ref_conv(&cs, x, wt, bias, want);
    td_get(got, y, ny);
    snprintf(what + len, sizeof what - len, ": y");
    td_close(got, want, ny, TD_TOL, what);
    cr_assert_eq(D->ops->conv2d(D, &cs, dx, dw, NULL, y), 0);
    ref_conv(&cs, x, wt, NULL, want);
    td_get(got, y, ny);
    snprintf(what + len, sizeof what - len, ": y without bias");
    td_close(got, want, ny, TD_TOL, what);

    /* NaN first: the gradients are overwritten, not accumulated */
    D->ops->fill(D, gx, NAN, nx);
    D->ops->fill(D, gw, NAN, nw);
    D->ops->fill(D, gb, NAN, k);
    cr_assert_eq(D->ops->conv2d_grad(D, &cs, dx, dw, dg, gx, gw, gb), 0);
    conv_ctx ctx = {&cs, x, wt, bias, g, 0};
    td_numgrad(conv_loss, x, nx, &ctx, want);
    td_get(got, gx, nx);
    snprintf(what + len, sizeof what - len, ": dx");
    td_close(got, want, nx, TD_TOL, what);
    ctx.wrt = 1;
    td_numgrad(conv_loss, wt, nw, &ctx, want);
    td_get(got, gw, nw);
    snprintf(what + len, sizeof what - len, ": dw");
    td_close(got, want, nw, TD_TOL, what);
    ctx.wrt = 2;
    td_numgrad(conv_loss, bias, k, &ctx, want);
    td_get(got, gb, k);
    snprintf(what + len, sizeof what - len, ": dbias");
    td_close(got, want, k, TD_TOL, what);

    /* dx and dbias not wanted: dw alone is the same */
    D->ops->fill(D, gw, NAN, nw);
    cr_assert_eq(D->ops->conv2d_grad(D, &cs, dx, dw, dg, NULL, gw, NULL), 0);
    ctx.wrt = 1;
    td_numgrad(conv_loss, wt, nw, &ctx, want);
    td_get(got, gw, nw);
    snprintf(what + len, sizeof what - len, ": dw alone");
    td_close(got, want, nw, TD_TOL, what);

    D->ops->free(D, dx);
    D->ops->free(D, dw);
    D->ops->free(D, db);
    D->ops->free(D, dg);
    D->ops->free(D, y);
    D->ops->free(D, gx);
    D->ops->free(D, gw);
    D->ops->free(D, gb);
    free(x);
    free(wt);
    free(bias);
    free(g);
    free(want);
    free(got);
}

Test(conv, forward_and_gradients_with_padding_and_stride)
{
    td_open();
    for (int pad = 0; pad <= 2; pad++)
        for (int stride = 1; stride <= 2; stride++)
            check_conv(2, 2, 6, 5, 3, 3, 3, pad, stride);
    td_finish();
}

Test(conv, forward_and_gradients_with_non_square_filters_and_odd_shapes)
{
    td_open();
    check_conv(1, 3, 7, 4, 2, 2, 3, 1, 2);
    check_conv(3, 1, 5, 5, 4, 5, 5, 2, 1); /* a filter as large as the image */
    check_conv(2, 2, 5, 6, 2, 1, 1, 1, 2); /* 1x1 with padding and stride */
    check_conv(2, 3, 4, 5, 3, 4, 2, 0, 3);
    td_finish();
}

Test(conv, a_pointwise_filter_computes_without_columns)
{
    td_open();
    check_conv(2, 4, 3, 5, 3, 1, 1, 0, 1);
    td_finish();
}

Test(conv, a_shape_that_does_not_add_up_is_refused)
{
    td_open();
    ferry_conv_t cs = {
        .n = 1, .c = 1, .h = 4, .w = 4, .k = 1, .r = 3, .s = 3, .pad = 0, .stride = 1};
    cr_assert(ferry_conv_shape(&cs));
    cs.oh = 3; /* not (4 - 3) / 1 + 1 */
    float *x = td_zeros(16), *w = td_zeros(9), *y = td_zeros(16);
    cr_assert_eq(D->ops->conv2d(D, &cs, x, w, NULL, y), FERRY_EINVAL);
    cr_assert_eq(D->ops->conv2d_grad(D, &cs, x, w, y, x, w, NULL), FERRY_EINVAL);
    td_finish();
}

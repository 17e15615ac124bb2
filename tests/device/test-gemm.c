/* gemm: every transpose combination against a naive triple loop, alpha and
 * beta, beta 0 over NaN, and the two products of a dense layer's backward
 * pass against finite differences. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tdevice.h"

/* C = alpha op(A) op(B) + beta C in double, stored as the device's. */
static void ref_gemm(bool ta, bool tb, int m, int n, int k, double alpha, const double *a,
                     const double *b, double beta, double *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++) {
                double av = ta ? a[(size_t)p * m + i] : a[(size_t)i * k + p];
                double bv = tb ? b[(size_t)j * k + p] : b[(size_t)p * n + j];
                s += av * bv;
            }
            c[(size_t)i * n + j] =
                alpha * s + (beta == 0 ? 0 : beta * c[(size_t)i * n + j]);
        }
}

static void check_gemm(bool ta, bool tb, int m, int n, int k, double alpha, double beta)
{
    uint64_t seed = 42 + 4 * ta + 2 * tb;
    double *a = td_new((size_t)m * k), *b = td_new((size_t)k * n);
    double *c = td_new((size_t)m * n), *want = td_new((size_t)m * n);
    double *got = td_new((size_t)m * n);
    td_rand(a, (size_t)m * k, -1, 1, &seed);
    td_rand(b, (size_t)k * n, -1, 1, &seed);
    td_rand(c, (size_t)m * n, -1, 1, &seed);
    float *da = td_put(a, (size_t)m * k), *db = td_put(b, (size_t)k * n);
    float *dc = td_put(c, (size_t)m * n);
    for (size_t i = 0; i < (size_t)m * n; i++)
        want[i] = (float)c[i];
    ref_gemm(ta, tb, m, n, k, alpha, a, b, beta, want);
    D->ops->gemm(D, ta, tb, m, n, k, (float)alpha, da, db, (float)beta, dc);
    td_get(got, dc, (size_t)m * n);
    char what[96];
    snprintf(what, sizeof what, "gemm ta=%d tb=%d %dx%dx%d alpha %g beta %g", ta, tb, m,
             n, k, alpha, beta);
    td_close(got, want, (size_t)m * n, TD_TOL, what);
    D->ops->free(D, da);
    D->ops->free(D, db);
    D->ops->free(D, dc);
    free(a);
    free(b);
    free(c);
    free(want);
    free(got);
}

Test(gemm, matches_a_triple_loop_in_all_four_transpose_combinations)
{
    td_open();
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            check_gemm(ta, tb, 7, 5, 3, 1, 0);
            check_gemm(ta, tb, 33, 17, 65, 1, 0);
            check_gemm(ta, tb, 1, 40, 9, 1, 0);
        }
    td_finish();
}

Test(gemm, scales_by_alpha_and_accumulates_with_beta)
{
    td_open();
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            check_gemm(ta, tb, 9, 11, 13, 0.5, 1);
            check_gemm(ta, tb, 9, 11, 13, -2, 0.25);
        }
    td_finish();
}

Test(gemm, beta_zero_ignores_nan_in_c)
{
    td_open();
    int m = 6, n = 5, k = 4;
    double a[24], b[20], want[30], got[30];
    uint64_t seed = 7;
    td_rand(a, 24, -1, 1, &seed);
    td_rand(b, 20, -1, 1, &seed);
    float *da = td_put(a, 24), *db = td_put(b, 20), *dc = td_zeros(30);
    D->ops->fill(D, dc, NAN, 30);
    ref_gemm(false, false, m, n, k, 1, a, b, 0, want);
    D->ops->gemm(D, false, false, m, n, k, 1.f, da, db, 0.f, dc);
    td_get(got, dc, 30);
    td_close(got, want, 30, TD_TOL, "gemm over NaN with beta 0");
    /* k = 0: nothing to multiply, C = beta C (0 even over NaN) */
    D->ops->fill(D, dc, NAN, 30);
    D->ops->gemm(D, false, false, m, n, 0, 1.f, da, db, 0.f, dc);
    td_get(got, dc, 30);
    for (int i = 0; i < 30; i++)
        cr_assert_eq(got[i], 0.0, "k = 0, beta 0: element %d is %g", i, got[i]);
    td_finish();
}

/* A dense layer y = x w^T (x: batch x in, w: out x in, as models store
 * it) with loss L = sum(g . y): dL/dx = g w and dL/dw = g^T x, each one
 * gemm with a transpose. */
typedef struct dense_ctx {
    int batch, in, out;
    const double *x, *w, *g;
    bool wrt_w;
} dense_ctx;

static double dense_loss(const double *v, void *p)
{
    dense_ctx *c = p;
    const double *x = c->wrt_w ? c->x : v, *w = c->wrt_w ? v : c->w;
    double *y = td_new((size_t)c->batch * c->out);
    ref_gemm(false, true, c->batch, c->out, c->in, 1, x, w, 0, y);
    double l = td_dot(y, c->g, (size_t)c->batch * c->out);
    free(y);
    return l;
}

Test(gemm, computes_a_dense_layers_gradients)
{
    td_open();
    const int batch = 6, in = 10, out = 4;
    uint64_t seed = 3;
    double *x = td_new(batch * in), *w = td_new(out * in), *g = td_new(batch * out);
    td_rand(x, batch * in, -1, 1, &seed);
    td_rand(w, out * in, -1, 1, &seed);
    td_rand(g, batch * out, -1, 1, &seed);
    float *dx_ = td_put(x, batch * in), *dw_ = td_put(w, out * in);
    float *dg = td_put(g, batch * out);
    float *gx = td_zeros(batch * in), *gw = td_zeros(out * in);
    /* dx [batch x in] = g [batch x out] w [out x in] */
    D->ops->gemm(D, false, false, batch, in, out, 1.f, dg, dw_, 0.f, gx);
    /* dw [out x in] = g^T [out x batch] x [batch x in] */
    D->ops->gemm(D, true, false, out, in, batch, 1.f, dg, dx_, 0.f, gw);

    double *got = td_new(batch * in), *want = td_new(batch * in);
    dense_ctx c = {batch, in, out, x, w, g, false};
    td_numgrad(dense_loss, x, batch * in, &c, want);
    td_get(got, gx, batch * in);
    td_close(got, want, batch * in, TD_TOL, "dense dx");
    c.wrt_w = true;
    td_numgrad(dense_loss, w, out * in, &c, want);
    td_get(got, gw, out * in);
    td_close(got, want, out * in, TD_TOL, "dense dw");

    free(x);
    free(w);
    free(g);
    free(got);
    free(want);
    td_finish(); /* the device frees its buffers */
}

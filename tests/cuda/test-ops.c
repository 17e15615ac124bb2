/* The vector and dense-layer ops on the GPU against double references;
 * the fused bias + ReLU against the two ops on both devices. */
#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tcuda.h"

Test(cuda_vector, fill_scale_and_axpy_match_the_reference)
{
    tc_gpu();
    /* Odd lengths, one past a grid's worth of threads. */
    const size_t n = 2u * 8192 * 256 + 7;
    uint64_t seed = 1;
    double *x = tc_new(n), *y = tc_new(n), *want = tc_new(n), *got = tc_new(n);
    tc_rand(x, n, -2, 2, &seed);
    tc_rand(y, n, -2, 2, &seed);
    float *dx = tc_put(G, x, n), *dy = tc_put(G, y, n);

    G->ops->scale(G, dx, -1.5f, n);
    for (size_t i = 0; i < n; i++)
        want[i] = (double)(float)x[i] * -1.5;
    tc_get(G, got, dx, n);
    tc_close(got, want, n, 1e-6, "scale");

    G->ops->axpy(G, dy, 0.25f, dx, n); /* y += 0.25 (-1.5 x) */
    for (size_t i = 0; i < n; i++)
        want[i] = (double)(float)y[i] + 0.25 * ((double)(float)x[i] * -1.5);
    tc_get(G, got, dy, n);
    tc_close(got, want, n, 1e-6, "axpy");

    G->ops->fill(G, dx, 3.25f, n);
    G->ops->fill(G, dy, 0.0f, n - 1); /* the memset path; the last stays */
    tc_get(G, got, dx, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(got[i], 3.25, "fill [%zu] %g", i, got[i]);
    tc_get(G, got, dy, n);
    for (size_t i = 0; i + 1 < n; i++)
        cr_assert_eq(got[i], 0.0, "fill 0 [%zu] %g", i, got[i]);
    cr_assert_float_eq(got[n - 1], want[n - 1], 1e-5);
    G->ops->fill(G, dx, -0.0f, 3);
    tc_get(G, got, dx, 4);
    cr_assert(signbit(got[0]) && got[1] == 0 && got[3] == 3.25);

    G->ops->free(G, dx);
    G->ops->free(G, dy);
    free(x);
    free(y);
    free(want);
    free(got);
    tc_finish();
}

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
    uint64_t seed = 7 + 4 * ta + 2 * tb;
    size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
    double *a = tc_new(na), *b = tc_new(nb), *c = tc_new(nc), *want = tc_new(nc);
    double *got = tc_new(nc);
    tc_rand(a, na, -1, 1, &seed);
    tc_rand(b, nb, -1, 1, &seed);
    tc_rand(c, nc, -1, 1, &seed);
    for (size_t i = 0; i < na; i++)
        a[i] = (float)a[i];
    for (size_t i = 0; i < nb; i++)
        b[i] = (float)b[i];
    for (size_t i = 0; i < nc; i++)
        want[i] = c[i] = beta == 0 ? NAN : (float)c[i]; /* beta 0 ignores NaN */
    float *da = tc_put(G, a, na), *db = tc_put(G, b, nb), *dc = tc_put(G, c, nc);
    ref_gemm(ta, tb, m, n, k, alpha, a, b, beta, want);
    G->ops->gemm(G, ta, tb, m, n, k, (float)alpha, da, db, (float)beta, dc);
    tc_get(G, got, dc, nc);
    char what[96];
    snprintf(what, sizeof what, "gemm ta=%d tb=%d %dx%dx%d alpha %g beta %g", ta, tb, m,
             n, k, alpha, beta);
    tc_close(got, want, nc, TC_TOL, what);
    G->ops->free(G, da);
    G->ops->free(G, db);
    G->ops->free(G, dc);
    free(a);
    free(b);
    free(c);
    free(want);
    free(got);
}

Test(cuda_gemm, matches_a_triple_loop_in_all_four_transpose_combinations)
{
    tc_gpu();
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            check_gemm(ta, tb, 37, 23, 51, 1.0, 0.0);
            check_gemm(ta, tb, 64, 10, 128, 0.5, 1.0);
            check_gemm(ta, tb, 1, 300, 7, -2.0, 0.25);
        }
    tc_finish();
}

Test(cuda_gemm, an_empty_inner_dimension_scales_c_by_beta)
{
    tc_gpu();
    double c[6] = {1, 2, 3, 4, 5, 6}, got[6], want[6];
    float *dc = tc_put(G, c, 6);
    float *dummy = G->ops->alloc(G, 64);
    G->ops->gemm(G, false, false, 2, 3, 0, 1.0f, dummy, dummy, 0.5f, dc);
    tc_get(G, got, dc, 6);
    for (int i = 0; i < 6; i++)
        want[i] = c[i] * 0.5;
    tc_close(got, want, 6, 0, "gemm k=0");
    G->ops->free(G, dc);
    G->ops->free(G, dummy);
    tc_finish();
}

Test(cuda_dense, bias_add_bias_grad_relu_and_relu_grad_match_the_reference)
{
    tc_gpu();
    const int rows = 129, cols = 37;
    const size_t n = (size_t)rows * cols;
    uint64_t seed = 3;
    double *y = tc_new(n), *bias = tc_new(cols), *want = tc_new(n), *got = tc_new(n);
    tc_rand(y, n, -1, 1, &seed);
    tc_rand(bias, cols, -1, 1, &seed);
    float *dy = tc_put(G, y, n), *db = tc_put(G, bias, cols);

    G->ops->bias_add(G, dy, db, rows, cols);
    for (size_t i = 0; i < n; i++)
        want[i] = (double)(float)y[i] + (double)(float)bias[i % cols];
    tc_get(G, got, dy, n);
    tc_close(got, want, n, 1e-6, "bias_add");

    double *gb = tc_new(cols), *wb = tc_new(cols);
    G->ops->bias_grad(G, db, dy, rows, cols);
    for (int j = 0; j < cols; j++)
        for (int i = 0; i < rows; i++)
            wb[j] += got[(size_t)i * cols + j];
    tc_get(G, gb, db, cols);
    tc_close(gb, wb, cols, 1e-5, "bias_grad");
    G->ops->bias_grad(G, db, dy, 0, cols); /* no rows: zeros */
    tc_get(G, gb, db, cols);
    for (int j = 0; j < cols; j++)
        cr_assert_eq(gb[j], 0.0, "bias_grad of no rows [%d] %g", j, gb[j]);

    /* relu out of place, then in place; relu_grad in place on dy. */
    float *dr = G->ops->alloc(G, n * sizeof(float));
    cr_assert_not_null(dr);
    G->ops->relu(G, dr, dy, n);
    G->ops->relu(G, dy, dy, n);
    double *r = tc_new(n);
    for (size_t i = 0; i < n; i++)
        r[i] = got[i] > 0 ? got[i] : 0;
    tc_get(G, want, dr, n);
    tc_close(want, r, n, 0, "relu");
    tc_get(G, want, dy, n);
    tc_close(want, r, n, 0, "relu in place");

    double *g = tc_new(n);
    tc_rand(g, n, -1, 1, &seed);
    float *dg = tc_put(G, g, n);
    G->ops->relu_grad(G, dg, dg, dr, n);
    for (size_t i = 0; i < n; i++)
        want[i] = r[i] > 0 ? (double)(float)g[i] : 0;
    tc_get(G, got, dg, n);
    tc_close(got, want, n, 0, "relu_grad");

    G->ops->free(G, dy);
    G->ops->free(G, db);
    G->ops->free(G, dr);
    G->ops->free(G, dg);
    free(y);
    free(bias);
    free(want);
    free(got);
    free(gb);
    free(wb);
    free(r);
    free(g);
    tc_finish();
}

/* bias_relu on `dev` against bias_add then relu on the same device, bit for
 * bit, NaN and negative zero included; and ferry_bias_relu() through a
 * table as old as the one before the member (its size), which does the two
 * ops. */
static void fused_is_unfused(ferry_device_t *dev)
{
    const int rows = 131, cols = 45;
    const size_t n = (size_t)rows * cols;
    uint64_t seed = 17;
    double *y = tc_new(n), *bias = tc_new(cols);
    tc_rand(y, n, -2, 2, &seed);
    tc_rand(bias, cols, -1, 1, &seed);
    y[5] = NAN;
    y[7] = -(double)(float)bias[7]; /* sums to zero */
    float *a = tc_put(dev, y, n), *b = tc_put(dev, y, n), *c = tc_put(dev, y, n);
    float *db = tc_put(dev, bias, cols);
    dev->ops->bias_add(dev, a, db, rows, cols);
    dev->ops->relu(dev, a, a, n);
    cr_assert_not_null(dev->ops->bias_relu, "%s: no bias_relu", dev->name);
    dev->ops->bias_relu(dev, b, db, rows, cols);
    ferry_device_ops_t old = *dev->ops;
    old.size = (uint32_t)offsetof(ferry_device_ops_t, bias_relu);
    old.bias_relu = NULL;
    ferry_device_t viaold = *dev;
    viaold.ops = &old;
    ferry_bias_relu(&viaold, c, db, rows, cols);
    float *ha = malloc(n * sizeof(float)), *hb = malloc(n * sizeof(float)),
          *hc = malloc(n * sizeof(float));
    cr_assert(ha && hb && hc);
    cr_assert_eq(dev->ops->download(dev, ha, a, n * sizeof(float)), 0);
    cr_assert_eq(dev->ops->download(dev, hb, b, n * sizeof(float)), 0);
    cr_assert_eq(dev->ops->download(dev, hc, c, n * sizeof(float)), 0);
    cr_assert(isnan(hb[5]), "%s: NaN did not pass", dev->name);
    cr_assert_eq(memcmp(ha, hb, n * sizeof(float)), 0, "%s: fused differs", dev->name);
    cr_assert_eq(memcmp(ha, hc, n * sizeof(float)), 0, "%s: fallback differs", dev->name);
    for (size_t i = 0; i < n; i++)
        if (i != 5) {
            double v = (double)(float)((float)y[i] + (float)bias[i % cols]);
            cr_assert_eq((double)hb[i], v > 0 ? v : 0.0, "%s: [%zu]", dev->name, i);
        }
    dev->ops->free(dev, a);
    dev->ops->free(dev, b);
    dev->ops->free(dev, c);
    dev->ops->free(dev, db);
    free(y);
    free(bias);
    free(ha);
    free(hb);
    free(hc);
}

Test(cuda_dense, bias_relu_is_bias_add_then_relu_bit_for_bit)
{
    tc_gpu();
    fused_is_unfused(G);
    tc_finish();
}

Test(cpu_dense, bias_relu_is_bias_add_then_relu_bit_for_bit)
{
    tc_cpu();
    fused_is_unfused(C);
    tc_finish();
}

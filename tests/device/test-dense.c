/* bias_add/bias_grad and relu/relu_grad: forward against a reference,
 * backward against finite differences, in place where the contract allows. */
#include <math.h>
#include <stdlib.h>

#include "tdevice.h"

typedef struct bias_ctx {
    int rows, cols;
    const double *y0, *g;
} bias_ctx;

/* L = sum g . (y0 + bias) */
static double bias_loss(const double *bias, void *p)
{
    bias_ctx *c = p;
    double l = 0;
    for (int i = 0; i < c->rows; i++)
        for (int j = 0; j < c->cols; j++)
            l += c->g[i * c->cols + j] * (c->y0[i * c->cols + j] + bias[j]);
    return l;
}

Test(dense, bias_add_adds_the_bias_to_every_row_and_bias_grad_sums_the_columns)
{
    td_open();
    const int rows = 13, cols = 37;
    uint64_t seed = 11;
    double *y = td_new(rows * cols), *bias = td_new(cols), *g = td_new(rows * cols);
    double *want = td_new(rows * cols), *got = td_new(rows * cols);
    td_rand(y, rows * cols, -1, 1, &seed);
    td_rand(bias, cols, -1, 1, &seed);
    td_rand(g, rows * cols, -1, 1, &seed);
    float *dy = td_put(y, rows * cols), *db = td_put(bias, cols);
    float *dg = td_put(g, rows * cols), *dbias = td_zeros(cols);

    D->ops->bias_add(D, dy, db, rows, cols);
    for (int i = 0; i < rows * cols; i++)
        want[i] = (double)(float)y[i] + (double)(float)bias[i % cols];
    td_get(got, dy, rows * cols);
    td_close(got, want, rows * cols, 1e-6, "bias_add");

    D->ops->fill(D, dbias, NAN, cols); /* overwritten, not accumulated */
    D->ops->bias_grad(D, dbias, dg, rows, cols);
    bias_ctx c = {rows, cols, y, g};
    td_numgrad(bias_loss, bias, cols, &c, want);
    td_get(got, dbias, cols);
    td_close(got, want, cols, TD_TOL, "bias_grad");

    free(y);
    free(bias);
    free(g);
    free(want);
    free(got);
    td_finish();
}

typedef struct relu_ctx {
    const double *g;
    size_t n;
} relu_ctx;

static double relu_loss(const double *x, void *p)
{
    relu_ctx *c = p;
    double l = 0;
    for (size_t i = 0; i < c->n; i++)
        l += c->g[i] * (x[i] > 0 ? x[i] : 0);
    return l;
}

/* Values kept at least 0.01 from the kink at 0, where the difference
 * quotient would straddle it; a few exact zeros check the y > 0 rule. */
static void relu_inputs(double *x, size_t n, uint64_t *seed)
{
    td_rand(x, n, -1, 1, seed);
    for (size_t i = 0; i < n; i++) {
        if (fabs(x[i]) < 0.01)
            x[i] = x[i] < 0 ? -0.5 : 0.5;
        if (i % 17 == 5)
            x[i] = 0;
    }
}

Test(dense, relu_and_its_gradient_match_the_reference_out_of_place_and_in_place)
{
    td_open();
    const size_t n = 1003; /* not a multiple of any vector width */
    uint64_t seed = 5;
    double *x = td_new(n), *g = td_new(n), *want = td_new(n), *got = td_new(n);
    relu_inputs(x, n, &seed);
    td_rand(g, n, -1, 1, &seed);
    float *dx = td_put(x, n), *dg = td_put(g, n), *y = td_zeros(n), *gx = td_zeros(n);

    D->ops->relu(D, y, dx, n);
    for (size_t i = 0; i < n; i++)
        want[i] = x[i] > 0 ? (float)x[i] : 0;
    td_get(got, y, n);
    td_close(got, want, n, 0, "relu");

    D->ops->relu_grad(D, gx, dg, y, n);
    relu_ctx c = {g, n};
    td_numgrad(relu_loss, x, n, &c, want);
    for (size_t i = 0; i < n; i++)
        if (x[i] == 0) /* the kink itself: relu_grad says 0 (y is not > 0) */
            want[i] = 0;
    td_get(got, gx, n);
    td_close(got, want, n, TD_TOL, "relu_grad");

    /* in place: y = x and dx = dy */
    D->ops->relu(D, dx, dx, n);
    D->ops->relu_grad(D, dg, dg, dx, n);
    td_get(got, dg, n);
    td_close(got, want, n, TD_TOL, "relu_grad in place");
    td_get(got, dx, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(got[i], x[i] > 0 ? (double)(float)x[i] : 0.0, "relu in place at %zu",
                     i);

    free(x);
    free(g);
    free(want);
    free(got);
    td_finish();
}

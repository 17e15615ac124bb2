/* The ops <ferry/nn.h>'s layers added to the table, on the cpu: each
 * activation against its formula and its gradient against central
 * differences in double, the elementwise product, dropout's mask, average
 * pooling (forward against a reference, the gradient as its adjoint) and
 * binary cross-entropy with logits. */
#include <math.h>
#include <stdlib.h>

#include <ferry/error.h>

#include "tdevice.h"

static double ref_act(int act, double x)
{
    switch (act) {
    case FERRY_ACT_TANH:
        return tanh(x);
    case FERRY_ACT_SIGMOID:
        return 1 / (1 + exp(-x));
    case FERRY_ACT_LEAKY_RELU:
        return x > 0 ? x : 0.1 * x;
    default:
        return 0.5 * x * (1 + erf(x / sqrt(2)));
    }
}

typedef struct act_ctx {
    int act;
    const double *g;
    size_t n;
} act_ctx;

static double act_loss(const double *x, void *c)
{
    act_ctx *a = c;
    double s = 0;
    for (size_t i = 0; i < a->n; i++)
        s += ref_act(a->act, x[i]) * a->g[i];
    return s;
}

static void check_act(int act, const char *what)
{
    td_open();
    cr_assert(FERRY_DEVICE_HAS(D->ops, activation) &&
              FERRY_DEVICE_HAS(D->ops, activation_grad));
    enum { N = 37 };
    uint64_t s = 11;
    double *x = td_new(N), *g = td_new(N), *want = td_new(N), *got = td_new(N);
    td_rand(x, N, -3, 3, &s);
    td_rand(g, N, -1, 1, &s);
    for (size_t i = 0; i < N; i++)
        x[i] += x[i] > 0 ? 1e-3 : -1e-3; /* away from leaky ReLU's kink */
    float *dx = td_put(x, N), *dg = td_put(g, N), *dy = td_zeros(N), *dd = td_zeros(N);
    D->ops->activation(D, act, 0.1f, dy, dx, N);
    for (size_t i = 0; i < N; i++)
        want[i] = ref_act(act, x[i]);
    td_get(got, dy, N);
    td_close(got, want, N, 1e-5, what);
    act_ctx c = {.act = act, .g = g, .n = N};
    td_numgrad(act_loss, x, N, &c, want);
    D->ops->activation_grad(D, act, 0.1f, dd, dg, dx, dy, N);
    td_get(got, dd, N);
    td_close(got, want, N, 1e-4, what);
    /* dx may be dy. */
    D->ops->activation_grad(D, act, 0.1f, dg, dg, dx, dy, N);
    td_get(got, dg, N);
    td_close(got, want, N, 1e-4, what);
    D->ops->free(D, dx), D->ops->free(D, dg), D->ops->free(D, dy), D->ops->free(D, dd);
    free(x), free(g), free(want), free(got);
    td_finish();
}

Test(device_nn, tanh_matches_its_formula_and_derivative)
{
    check_act(FERRY_ACT_TANH, "tanh");
}
Test(device_nn, sigmoid_matches_its_formula_and_derivative)
{
    check_act(FERRY_ACT_SIGMOID, "sigmoid");
}
Test(device_nn, leaky_relu_matches_its_formula_and_derivative)
{
    check_act(FERRY_ACT_LEAKY_RELU, "leaky");
}
Test(device_nn, exact_gelu_matches_its_formula_and_derivative)
{
    check_act(FERRY_ACT_GELU, "gelu");
}

Test(device_nn, dropout_masks_keep_one_minus_p_scaled_and_repeat_for_a_seed)
{
    td_open();
    enum { N = 20000 };
    float *m1 = td_zeros(N), *m2 = td_zeros(N), *m3 = td_zeros(N);
    D->ops->dropout_mask(D, m1, N, 0.25f, 42);
    D->ops->dropout_mask(D, m2, N, 0.25f, 42);
    D->ops->dropout_mask(D, m3, N, 0.25f, 43);
    double *a = td_new(N), *b = td_new(N), *c = td_new(N);
    td_get(a, m1, N), td_get(b, m2, N), td_get(c, m3, N);
    size_t zeros = 0, same = 0;
    for (size_t i = 0; i < N; i++) {
        cr_assert(a[i] == 0 || fabs(a[i] - 1 / 0.75) < 1e-6, "mask[%zu] = %g", i, a[i]);
        cr_assert_eq(a[i], b[i], "the same seed drew another mask at %zu", i);
        zeros += a[i] == 0;
        same += a[i] == c[i];
    }
    cr_expect(fabs((double)zeros / N - 0.25) < 0.02, "dropped %zu of %d", zeros, N);
    cr_expect(same < N * 0.8, "seeds 42 and 43 drew nearly the same mask");
    /* The product is the layer's forward and backward. */
    D->ops->mul(D, m2, m1, m1, N);
    td_get(b, m2, N);
    for (size_t i = 0; i < N; i++)
        cr_assert_float_eq(b[i], a[i] * a[i], 1e-5);
    D->ops->free(D, m1), D->ops->free(D, m2), D->ops->free(D, m3);
    free(a), free(b), free(c);
    td_finish();
}

static void check_avgpool(int n, int c, int h, int w, int size, int stride)
{
    td_open();
    ferry_pool_t p = {.n = n, .c = c, .h = h, .w = w, .size = size, .stride = stride};
    cr_assert(ferry_pool_shape(&p));
    size_t nx = (size_t)n * c * h * w, ny = (size_t)n * c * p.oh * p.ow;
    uint64_t s = 5;
    double *x = td_new(nx), *g = td_new(ny), *y = td_new(ny), *want = td_new(ny);
    double *dx = td_new(nx);
    td_rand(x, nx, -1, 1, &s);
    td_rand(g, ny, -1, 1, &s);
    for (int pl = 0; pl < n * c; pl++)
        for (int oy = 0; oy < p.oh; oy++)
            for (int ox = 0; ox < p.ow; ox++) {
                double m = 0;
                for (int ky = 0; ky < size; ky++)
                    for (int kx = 0; kx < size; kx++)
                        m +=
                            x[((size_t)pl * h + oy * stride + ky) * w + ox * stride + kx];
                want[((size_t)pl * p.oh + oy) * p.ow + ox] = m / (size * size);
            }
    float *fx = td_put(x, nx), *fy = td_zeros(ny), *fg = td_put(g, ny),
          *fdx = td_zeros(nx);
    cr_assert_eq(D->ops->avgpool(D, &p, fx, fy), 0);
    td_get(y, fy, ny);
    td_close(y, want, ny, 1e-5, "avgpool");
    /* The gradient is the adjoint: <avgpool(x), g> = <x, avgpool_grad(g)>. */
    cr_assert_eq(D->ops->avgpool_grad(D, &p, fg, fdx), 0);
    td_get(dx, fdx, nx);
    double lhs = td_dot(want, g, ny), rhs = td_dot(x, dx, nx);
    cr_expect(fabs(lhs - rhs) < 1e-4 * (1 + fabs(lhs)), "adjoint: %g against %g", lhs,
              rhs);
    ferry_pool_t bad = p;
    bad.oh++;
    cr_expect_eq(D->ops->avgpool(D, &bad, fx, fy), FERRY_EINVAL);
    D->ops->free(D, fx), D->ops->free(D, fy), D->ops->free(D, fg), D->ops->free(D, fdx);
    free(x), free(g), free(y), free(want), free(dx);
    td_finish();
}

Test(device_nn, average_pooling_2x2_and_its_gradient)
{
    check_avgpool(2, 3, 8, 6, 2, 2);
}

Test(device_nn, overlapping_and_global_average_pooling_and_their_gradients)
{
    check_avgpool(1, 2, 7, 7, 3, 2);
    check_avgpool(3, 4, 5, 5, 5, 1);
}

typedef struct bce_ctx {
    const double *t;
    size_t n;
} bce_ctx;

static double bce_loss(const double *z, void *c)
{
    bce_ctx *b = c;
    double s = 0;
    for (size_t i = 0; i < b->n; i++) {
        double p = 1 / (1 + exp(-z[i]));
        s -= b->t[i] * log(p) + (1 - b->t[i]) * log(1 - p);
    }
    return s / (double)b->n;
}

Test(device_nn, binary_cross_entropy_with_logits_and_its_gradient)
{
    td_open();
    enum { R = 5, C = 3, N = R * C };
    uint64_t s = 9;
    double *z = td_new(N), *t = td_new(N), *want = td_new(N), *got = td_new(N);
    td_rand(z, N, -4, 4, &s);
    td_rand(t, N, 0, 1, &s);
    float *fz = td_put(z, N), *ft = td_put(t, N), *fd = td_zeros(N);
    float loss = 0;
    cr_assert_eq(D->ops->bce_logits(D, fz, ft, R, C, fd, &loss), 0);
    bce_ctx c = {.t = t, .n = N};
    cr_expect_float_eq(loss, bce_loss(z, &c), 1e-5);
    td_numgrad(bce_loss, z, N, &c, want);
    td_get(got, fd, N);
    td_close(got, want, N, 1e-4, "bce dlogits");
    /* Large logits stay finite. */
    double big[2] = {80, -80}, tt[2] = {0, 1};
    float *fb = td_put(big, 2), *fbt = td_put(tt, 2);
    cr_assert_eq(D->ops->bce_logits(D, fb, fbt, 1, 2, NULL, &loss), 0);
    cr_expect_float_eq(loss, 80.0f, 1e-3);
    cr_expect_eq(D->ops->bce_logits(D, fz, ft, 0, C, NULL, &loss), FERRY_EINVAL);
    D->ops->free(D, fz), D->ops->free(D, ft), D->ops->free(D, fd);
    D->ops->free(D, fb), D->ops->free(D, fbt);
    free(z), free(t), free(want), free(got);
    td_finish();
}

typedef struct ln_ctx {
    const double *gamma, *beta, *g;
    int rows, cols;
} ln_ctx;

static void ref_ln(const ln_ctx *c, const double *x, double *y)
{
    for (int i = 0; i < c->rows; i++) {
        const double *xr = x + (size_t)i * c->cols;
        double m = 0, v = 0;
        for (int j = 0; j < c->cols; j++)
            m += xr[j] / c->cols;
        for (int j = 0; j < c->cols; j++)
            v += (xr[j] - m) * (xr[j] - m) / c->cols;
        for (int j = 0; j < c->cols; j++)
            y[(size_t)i * c->cols + j] =
                (xr[j] - m) / sqrt(v + 1e-5) * c->gamma[j] + c->beta[j];
    }
}

static double ln_loss(const double *x, void *arg)
{
    ln_ctx *c = arg;
    size_t n = (size_t)c->rows * c->cols;
    double *y = td_new(n);
    ref_ln(c, x, y);
    double l = td_dot(y, c->g, n);
    free(y);
    return l;
}

Test(device_nn, layer_normalisation_and_its_three_gradients)
{
    td_open();
    enum { R = 3, C = 7, N = R * C };
    uint64_t s = 21;
    double *x = td_new(N), *g = td_new(N), *gm = td_new(C), *bt = td_new(C);
    double *want = td_new(N), *got = td_new(N);
    td_rand(x, N, -2, 2, &s);
    td_rand(g, N, -1, 1, &s);
    td_rand(gm, C, 0.5, 1.5, &s);
    td_rand(bt, C, -0.5, 0.5, &s);
    ln_ctx c = {.gamma = gm, .beta = bt, .g = g, .rows = R, .cols = C};
    float *fx = td_put(x, N), *fg = td_put(g, N), *fgm = td_put(gm, C),
          *fbt = td_put(bt, C);
    float *fy = td_zeros(N), *fm = td_zeros(R), *fr = td_zeros(R), *fdx = td_zeros(N);
    float *fdg = td_zeros(C), *fdb = td_zeros(C);
    cr_assert_eq(D->ops->layernorm(D, fx, fgm, fbt, R, C, 1e-5f, fy, fm, fr), 0);
    ref_ln(&c, x, want);
    td_get(got, fy, N);
    td_close(got, want, N, 1e-5, "layernorm");
    cr_assert_eq(D->ops->layernorm_grad(D, fx, fgm, fm, fr, fg, R, C, fdx, fdg, fdb), 0);
    td_numgrad(ln_loss, x, N, &c, want);
    td_get(got, fdx, N);
    td_close(got, want, N, 1e-3, "layernorm dx");
    /* dbeta is the column sums of dy; dgamma those of dy xhat. */
    double wb[C] = {0}, wg[C] = {0}, gb[C], gg[C];
    double *y0 = td_new(N);
    ref_ln(&c, x, y0);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) {
            wb[j] += g[i * C + j];
            wg[j] += g[i * C + j] * (y0[i * C + j] - bt[j]) / gm[j];
        }
    td_get(gb, fdb, C);
    td_get(gg, fdg, C);
    td_close(gb, wb, C, 1e-5, "layernorm dbeta");
    td_close(gg, wg, C, 1e-4, "layernorm dgamma");
    /* dx not wanted. */
    cr_expect_eq(D->ops->layernorm_grad(D, fx, fgm, fm, fr, fg, R, C, NULL, fdg, fdb), 0);
    cr_expect_eq(D->ops->layernorm(D, fx, fgm, fbt, 0, C, 1e-5f, fy, fm, fr),
                 FERRY_EINVAL);
    float *all[] = {fx, fg, fgm, fbt, fy, fm, fr, fdx, fdg, fdb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        D->ops->free(D, all[i]);
    free(x), free(g), free(gm), free(bt), free(want), free(got), free(y0);
    td_finish();
}

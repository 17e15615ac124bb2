/* Max pooling: forward against a reference, the gradient against finite
 * differences (values spaced so that no difference step changes a window's
 * maximum), overlapping windows, and ties going to the first maximum. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <ferry/error.h>

#include "tdevice.h"

static void ref_pool(const ferry_pool_t *p, const double *x, double *y)
{
    for (int pl = 0; pl < p->n * p->c; pl++)
        for (int oy = 0; oy < p->oh; oy++)
            for (int ox = 0; ox < p->ow; ox++) {
                double m = -1e300;
                for (int dy = 0; dy < p->size; dy++)
                    for (int dx = 0; dx < p->size; dx++) {
                        double v = x[((size_t)pl * p->h + oy * p->stride + dy) * p->w +
                                     ox * p->stride + dx];
                        m = v > m ? v : m;
                    }
                y[((size_t)pl * p->oh + oy) * p->ow + ox] = m;
            }
}

typedef struct pool_ctx {
    const ferry_pool_t *p;
    const double *g;
} pool_ctx;

static double pool_loss(const double *x, void *c)
{
    pool_ctx *pc = c;
    size_t ny = (size_t)pc->p->n * pc->p->c * pc->p->oh * pc->p->ow;
    double *y = td_new(ny);
    ref_pool(pc->p, x, y);
    double l = td_dot(y, pc->g, ny);
    free(y);
    return l;
}

static void check_pool(int n, int c, int h, int w, int size, int stride)
{
    ferry_pool_t p = {.n = n, .c = c, .h = h, .w = w, .size = size, .stride = stride};
    cr_assert(ferry_pool_shape(&p));
    const size_t nx = (size_t)n * c * h * w, ny = (size_t)n * c * p.oh * p.ow;
    char what[96];
    snprintf(what, sizeof what, "pool %dx%dx%dx%d size %d stride %d", n, c, h, w, size,
             stride);
    /* a shuffled ramp: distinct values 0.01 apart, exact in float */
    double *x = td_new(nx), *g = td_new(ny), *want = td_new(nx), *got = td_new(nx);
    uint64_t seed = 77 + nx;
    double *key = td_new(nx);
    td_rand(key, nx, 0, 1, &seed);
    for (size_t i = 0; i < nx; i++) {
        size_t rank = 0;
        for (size_t j = 0; j < nx; j++)
            rank += key[j] < key[i];
        x[i] = (double)rank / 64 - 2;
    }
    td_rand(g, ny, -1, 1, &seed);
    float *dx = td_put(x, nx), *dg = td_put(g, ny), *y = td_zeros(ny), *gx = td_zeros(nx);
    cr_assert_eq(D->ops->maxpool(D, &p, dx, y), 0);
    ref_pool(&p, x, want);
    td_get(got, y, ny);
    td_close(got, want, ny, 0, what);
    D->ops->fill(D, gx, NAN, nx);
    cr_assert_eq(D->ops->maxpool_grad(D, &p, dx, y, dg, gx), 0);
    pool_ctx pc = {&p, g};
    td_numgrad(pool_loss, x, nx, &pc, want);
    td_get(got, gx, nx);
    td_close(got, want, nx, TD_TOL, what);
    free(x);
    free(g);
    free(want);
    free(got);
    free(key);
}

Test(pool, forward_and_gradient_for_disjoint_overlapping_and_sparse_windows)
{
    td_open();
    check_pool(2, 3, 6, 6, 2, 2); /* disjoint */
    check_pool(2, 2, 7, 5, 2, 2); /* an odd last row and column no window covers */
    check_pool(1, 2, 7, 5, 3, 1); /* overlapping: gradients add up */
    check_pool(2, 1, 7, 8, 2, 3); /* gaps between windows get 0 */
    check_pool(1, 1, 5, 5, 3, 2); /* an input edge no window reaches */
    td_finish();
}

Test(pool, a_tied_window_sends_its_gradient_to_the_first_maximum)
{
    td_open();
    ferry_pool_t p = {.n = 1, .c = 1, .h = 2, .w = 4, .size = 2, .stride = 2};
    cr_assert(ferry_pool_shape(&p));
    /* window 0: 1 3 / 3 3 -> the 3 at (0,1); window 1: 5 5 / 5 5 -> (0,2) */
    double x[8] = {1, 3, 5, 5, 3, 3, 5, 5}, g[2] = {2, -4}, got[8], y[2];
    float *dx = td_put(x, 8), *dg = td_put(g, 2), *dy = td_zeros(2), *gx = td_zeros(8);
    cr_assert_eq(D->ops->maxpool(D, &p, dx, dy), 0);
    td_get(y, dy, 2);
    cr_assert(y[0] == 3 && y[1] == 5);
    cr_assert_eq(D->ops->maxpool_grad(D, &p, dx, dy, dg, gx), 0);
    td_get(got, gx, 8);
    double want[8] = {0, 2, -4, 0, 0, 0, 0, 0};
    for (int i = 0; i < 8; i++)
        cr_assert_eq(got[i], want[i], "dx[%d] = %g, want %g", i, got[i], want[i]);
    td_finish();
}

Test(pool, a_shape_that_does_not_add_up_is_refused)
{
    td_open();
    ferry_pool_t p = {.n = 1, .c = 1, .h = 4, .w = 4, .size = 2, .stride = 2};
    cr_assert(ferry_pool_shape(&p));
    p.ow = 3;
    float *x = td_zeros(16), *y = td_zeros(16);
    cr_assert_eq(D->ops->maxpool(D, &p, x, y), FERRY_EINVAL);
    cr_assert_eq(D->ops->maxpool_grad(D, &p, x, y, y, x), FERRY_EINVAL);
    td_finish();
}

/* Batch normalisation on cuDNN against the cpu backend on the same random
 * inputs: the training forward (output, saved statistics, running ones
 * moved), evaluation with the running statistics, and the gradient with
 * and without dx, of a map (BatchNorm2d) and of a vector (BatchNorm1d).
 * Skipped with no GPU visible. */
#include <stdlib.h>

#include <ferry/error.h>

#include "tcuda.h"

typedef struct two {
    float *g, *c;
    size_t n;
} two;

static two put2(const double *h, size_t n)
{
    return (two){tc_put(G, h, n), tc_put(C, h, n), n};
}

static two rand2(size_t n, double lo, double hi, uint64_t *s)
{
    double *h = tc_new(n);
    tc_rand(h, n, lo, hi, s);
    two t = put2(h, n);
    free(h);
    return t;
}

static void agree(const two *t, double tol, const char *what)
{
    double *g = tc_new(t->n), *c = tc_new(t->n);
    tc_get(G, g, t->g, t->n);
    tc_get(C, c, t->c, t->n);
    tc_close(g, c, t->n, tol, what);
    free(g);
    free(c);
}

static void drop(two *t)
{
    G->ops->free(G, t->g);
    C->ops->free(C, t->c);
}

static void check(int n, int ch, int hw, uint64_t seed)
{
    cr_assert(FERRY_DEVICE_HAS(G->ops, batchnorm) &&
              FERRY_DEVICE_HAS(G->ops, batchnorm_infer) &&
              FERRY_DEVICE_HAS(G->ops, batchnorm_grad));
    size_t all = (size_t)n * ch * hw;
    uint64_t s = seed;
    two x = rand2(all, -2, 3, &s), dy = rand2(all, -1, 1, &s), y = rand2(all, 0, 1, &s),
        dx = rand2(all, 0, 1, &s);
    two gam = rand2((size_t)ch, 0.5, 1.5, &s), bet = rand2((size_t)ch, -1, 1, &s),
        rm = rand2((size_t)ch, -1, 1, &s), rv = rand2((size_t)ch, 0.5, 2, &s),
        mean = rand2((size_t)ch, 0, 1, &s), rstd = rand2((size_t)ch, 0, 1, &s),
        dg = rand2((size_t)ch, 0, 1, &s), db = rand2((size_t)ch, 0, 1, &s);
    cr_assert_eq(G->ops->batchnorm(G, x.g, gam.g, bet.g, n, ch, hw, 1e-5f, 0.1f, y.g,
                                   mean.g, rstd.g, rm.g, rv.g),
                 0);
    cr_assert_eq(C->ops->batchnorm(C, x.c, gam.c, bet.c, n, ch, hw, 1e-5f, 0.1f, y.c,
                                   mean.c, rstd.c, rm.c, rv.c),
                 0);
    agree(&y, 1e-5, "batchnorm y");
    agree(&mean, 1e-5, "batchnorm mean");
    agree(&rstd, 1e-5, "batchnorm rstd");
    agree(&rm, 1e-5, "running_mean");
    agree(&rv, 1e-5, "running_var (unbiased on both)");
    cr_assert_eq(G->ops->batchnorm_grad(G, x.g, gam.g, mean.g, rstd.g, dy.g, n, ch, hw,
                                        1e-5f, dx.g, dg.g, db.g),
                 0);
    cr_assert_eq(C->ops->batchnorm_grad(C, x.c, gam.c, mean.c, rstd.c, dy.c, n, ch, hw,
                                        1e-5f, dx.c, dg.c, db.c),
                 0);
    agree(&dx, 1e-4, "batchnorm_grad dx");
    agree(&dg, 1e-4, "batchnorm_grad dgamma");
    agree(&db, 1e-5, "batchnorm_grad dbeta");
    cr_assert_eq(G->ops->batchnorm_grad(G, x.g, gam.g, mean.g, rstd.g, dy.g, n, ch, hw,
                                        1e-5f, NULL, dg.g, db.g),
                 0);
    agree(&dg, 1e-4, "batchnorm_grad dgamma without dx");
    cr_assert_eq(
        G->ops->batchnorm_infer(G, x.g, gam.g, bet.g, rm.g, rv.g, n, ch, hw, 1e-5f, y.g),
        0);
    cr_assert_eq(
        C->ops->batchnorm_infer(C, x.c, gam.c, bet.c, rm.c, rv.c, n, ch, hw, 1e-5f, y.c),
        0);
    agree(&y, 1e-5, "batchnorm_infer y");
    two *each[] = {&x, &dy, &y, &dx, &gam, &bet, &rm, &rv, &mean, &rstd, &dg, &db};
    for (size_t i = 0; i < sizeof each / sizeof each[0]; i++)
        drop(each[i]);
}

Test(cuda_bnorm, batchnorm2d_agrees_with_the_cpu)
{
    tc_gpu();
    tc_cpu();
    check(8, 16, 49, 3);
    tc_finish();
}

Test(cuda_bnorm, batchnorm1d_agrees_with_the_cpu)
{
    tc_gpu();
    tc_cpu();
    check(32, 100, 1, 4);
    tc_finish();
}

Test(cuda_bnorm, one_value_a_channel_is_refused_in_training)
{
    tc_gpu();
    float *b = G->ops->alloc(G, 64 * sizeof(float));
    cr_assert(b);
    cr_expect_eq(G->ops->batchnorm(G, b, b, b, 1, 4, 1, 1e-5f, 0.1f, b, b, b, b, b),
                 FERRY_EINVAL);
    G->ops->free(G, b);
    tc_finish();
}

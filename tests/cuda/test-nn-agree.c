/* The ops <ferry/nn.h>'s layers added, on the GPU against the cpu backend
 * on the same random inputs: activations and their gradients, the product,
 * dropout's mask (the same bits: one hash on both), average pooling, binary
 * cross-entropy, layer normalisation and batch normalisation (cuDNN's: the
 * training forward with its running statistics, evaluation, the gradient
 * with and without dx, of a map and of a vector). Skipped with no GPU
 * visible. */
#include <math.h>
#include <stdlib.h>

#include <ferry/error.h>

#include "tcuda.h"

typedef struct pair {
    float *g, *c;
    size_t n;
} pair;

static pair rand_pair(size_t n, double lo, double hi, uint64_t *seed)
{
    double *h = tc_new(n);
    tc_rand(h, n, lo, hi, seed);
    pair p = {tc_put(G, h, n), tc_put(C, h, n), n};
    free(h);
    return p;
}

static pair zero_pair(size_t n)
{
    double *h = tc_new(n);
    pair p = {tc_put(G, h, n), tc_put(C, h, n), n};
    free(h);
    return p;
}

static void agree(const pair *p, double tol, const char *what)
{
    double *g = tc_new(p->n), *c = tc_new(p->n);
    tc_get(G, g, p->g, p->n);
    tc_get(C, c, p->c, p->n);
    tc_close(g, c, p->n, tol, what);
    free(g);
    free(c);
}

static void drop(pair *p)
{
    G->ops->free(G, p->g);
    C->ops->free(C, p->c);
}

Test(cuda_nn_agree, every_activation_and_its_gradient)
{
    tc_gpu();
    tc_cpu();
    uint64_t s = 1;
    enum { N = 5000 };
    pair x = rand_pair(N, -4, 4, &s), dy = rand_pair(N, -1, 1, &s);
    pair y = zero_pair(N), dx = zero_pair(N);
    for (int act = FERRY_ACT_TANH; act <= FERRY_ACT_GELU; act++) {
        G->ops->activation(G, act, 0.1f, y.g, x.g, N);
        C->ops->activation(C, act, 0.1f, y.c, x.c, N);
        agree(&y, 1e-5, "activation");
        G->ops->activation_grad(G, act, 0.1f, dx.g, dy.g, x.g, y.g, N);
        C->ops->activation_grad(C, act, 0.1f, dx.c, dy.c, x.c, y.c, N);
        agree(&dx, 1e-5, "activation_grad");
    }
    G->ops->mul(G, y.g, x.g, dy.g, N);
    C->ops->mul(C, y.c, x.c, dy.c, N);
    agree(&y, 1e-6, "mul");
    G->ops->dropout_mask(G, y.g, N, 0.3f, 99);
    C->ops->dropout_mask(C, y.c, N, 0.3f, 99);
    agree(&y, 0, "dropout_mask");
    drop(&x), drop(&dy), drop(&y), drop(&dx);
    tc_finish();
}

Test(cuda_nn_agree, average_pooling_and_its_gradient)
{
    tc_gpu();
    tc_cpu();
    uint64_t s = 2;
    ferry_pool_t p = {.n = 3, .c = 4, .h = 9, .w = 9, .size = 3, .stride = 2};
    cr_assert(ferry_pool_shape(&p));
    size_t nx = (size_t)p.n * p.c * p.h * p.w, ny = (size_t)p.n * p.c * p.oh * p.ow;
    pair x = rand_pair(nx, -1, 1, &s), dy = rand_pair(ny, -1, 1, &s);
    pair y = zero_pair(ny), dx = zero_pair(nx);
    cr_assert_eq(G->ops->avgpool(G, &p, x.g, y.g), 0);
    cr_assert_eq(C->ops->avgpool(C, &p, x.c, y.c), 0);
    agree(&y, 1e-5, "avgpool");
    cr_assert_eq(G->ops->avgpool_grad(G, &p, dy.g, dx.g), 0);
    cr_assert_eq(C->ops->avgpool_grad(C, &p, dy.c, dx.c), 0);
    agree(&dx, 1e-5, "avgpool_grad");
    drop(&x), drop(&dy), drop(&y), drop(&dx);
    tc_finish();
}

Test(cuda_nn_agree, binary_cross_entropy_and_layer_normalisation)
{
    tc_gpu();
    tc_cpu();
    uint64_t s = 3;
    enum { R = 33, K = 300 };
    pair z = rand_pair(R * K, -6, 6, &s), t = rand_pair(R * K, 0, 1, &s);
    pair dz = zero_pair(R * K), y = zero_pair(R * K), dx = zero_pair(R * K);
    float lg = 0, lc = 0;
    cr_assert_eq(G->ops->bce_logits(G, z.g, t.g, R, K, dz.g, &lg), 0);
    cr_assert_eq(C->ops->bce_logits(C, z.c, t.c, R, K, dz.c, &lc), 0);
    cr_expect(fabsf(lg - lc) <= 1e-5f * fabsf(lc), "bce %g against %g", lg, lc);
    agree(&dz, 1e-5, "bce dlogits");
    pair gm = rand_pair(K, 0.5, 1.5, &s), bt = rand_pair(K, -1, 1, &s);
    pair mean = zero_pair(R), rstd = zero_pair(R), dg = zero_pair(K), db = zero_pair(K);
    cr_assert_eq(G->ops->layernorm(G, z.g, gm.g, bt.g, R, K, 1e-5f, y.g, mean.g, rstd.g),
                 0);
    cr_assert_eq(C->ops->layernorm(C, z.c, gm.c, bt.c, R, K, 1e-5f, y.c, mean.c, rstd.c),
                 0);
    agree(&y, 1e-5, "layernorm");
    agree(&rstd, 1e-5, "layernorm rstd");
    cr_assert_eq(
        G->ops->layernorm_grad(G, z.g, gm.g, mean.g, rstd.g, t.g, R, K, dx.g, dg.g, db.g),
        0);
    cr_assert_eq(
        C->ops->layernorm_grad(C, z.c, gm.c, mean.c, rstd.c, t.c, R, K, dx.c, dg.c, db.c),
        0);
    agree(&dx, 1e-4, "layernorm dx");
    agree(&dg, 1e-4, "layernorm dgamma");
    agree(&db, 1e-5, "layernorm dbeta");
    pair *all[] = {&z, &t, &dz, &y, &dx, &gm, &bt, &mean, &rstd, &dg, &db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        drop(all[i]);
    tc_finish();
}

/* Batch normalisation of n x ch x hw on both devices. */
static void check_bn(int n, int ch, int hw, uint64_t seed)
{
    cr_assert(FERRY_DEVICE_HAS(G->ops, batchnorm) &&
              FERRY_DEVICE_HAS(G->ops, batchnorm_infer) &&
              FERRY_DEVICE_HAS(G->ops, batchnorm_grad));
    size_t all = (size_t)n * ch * hw;
    uint64_t s = seed;
    pair x = rand_pair(all, -2, 3, &s), dy = rand_pair(all, -1, 1, &s),
         y = rand_pair(all, 0, 1, &s), dx = rand_pair(all, 0, 1, &s);
    pair gam = rand_pair((size_t)ch, 0.5, 1.5, &s),
         bet = rand_pair((size_t)ch, -1, 1, &s), rm = rand_pair((size_t)ch, -1, 1, &s),
         rv = rand_pair((size_t)ch, 0.5, 2, &s), mean = rand_pair((size_t)ch, 0, 1, &s),
         rstd = rand_pair((size_t)ch, 0, 1, &s), dg = rand_pair((size_t)ch, 0, 1, &s),
         db = rand_pair((size_t)ch, 0, 1, &s);
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
    pair *each[] = {&x, &dy, &y, &dx, &gam, &bet, &rm, &rv, &mean, &rstd, &dg, &db};
    for (size_t i = 0; i < sizeof each / sizeof each[0]; i++)
        drop(each[i]);
}

Test(cuda_nn_agree, batchnorm2d_agrees_with_the_cpu)
{
    tc_gpu();
    tc_cpu();
    check_bn(8, 16, 49, 3);
    tc_finish();
}

Test(cuda_nn_agree, batchnorm1d_agrees_with_the_cpu)
{
    tc_gpu();
    tc_cpu();
    check_bn(32, 100, 1, 4);
    tc_finish();
}

Test(cuda_nn_agree, one_value_a_channel_is_refused_in_training)
{
    tc_gpu();
    float *b = G->ops->alloc(G, 64 * sizeof(float));
    cr_assert(b);
    cr_expect_eq(G->ops->batchnorm(G, b, b, b, 1, 4, 1, 1e-5f, 0.1f, b, b, b, b, b),
                 FERRY_EINVAL);
    G->ops->free(G, b);
    tc_finish();
}

/* The cuda and cpu backends agree on random inputs, to float rounding: the
 * same model gives the same training on either. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <ferry/error.h>

#include "tcuda.h"
#include "tref.h"

/* One host array, on both devices. */
typedef struct both {
    float *g, *c;
    size_t n;
} both_t;

static both_t put_both(const double *host, size_t n)
{
    return (both_t){tc_put(G, host, n), tc_put(C, host, n), n};
}

static both_t rand_both(size_t n, double lo, double hi, uint64_t *seed)
{
    double *h = tc_new(n);
    tc_rand(h, n, lo, hi, seed);
    both_t b = put_both(h, n);
    free(h);
    return b;
}

static both_t empty_both(size_t n)
{
    both_t b = {G->ops->alloc(G, n * sizeof(float)), C->ops->alloc(C, n * sizeof(float)),
                n};
    cr_assert(b.g && b.c);
    return b;
}

static void free_both(both_t *b)
{
    G->ops->free(G, b->g);
    C->ops->free(C, b->c);
}

/* The GPU's values against the cpu's. */
static void agree(const both_t *b, double tol, const char *what)
{
    double *g = tc_new(b->n), *c = tc_new(b->n);
    tc_get(G, g, b->g, b->n);
    tc_get(C, c, b->c, b->n);
    tc_close(g, c, b->n, tol, what);
    free(g);
    free(c);
}

Test(cuda_agree, gemm_in_all_four_transpose_combinations)
{
    tc_gpu();
    tc_cpu();
    uint64_t seed = 71;
    /* The MLP's layer shapes, batch 128. */
    const int shapes[][3] = {{128, 256, 784}, {128, 10, 128}, {256, 784, 128}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        both_t a = rand_both((size_t)m * k, -1, 1, &seed);
        both_t b = rand_both((size_t)k * n, -1, 1, &seed);
        both_t c = rand_both((size_t)m * n, -1, 1, &seed);
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                G->ops->gemm(G, ta, tb, m, n, k, 0.75f, a.g, b.g, 0.5f, c.g);
                C->ops->gemm(C, ta, tb, m, n, k, 0.75f, a.c, b.c, 0.5f, c.c);
                char what[64];
                snprintf(what, sizeof what, "gemm ta=%d tb=%d %dx%dx%d", ta, tb, m, n, k);
                agree(&c, TC_TOL, what);
            }
        free_both(&a);
        free_both(&b);
        free_both(&c);
    }
    tc_finish();
}

static void agree_conv(ferry_conv_t s, uint64_t seed)
{
    cr_assert(ferry_conv_shape(&s));
    size_t nx = (size_t)s.n * s.c * s.h * s.w, ny = (size_t)s.n * s.k * s.oh * s.ow;
    size_t nw = (size_t)s.k * s.c * s.r * s.s;
    both_t x = rand_both(nx, -1, 1, &seed), w = rand_both(nw, -0.5, 0.5, &seed);
    both_t b = rand_both(s.k, -1, 1, &seed), dy = rand_both(ny, -1, 1, &seed);
    both_t y = empty_both(ny), dx = empty_both(nx), dw = empty_both(nw),
           db = empty_both(s.k);
    cr_assert_eq(G->ops->conv2d(G, &s, x.g, w.g, b.g, y.g), 0);
    cr_assert_eq(C->ops->conv2d(C, &s, x.c, w.c, b.c, y.c), 0);
    agree(&y, TC_TOL, "conv2d");
    cr_assert_eq(G->ops->conv2d_grad(G, &s, x.g, w.g, dy.g, dx.g, dw.g, db.g), 0);
    cr_assert_eq(C->ops->conv2d_grad(C, &s, x.c, w.c, dy.c, dx.c, dw.c, db.c), 0);
    agree(&dx, TC_TOL, "conv2d_grad dx");
    agree(&dw, TC_TOL, "conv2d_grad dw");
    agree(&db, TC_TOL, "conv2d_grad dbias");
    both_t *all[] = {&x, &w, &b, &dy, &y, &dx, &dw, &db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free_both(all[i]);
}

Test(cuda_agree, conv2d_and_conv2d_grad)
{
    tc_gpu();
    tc_cpu();
    /* The CNN's two layers, batch 32, then an odd shape with stride. */
    agree_conv(tref_cnn_conv1(32), 81);
    agree_conv(tref_cnn_conv2(32), 82);
    agree_conv((ferry_conv_t){.n = 5,
                              .c = 3,
                              .h = 17,
                              .w = 12,
                              .k = 7,
                              .r = 3,
                              .s = 4,
                              .pad = 1,
                              .stride = 2},
               83);
    tc_finish();
}

Test(cuda_agree, maxpool_and_maxpool_grad)
{
    tc_gpu();
    tc_cpu();
    uint64_t seed = 91;
    const ferry_pool_t shapes[] = {
        {.n = 32, .c = 16, .h = 28, .w = 28, .size = 2, .stride = 2},
        {.n = 8, .c = 4, .h = 15, .w = 15, .size = 3, .stride = 2},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        ferry_pool_t p = shapes[i];
        cr_assert(ferry_pool_shape(&p));
        size_t nx = (size_t)p.n * p.c * p.h * p.w, ny = (size_t)p.n * p.c * p.oh * p.ow;
        /* After a relu: a quarter of the inputs are zero, and windows of
         * zeros tie. */
        double *h = tc_new(nx);
        tc_rand(h, nx, -0.5, 1.5, &seed);
        for (size_t j = 0; j < nx; j++)
            h[j] = h[j] > 0 ? h[j] : 0;
        both_t x = put_both(h, nx), dy = rand_both(ny, -1, 1, &seed);
        both_t y = empty_both(ny), dx = empty_both(nx);
        cr_assert_eq(G->ops->maxpool(G, &p, x.g, y.g), 0);
        cr_assert_eq(C->ops->maxpool(C, &p, x.c, y.c), 0);
        agree(&y, 0, "maxpool");
        cr_assert_eq(G->ops->maxpool_grad(G, &p, x.g, y.g, dy.g, dx.g), 0);
        cr_assert_eq(C->ops->maxpool_grad(C, &p, x.c, y.c, dy.c, dx.c), 0);
        agree(&dx, 0, "maxpool_grad");
        free_both(&x);
        free_both(&dy);
        free_both(&y);
        free_both(&dx);
        free(h);
    }
    tc_finish();
}

Test(cuda_agree, softmax_xent)
{
    tc_gpu();
    tc_cpu();
    uint64_t seed = 101;
    const int rows = 128, classes = 10;
    both_t x = rand_both((size_t)rows * classes, -5, 5, &seed);
    both_t d = empty_both((size_t)rows * classes);
    int32_t labels[128];
    for (int i = 0; i < rows; i++)
        labels[i] = (int32_t)((i * 37 + 11) % classes);
    int32_t *lg = tc_put_labels(G, labels, rows), *lc = tc_put_labels(C, labels, rows);
    float loss_g, loss_c;
    int right_g, right_c;
    cr_assert_eq(G->ops->softmax_xent(G, x.g, lg, rows, classes, d.g, &loss_g, &right_g),
                 0);
    cr_assert_eq(C->ops->softmax_xent(C, x.c, lc, rows, classes, d.c, &loss_c, &right_c),
                 0);
    cr_assert_float_eq(loss_g, loss_c, 1e-5 * fabsf(loss_c), "loss %g vs %g", loss_g,
                       loss_c);
    cr_assert_eq(right_g, right_c);
    agree(&d, TC_TOL, "dlogits");
    free_both(&x);
    free_both(&d);
    G->ops->free(G, lg);
    C->ops->free(C, lc);
    tc_finish();
}

Test(cuda_agree, sgd_and_adam_over_several_steps)
{
    tc_gpu();
    tc_cpu();
    uint64_t seed = 111;
    const size_t n = 235146; /* the MLP's parameter count */
    both_t p = rand_both(n, -0.1, 0.1, &seed), g = rand_both(n, -1, 1, &seed);
    double *zeros = tc_new(n);
    both_t v = put_both(zeros, n);
    for (int t = 0; t < 5; t++) {
        G->ops->sgd_step(G, p.g, g.g, v.g, n, 0.05f, 0.9f, 5e-4f);
        C->ops->sgd_step(C, p.c, g.c, v.c, n, 0.05f, 0.9f, 5e-4f);
    }
    agree(&p, 1e-5, "sgd p");
    agree(&v, 1e-5, "sgd v");

    both_t m = put_both(zeros, n), v2 = put_both(zeros, n);
    for (int t = 1; t <= 5; t++) {
        G->ops->adam_step(G, p.g, g.g, m.g, v2.g, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 1e-4f,
                          t);
        C->ops->adam_step(C, p.c, g.c, m.c, v2.c, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 1e-4f,
                          t);
    }
    agree(&p, 1e-5, "adam p");
    agree(&m, 1e-5, "adam m");
    agree(&v2, 1e-5, "adam v");
    both_t *all[] = {&p, &g, &v, &m, &v2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free_both(all[i]);
    free(zeros);
    tc_finish();
}

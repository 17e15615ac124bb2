/* The losses and the optimizer steps on the GPU against double references. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <ferry/error.h>

#include "tcuda.h"

/* Mean loss, count of first-argmax hits and dlogits, in double. */
static double ref_softmax(const double *x, const int32_t *labels, int rows, int classes,
                          double *dlogits, int *correct)
{
    double sum = 0;
    *correct = 0;
    for (int i = 0; i < rows; i++) {
        const double *r = x + (size_t)i * classes;
        int best = 0;
        for (int j = 1; j < classes; j++)
            if (r[j] > r[best])
                best = j;
        double s = 0;
        for (int j = 0; j < classes; j++)
            s += exp(r[j] - r[best]);
        sum += log(s) - (r[labels[i]] - r[best]);
        *correct += best == labels[i];
        for (int j = 0; j < classes; j++)
            dlogits[(size_t)i * classes + j] =
                (exp(r[j] - r[best]) / s - (j == labels[i])) / rows;
    }
    return sum / rows;
}

static void check_softmax(int rows, int classes, bool in_place, uint64_t seed)
{
    size_t n = (size_t)rows * classes;
    double *x = tc_new(n), *want = tc_new(n), *got = tc_new(n);
    int32_t *labels = malloc(rows * sizeof(int32_t));
    cr_assert_not_null(labels);
    tc_rand(x, n, -4, 4, &seed);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)x[i];
    /* Some rows tie for the largest logit: the first one counts. */
    for (int i = 0; i < rows; i += 5)
        x[(size_t)i * classes + classes - 1] = x[(size_t)i * classes] = 9.0;
    for (int i = 0; i < rows; i++)
        labels[i] = (int32_t)((i * 7 + (i % 3 == 0 ? 0 : 3)) % classes);
    for (int i = 0; i < rows; i += 10) /* tied rows labelled with the first */
        labels[i] = 0;
    int want_correct;
    double want_loss = ref_softmax(x, labels, rows, classes, want, &want_correct);

    float *dx = tc_put(G, x, n);
    int32_t *dl = tc_put_labels(G, labels, rows);
    float *dd = in_place ? dx : G->ops->alloc(G, n * sizeof(float));
    cr_assert_not_null(dd);
    float loss = -1;
    int correct = -1;
    int rc = G->ops->softmax_xent(G, dx, dl, rows, classes, dd, &loss, &correct);
    cr_assert_eq(rc, 0, "softmax_xent: %s", ferry_strerror(rc));
    cr_assert_float_eq(loss, want_loss, 1e-5 * fabs(want_loss) + 1e-6, "loss %g want %g",
                       loss, want_loss);
    cr_assert_eq(correct, want_correct);
    tc_get(G, got, dd, n);
    tc_close(got, want, n, TC_TOL, in_place ? "dlogits in place" : "dlogits");

    /* Neither result wanted, nor the gradient. */
    if (!in_place)
        cr_assert_eq(G->ops->softmax_xent(G, dx, dl, rows, classes, NULL, NULL, NULL), 0);
    G->ops->free(G, dx);
    if (!in_place)
        G->ops->free(G, dd);
    G->ops->free(G, dl);
    free(x);
    free(want);
    free(got);
    free(labels);
}

Test(cuda_loss, softmax_xent_matches_the_reference)
{
    tc_gpu();
    check_softmax(128, 10, false, 11);
    check_softmax(1000, 37, false, 12); /* more classes than a warp's lanes */
    check_softmax(3, 10, true, 13);     /* dlogits over the logits */
    tc_finish();
}

Test(cuda_loss, softmax_xent_refuses_a_label_out_of_range_and_writes_nothing)
{
    tc_gpu();
    double x[20], d[20], got[20];
    for (int i = 0; i < 20; i++) {
        x[i] = i * 0.1;
        d[i] = -7;
    }
    int32_t labels[2] = {3, 10};
    float *dx = tc_put(G, x, 20), *dd = tc_put(G, d, 20);
    int32_t *dl = tc_put_labels(G, labels, 2);
    float loss = 5;
    int correct = 5;
    cr_assert_eq(G->ops->softmax_xent(G, dx, dl, 2, 10, dd, &loss, &correct),
                 FERRY_EINVAL);
    labels[1] = -1;
    cr_assert_eq(G->ops->upload(G, dl, labels, sizeof labels), 0);
    cr_assert_eq(G->ops->softmax_xent(G, dx, dl, 2, 10, dd, &loss, &correct),
                 FERRY_EINVAL);
    cr_assert(loss == 5 && correct == 5);
    tc_get(G, got, dd, 20);
    tc_close(got, d, 20, 0, "dlogits after a bad label");
    cr_assert_eq(G->ops->softmax_xent(G, dx, dl, 0, 10, dd, &loss, &correct),
                 FERRY_EINVAL);
    G->ops->free(G, dx);
    G->ops->free(G, dd);
    G->ops->free(G, dl);
    tc_finish();
}

Test(cuda_loss, mse_matches_the_reference)
{
    tc_gpu();
    /* Longer than the reduction's grid, so partial sums are summed. */
    const int rows = 3000, cols = 33;
    const size_t n = (size_t)rows * cols;
    uint64_t seed = 21;
    double *p = tc_new(n), *t = tc_new(n), *want = tc_new(n), *got = tc_new(n);
    tc_rand(p, n, -1, 1, &seed);
    tc_rand(t, n, -1, 1, &seed);
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        double dlt = (double)(float)p[i] - (double)(float)t[i];
        sum += dlt * dlt;
        want[i] = dlt / rows;
    }
    float *dp = tc_put(G, p, n), *dt = tc_put(G, t, n);
    float *dd = G->ops->alloc(G, n * sizeof(float));
    float loss = -1;
    cr_assert_eq(G->ops->mse(G, dp, dt, rows, cols, dd, &loss), 0);
    cr_assert_float_eq(loss, sum / (2.0 * rows), 1e-5 * sum / rows);
    tc_get(G, got, dd, n);
    tc_close(got, want, n, 1e-5, "dpred");
    float again = -1;
    cr_assert_eq(G->ops->mse(G, dp, dt, rows, cols, NULL, &again), 0);
    cr_assert_eq(again, loss, "the same inputs give the same bits");
    cr_assert_eq(G->ops->mse(G, dp, dt, 0, cols, NULL, &again), FERRY_EINVAL);
    G->ops->free(G, dp);
    G->ops->free(G, dt);
    G->ops->free(G, dd);
    free(p);
    free(t);
    free(want);
    free(got);
    tc_finish();
}

Test(cuda_optim, sgd_with_and_without_momentum_matches_the_reference)
{
    tc_gpu();
    const size_t n = 10007;
    uint64_t seed = 31;
    double *p = tc_new(n), *g = tc_new(n), *v = tc_new(n), *got = tc_new(n);
    tc_rand(p, n, -1, 1, &seed);
    tc_rand(g, n, -1, 1, &seed);
    for (size_t i = 0; i < n; i++) {
        p[i] = (float)p[i];
        g[i] = (float)g[i];
    }
    float *dp = tc_put(G, p, n), *dg = tc_put(G, g, n), *dv = tc_put(G, v, n);
    const double lr = 0.05, mu = 0.9, wd = 1e-3;
    for (int step = 0; step < 3; step++) {
        G->ops->sgd_step(G, dp, dg, dv, n, (float)lr, (float)mu, (float)wd);
        for (size_t i = 0; i < n; i++) {
            double gi = g[i] + wd * p[i];
            v[i] = mu * v[i] + gi;
            p[i] -= lr * v[i];
        }
    }
    tc_get(G, got, dp, n);
    tc_close(got, p, n, 1e-5, "sgd p");
    tc_get(G, got, dv, n);
    tc_close(got, v, n, 1e-5, "sgd v");
    /* mu 0: no velocity needed. */
    G->ops->sgd_step(G, dp, dg, NULL, n, (float)lr, 0.0f, 0.0f);
    for (size_t i = 0; i < n; i++)
        p[i] -= lr * g[i];
    tc_get(G, got, dp, n);
    tc_close(got, p, n, 1e-5, "sgd without momentum");
    G->ops->free(G, dp);
    G->ops->free(G, dg);
    G->ops->free(G, dv);
    free(p);
    free(g);
    free(v);
    free(got);
    tc_finish();
}

Test(cuda_optim, adam_matches_the_reference)
{
    tc_gpu();
    const size_t n = 4099;
    uint64_t seed = 41;
    double *p = tc_new(n), *g = tc_new(n), *m = tc_new(n), *v = tc_new(n);
    double *got = tc_new(n);
    tc_rand(p, n, -1, 1, &seed);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)p[i];
    float *dp = tc_put(G, p, n), *dm = tc_put(G, m, n), *dv = tc_put(G, v, n);
    float *dg = G->ops->alloc(G, n * sizeof(float));
    cr_assert_not_null(dg);
    const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 1e-2;
    for (int t = 1; t <= 4; t++) {
        tc_rand(g, n, -1, 1, &seed);
        for (size_t i = 0; i < n; i++)
            g[i] = (float)g[i];
        float *tmp = tc_put(G, g, n);
        cr_assert_eq(G->ops->copy(G, dg, tmp, n * sizeof(float)), 0);
        G->ops->free(G, tmp);
        G->ops->adam_step(G, dp, dg, dm, dv, n, (float)lr, (float)b1, (float)b2,
                          (float)eps, (float)wd, t);
        for (size_t i = 0; i < n; i++) {
            double gi = g[i] + wd * p[i];
            m[i] = b1 * m[i] + (1 - b1) * gi;
            v[i] = b2 * v[i] + (1 - b2) * gi * gi;
            double mh = m[i] / (1 - pow(b1, t)), vh = v[i] / (1 - pow(b2, t));
            p[i] -= lr * mh / (sqrt(vh) + eps);
        }
    }
    tc_get(G, got, dp, n);
    tc_close(got, p, n, 1e-5, "adam p");
    tc_get(G, got, dm, n);
    tc_close(got, m, n, 1e-4, "adam m");
    tc_get(G, got, dv, n);
    tc_close(got, v, n, 1e-4, "adam v");
    G->ops->free(G, dp);
    G->ops->free(G, dg);
    G->ops->free(G, dm);
    G->ops->free(G, dv);
    free(p);
    free(g);
    free(m);
    free(v);
    free(got);
    tc_finish();
}

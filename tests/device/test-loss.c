/* Losses: softmax cross-entropy (a value worked by hand, the gradient
 * against finite differences, the count of correct rows, bad labels) and
 * mean squared error. */
#include <math.h>
#include <stdlib.h>

#include <ferry/error.h>

#include "tdevice.h"

typedef struct xent_ctx {
    int rows, classes;
    const int32_t *labels;
} xent_ctx;

/* mean over rows of log sum exp(x) - x[label] */
static double xent_ref(const double *x, void *p)
{
    xent_ctx *c = p;
    double l = 0;
    for (int i = 0; i < c->rows; i++) {
        const double *r = x + (size_t)i * c->classes;
        double s = 0;
        for (int j = 0; j < c->classes; j++)
            s += exp(r[j]);
        l += log(s) - r[c->labels[i]];
    }
    return l / c->rows;
}

static int32_t *put_labels(const int32_t *labels, int n)
{
    int32_t *d = D->ops->alloc(D, n * sizeof(int32_t));
    cr_assert_eq(D->ops->upload(D, d, labels, n * sizeof(int32_t)), 0);
    return d;
}

Test(loss, softmax_xent_of_a_hand_worked_batch)
{
    td_open();
    /* row 0: logits 0, ln 3 -> softmax 1/4, 3/4, label 1: loss ln(4/3);
     * row 1: equal logits, label 0: loss ln 2, and the tie counts for the
     * first class, so both rows are correct */
    double x[4] = {0, log(3.0), 5, 5};
    int32_t labels[2] = {1, 0};
    float *dx = td_put(x, 4), *dl = td_zeros(4);
    int32_t *lab = put_labels(labels, 2);
    float loss = NAN;
    int correct = -1;
    cr_assert_eq(D->ops->softmax_xent(D, dx, lab, 2, 2, dl, &loss, &correct), 0);
    double want = (log(4.0 / 3.0) + log(2.0)) / 2;
    cr_assert(fabs(loss - want) < 1e-6, "loss %.9g, want %.9g", loss, want);
    cr_assert_eq(correct, 2);
    double got[4], wantg[4] = {0.25 / 2, (0.75 - 1) / 2, (0.5 - 1) / 2, 0.5 / 2};
    td_get(got, dl, 4);
    td_close(got, wantg, 4, 1e-6, "hand-worked dlogits");

    /* label 0 in row 0 is now wrong: one correct */
    labels[0] = 0;
    D->ops->upload(D, lab, labels, sizeof labels);
    cr_assert_eq(D->ops->softmax_xent(D, dx, lab, 2, 2, NULL, NULL, &correct), 0);
    cr_assert_eq(correct, 1);
    td_finish();
}

Test(loss, softmax_xent_gradient_matches_finite_differences_and_is_stable)
{
    td_open();
    const int rows = 16, classes = 10, n = rows * classes;
    uint64_t seed = 21;
    double *x = td_new(n), *want = td_new(n), *got = td_new(n);
    td_rand(x, n, -3, 3, &seed);
    int32_t labels[16];
    int want_correct = 0;
    for (int i = 0; i < rows; i++) {
        labels[i] = (i * 7) % classes;
        int best = 0;
        for (int j = 1; j < classes; j++)
            if ((float)x[i * classes + j] > (float)x[i * classes + best])
                best = j;
        want_correct += best == labels[i];
    }
    xent_ctx c = {rows, classes, labels};
    float *dx = td_put(x, n), *dl = td_zeros(n);
    int32_t *lab = put_labels(labels, rows);
    float loss;
    int correct;
    cr_assert_eq(D->ops->softmax_xent(D, dx, lab, rows, classes, dl, &loss, &correct), 0);
    cr_assert(fabs(loss - xent_ref(x, &c)) < 1e-5 * fabs(xent_ref(x, &c)),
              "loss %g vs %g", loss, xent_ref(x, &c));
    cr_assert_eq(correct, want_correct);
    td_numgrad(xent_ref, x, n, &c, want);
    td_get(got, dl, n);
    td_close(got, want, n, TD_TOL, "dlogits");

    /* Shifting every logit by 1000 changes nothing in exact arithmetic; a
     * softmax that does not subtract the row maximum overflows. */
    for (int i = 0; i < n; i++)
        x[i] += 1000;
    float *big = td_put(x, n);
    float loss2;
    cr_assert_eq(D->ops->softmax_xent(D, big, lab, rows, classes, dl, &loss2, NULL), 0);
    cr_assert(isfinite(loss2) && fabs(loss2 - loss) < 1e-2, "shifted loss %g vs %g",
              loss2, loss);
    td_get(got, dl, n);
    td_close(got, want, n, 1e-2, "dlogits of shifted logits");
    free(x);
    free(want);
    free(got);
    td_finish();
}

Test(loss, softmax_xent_refuses_labels_out_of_range)
{
    td_open();
    double x[6] = {1, 2, 3, 4, 5, 6};
    float *dx = td_put(x, 6), *dl = td_zeros(6);
    int32_t bad[][2] = {{0, 3}, {-1, 0}, {2, 1000}};
    for (int t = 0; t < 3; t++) {
        int32_t *lab = put_labels(bad[t], 2);
        D->ops->fill(D, dl, 7.f, 6);
        float loss = 42.f;
        cr_assert_eq(D->ops->softmax_xent(D, dx, lab, 2, 3, dl, &loss, NULL),
                     FERRY_EINVAL, "labels %d %d", bad[t][0], bad[t][1]);
        double got[6];
        td_get(got, dl, 6);
        for (int i = 0; i < 6; i++)
            cr_assert_eq(got[i], 7.0, "dlogits written for a refused batch");
        cr_assert_eq(loss, 42.f);
    }
    td_finish();
}

typedef struct mse_ctx {
    int rows;
    size_t n;
    const double *target;
} mse_ctx;

static double mse_ref(const double *pred, void *p)
{
    mse_ctx *c = p;
    double s = 0;
    for (size_t i = 0; i < c->n; i++)
        s += (pred[i] - c->target[i]) * (pred[i] - c->target[i]);
    return s / (2.0 * c->rows);
}

Test(loss, mse_loss_and_gradient_match_the_reference)
{
    td_open();
    const int rows = 9, cols = 3, n = rows * cols;
    uint64_t seed = 31;
    double *p = td_new(n), *t = td_new(n), *want = td_new(n), *got = td_new(n);
    td_rand(p, n, -2, 2, &seed);
    td_rand(t, n, -2, 2, &seed);
    for (int i = 0; i < n; i++) /* exact in float, so the loss is too */
        p[i] = (float)p[i], t[i] = (float)t[i];
    float *dp = td_put(p, n), *dt = td_put(t, n), *dg = td_zeros(n);
    mse_ctx c = {rows, n, t};
    float loss;
    cr_assert_eq(D->ops->mse(D, dp, dt, rows, cols, dg, &loss), 0);
    cr_assert(fabs(loss - mse_ref(p, &c)) < 1e-6 * mse_ref(p, &c), "loss %g vs %g", loss,
              mse_ref(p, &c));
    td_numgrad(mse_ref, p, n, &c, want);
    td_get(got, dg, n);
    td_close(got, want, n, TD_TOL, "dpred");
    float loss2;
    cr_assert_eq(D->ops->mse(D, dp, dt, rows, cols, NULL, &loss2), 0);
    cr_assert_eq(loss2, loss);
    free(p);
    free(t);
    free(want);
    free(got);
    td_finish();
}

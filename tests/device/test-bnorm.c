/* Batch normalisation on the cpu: the training forward (output, saved
 * statistics and the running ones moved with the unbiased variance)
 * against a reference in double, evaluation with the running statistics,
 * the gradient against central differences of the reference, and the
 * sizes it refuses. */
#include <math.h>
#include <stdlib.h>

#include <ferry/error.h>

#include "tdevice.h"

enum { N = 3, CH = 4, HW = 5, ALL = N * CH * HW };
#define EPS 1e-5
#define MOM 0.1

typedef struct bn_ref {
    const double *gamma, *beta, *g; /* g: the weights of the loss sum(y g) */
} bn_ref;

/* The training forward in double; mean and var (biased) per channel. */
static void ref_forward(const double *x, const bn_ref *r, double *y, double *mean,
                        double *var)
{
    for (int c = 0; c < CH; c++) {
        double s = 0, s2 = 0;
        for (int i = 0; i < N; i++)
            for (int j = 0; j < HW; j++)
                s += x[(i * CH + c) * HW + j];
        double m = s / (N * HW);
        for (int i = 0; i < N; i++)
            for (int j = 0; j < HW; j++) {
                double d = x[(i * CH + c) * HW + j] - m;
                s2 += d * d;
            }
        double v = s2 / (N * HW);
        for (int i = 0; i < N; i++)
            for (int j = 0; j < HW; j++) {
                int at = (i * CH + c) * HW + j;
                y[at] = (x[at] - m) / sqrt(v + EPS) * r->gamma[c] + r->beta[c];
            }
        mean[c] = m;
        var[c] = v;
    }
}

static double ref_loss(const double *x, void *ctx)
{
    const bn_ref *r = ctx;
    double y[ALL], m[CH], v[CH];
    ref_forward(x, r, y, m, v);
    return td_dot(y, r->g, ALL);
}

Test(device_bnorm, training_normalises_by_the_batch_and_moves_the_running_statistics)
{
    td_open();
    cr_assert(FERRY_DEVICE_HAS(D->ops, batchnorm) &&
              FERRY_DEVICE_HAS(D->ops, batchnorm_infer) &&
              FERRY_DEVICE_HAS(D->ops, batchnorm_grad));
    uint64_t s = 5;
    double *x = td_new(ALL), *gamma = td_new(CH), *beta = td_new(CH), *rm = td_new(CH),
           *rv = td_new(CH);
    td_rand(x, ALL, -2, 3, &s);
    td_rand(gamma, CH, 0.5, 1.5, &s);
    td_rand(beta, CH, -1, 1, &s);
    td_rand(rm, CH, -1, 1, &s);
    td_rand(rv, CH, 0.5, 2, &s);
    float *dx = td_put(x, ALL), *dg = td_put(gamma, CH), *db = td_put(beta, CH),
          *drm = td_put(rm, CH), *drv = td_put(rv, CH), *dy = td_zeros(ALL),
          *dmean = td_zeros(CH), *drstd = td_zeros(CH);
    cr_assert_eq(D->ops->batchnorm(D, dx, dg, db, N, CH, HW, (float)EPS, (float)MOM, dy,
                                   dmean, drstd, drm, drv),
                 0);
    bn_ref r = {gamma, beta, NULL};
    double want[ALL], got[ALL], m[CH], v[CH], w[CH], gc[CH];
    ref_forward(x, &r, want, m, v);
    td_get(got, dy, ALL);
    td_close(got, want, ALL, 1e-5, "y");
    td_get(gc, dmean, CH);
    td_close(gc, m, CH, 1e-5, "mean");
    for (int c = 0; c < CH; c++)
        w[c] = 1 / sqrt(v[c] + EPS);
    td_get(gc, drstd, CH);
    td_close(gc, w, CH, 1e-5, "rstd");
    for (int c = 0; c < CH; c++)
        w[c] = (1 - MOM) * rm[c] + MOM * m[c];
    td_get(gc, drm, CH);
    td_close(gc, w, CH, 1e-5, "running_mean");
    for (int c = 0; c < CH; c++) /* PyTorch's: the batch's variance unbiased */
        w[c] = (1 - MOM) * rv[c] + MOM * v[c] * (N * HW) / (N * HW - 1.0);
    td_get(gc, drv, CH);
    td_close(gc, w, CH, 1e-5, "running_var");

    /* Evaluation: the running statistics just moved, not the batch's. */
    double rm2[CH], rv2[CH];
    td_get(rm2, drm, CH);
    td_get(rv2, drv, CH);
    cr_assert_eq(
        D->ops->batchnorm_infer(D, dx, dg, db, drm, drv, N, CH, HW, (float)EPS, dy), 0);
    for (int i = 0; i < N; i++)
        for (int c = 0; c < CH; c++)
            for (int j = 0; j < HW; j++) {
                int at = (i * CH + c) * HW + j;
                want[at] = (x[at] - rm2[c]) / sqrt(rv2[c] + EPS) * gamma[c] + beta[c];
            }
    td_get(got, dy, ALL);
    td_close(got, want, ALL, 1e-5, "y in evaluation");
    td_get(gc, drm, CH);
    td_close(gc, rm2, CH, 0, "running_mean left alone by evaluation");

    D->ops->free(D, dx), D->ops->free(D, dg), D->ops->free(D, db), D->ops->free(D, drm);
    D->ops->free(D, drv), D->ops->free(D, dy), D->ops->free(D, dmean);
    D->ops->free(D, drstd);
    free(x), free(gamma), free(beta), free(rm), free(rv);
    td_finish();
}

Test(device_bnorm, the_gradient_matches_central_differences)
{
    td_open();
    uint64_t s = 8;
    double *x = td_new(ALL), *gamma = td_new(CH), *beta = td_new(CH), *g = td_new(ALL);
    td_rand(x, ALL, -2, 2, &s);
    td_rand(gamma, CH, 0.5, 1.5, &s);
    td_rand(beta, CH, -1, 1, &s);
    td_rand(g, ALL, -1, 1, &s);
    float *dx = td_put(x, ALL), *dgam = td_put(gamma, CH), *dbet = td_put(beta, CH),
          *dgo = td_put(g, ALL), *y = td_zeros(ALL), *mean = td_zeros(CH),
          *rstd = td_zeros(CH), *rm = td_zeros(CH), *rv = td_zeros(CH),
          *gx = td_zeros(ALL), *ggam = td_zeros(CH), *gbet = td_zeros(CH);
    cr_assert_eq(D->ops->batchnorm(D, dx, dgam, dbet, N, CH, HW, (float)EPS, (float)MOM,
                                   y, mean, rstd, rm, rv),
                 0);
    cr_assert_eq(D->ops->batchnorm_grad(D, dx, dgam, mean, rstd, dgo, N, CH, HW,
                                        (float)EPS, gx, ggam, gbet),
                 0);
    bn_ref r = {gamma, beta, g};
    double want[ALL], got[ALL], wc[CH], gc[CH];
    td_numgrad(ref_loss, x, ALL, &r, want);
    td_get(got, gx, ALL);
    td_close(got, want, ALL, 1e-3, "dx");
    /* dgamma = sum g xhat, dbeta = sum g, a channel each. */
    double y0[ALL], m[CH], v[CH];
    ref_forward(x, &(bn_ref){(double[CH]){1, 1, 1, 1}, (double[CH]){0}, NULL}, y0, m, v);
    for (int c = 0; c < CH; c++) {
        wc[c] = 0;
        gc[c] = 0;
        for (int i = 0; i < N; i++)
            for (int j = 0; j < HW; j++) {
                int at = (i * CH + c) * HW + j;
                wc[c] += g[at] * y0[at];
                gc[c] += g[at];
            }
    }
    double out[CH];
    td_get(out, ggam, CH);
    td_close(out, wc, CH, 1e-4, "dgamma");
    td_get(out, gbet, CH);
    td_close(out, gc, CH, 1e-4, "dbeta");
    /* Without dx: the same parameter gradients. */
    cr_assert_eq(D->ops->batchnorm_grad(D, dx, dgam, mean, rstd, dgo, N, CH, HW,
                                        (float)EPS, NULL, ggam, gbet),
                 0);
    td_get(out, gbet, CH);
    td_close(out, gc, CH, 1e-4, "dbeta without dx");
    float *all[] = {dx, dgam, dbet, dgo, y, mean, rstd, rm, rv, gx, ggam, gbet};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        D->ops->free(D, all[i]);
    free(x), free(gamma), free(beta), free(g);
    td_finish();
}

Test(device_bnorm, one_value_a_channel_or_an_empty_shape_is_refused)
{
    td_open();
    float *buf = td_zeros(64);
    /* One sample of a vector: no variance to normalise by (PyTorch refuses
     * it in training too). */
    cr_expect_eq(D->ops->batchnorm(D, buf, buf, buf, 1, 4, 1, 1e-5f, 0.1f, buf, buf, buf,
                                   buf, buf),
                 FERRY_EINVAL);
    cr_expect_eq(D->ops->batchnorm_infer(D, buf, buf, buf, buf, buf, 0, 4, 1, 1e-5f, buf),
                 FERRY_EINVAL);
    cr_expect_eq(
        D->ops->batchnorm_grad(D, buf, buf, buf, buf, buf, 2, 0, 1, 1e-5f, buf, buf, buf),
        FERRY_EINVAL);
    /* One sample of a map has h w values a channel: that trains. */
    cr_expect_eq(D->ops->batchnorm(D, buf, buf, buf, 1, 2, 4, 1e-5f, 0.1f, buf + 8,
                                   buf + 16, buf + 20, buf + 24, buf + 28),
                 0);
    D->ops->free(D, buf);
    td_finish();
}

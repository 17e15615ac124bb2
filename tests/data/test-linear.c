/* tests/data — the synthetic regression set: a seed fixes it bit for bit,
 * the training and test splits of a seed share the true model, and the
 * inputs and noise have the promised distributions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tdata.h"

/* Least squares for t ~ x . w + b through the normal equations (Gaussian
 * elimination with partial pivoting, in double): wb[0..f) = w, wb[f] = b. */
static void fit(const rt_dataset *ds, double *wb)
{
    int f = ds->features, m = f + 1;
    double *a = calloc((size_t)m * (m + 1), sizeof *a);
    cr_assert(a);
    for (size_t i = 0; i < ds->n; i++) {
        const float *x = ds->x + i * (size_t)f;
        for (int r = 0; r < m; r++) {
            double xr = r < f ? x[r] : 1.0;
            for (int c = 0; c < m; c++)
                a[r * (m + 1) + c] += xr * (c < f ? x[c] : 1.0);
            a[r * (m + 1) + m] += xr * ds->targets[i];
        }
    }
    for (int k = 0; k < m; k++) {
        int p = k;
        for (int r = k + 1; r < m; r++)
            if (fabs(a[r * (m + 1) + k]) > fabs(a[p * (m + 1) + k]))
                p = r;
        for (int c = 0; c <= m; c++) {
            double t = a[k * (m + 1) + c];
            a[k * (m + 1) + c] = a[p * (m + 1) + c];
            a[p * (m + 1) + c] = t;
        }
        for (int r = 0; r < m; r++) {
            if (r == k)
                continue;
            double q = a[r * (m + 1) + k] / a[k * (m + 1) + k];
            for (int c = k; c <= m; c++)
                a[r * (m + 1) + c] -= q * a[k * (m + 1) + c];
        }
    }
    for (int k = 0; k < m; k++)
        wb[k] = a[k * (m + 1) + m] / a[k * (m + 1) + k];
    free(a);
}

TD_TEST(linear, the_same_seed_makes_the_same_set_bit_for_bit)
{
    rt_dataset a, b, c;
    cr_assert_eq(rt_linear_make(100, 5, 0.1f, 42, 0, &a), 0);
    cr_assert_eq(rt_linear_make(100, 5, 0.1f, 42, 0, &b), 0);
    cr_assert_eq(rt_linear_make(100, 5, 0.1f, 43, 0, &c), 0);
    cr_expect_eq(memcmp(a.x, b.x, 500 * sizeof(float)), 0);
    cr_expect_eq(memcmp(a.targets, b.targets, 100 * sizeof(float)), 0);
    cr_expect_neq(memcmp(a.x, c.x, 500 * sizeof(float)), 0, "another seed differs");
    cr_expect_eq(a.n, 100);
    cr_expect_eq(a.features, 5);
    cr_expect_eq(a.outputs, 1);
    cr_expect_eq(a.classes, 0);
    cr_expect_null(a.labels);
    cr_expect_eq(a.c * a.h * a.w, 5);
    rt_dataset_free(&a);
    rt_dataset_free(&b);
    rt_dataset_free(&c);
}

TD_TEST(linear, train_and_test_share_the_true_model_but_not_samples)
{
    rt_dataset tr, te, other;
    cr_assert_eq(rt_linear_make(200, 4, 0, 7, 0, &tr), 0);
    cr_assert_eq(rt_linear_make(50, 4, 0, 7, 1, &te), 0);
    cr_assert_eq(rt_linear_make(200, 4, 0, 8, 0, &other), 0);
    cr_expect_neq(memcmp(tr.x, te.x, 50 * 4 * sizeof(float)), 0);
    double w1[5], w2[5], w3[5];
    fit(&tr, w1);
    fit(&te, w2);
    fit(&other, w3);
    double far = 0;
    for (int k = 0; k < 5; k++) {
        cr_expect(fabs(w1[k] - w2[k]) < 1e-4, "w[%d]: %f vs %f", k, w1[k], w2[k]);
        far = fmax(far, fabs(w1[k] - w3[k]));
    }
    cr_expect(far > 0.01, "another seed draws another model");
    rt_dataset_free(&tr);
    rt_dataset_free(&te);
    rt_dataset_free(&other);
}

TD_TEST(linear, inputs_are_standard_normal_and_the_noise_has_its_scale)
{
    rt_dataset ds;
    cr_assert_eq(rt_linear_make(8192, 8, 0.1f, 3, 0, &ds), 0);
    size_t nx = 8192 * 8;
    double s = 0, s2 = 0;
    for (size_t i = 0; i < nx; i++) {
        s += ds.x[i];
        s2 += (double)ds.x[i] * ds.x[i];
    }
    double mean = s / nx, var = s2 / nx - mean * mean;
    cr_expect(fabs(mean) < 0.02, "mean %f", mean);
    cr_expect(fabs(var - 1) < 0.03, "variance %f", var);

    /* The residual of the true model (recovered from the noise-free set of
     * the same seed) is the noise. */
    rt_dataset clean;
    cr_assert_eq(rt_linear_make(64, 8, 0, 3, 1, &clean), 0);
    double wb[9];
    fit(&clean, wb);
    double r2 = 0;
    for (size_t i = 0; i < ds.n; i++) {
        double t = wb[8];
        for (int j = 0; j < 8; j++)
            t += wb[j] * ds.x[i * 8 + j];
        r2 += (ds.targets[i] - t) * (ds.targets[i] - t);
    }
    double sd = sqrt(r2 / ds.n);
    cr_expect(sd > 0.09 && sd < 0.11, "noise sd %f", sd);
    rt_dataset_free(&ds);
    rt_dataset_free(&clean);
}

TD_TEST(linear, loads_by_name_with_its_sizes)
{
    rt_dataset tr, te;
    char err[256] = "";
    cr_assert_eq(rt_dataset_load("linear", NULL, true, 6, 11, &tr, err, sizeof err), 0,
                 "%s", err);
    cr_assert_eq(rt_dataset_load("linear", NULL, false, 6, 11, &te, err, sizeof err), 0,
                 "%s", err);
    cr_expect_eq(tr.n, 8192);
    cr_expect_eq(te.n, 2048);
    cr_expect_eq(tr.features, 6);
    rt_dataset direct;
    cr_assert_eq(rt_linear_make(2048, 6, 0.1f, 11, 1, &direct), 0);
    cr_expect_eq(memcmp(te.targets, direct.targets, 2048 * sizeof(float)), 0);
    rt_dataset_free(&direct);
    cr_expect_eq(rt_dataset_load("linear", NULL, true, 0, 11, &direct, err, sizeof err),
                 FERRY_EINVAL);
    cr_expect(strstr(err, "0 features") != NULL, "%s", err);
    rt_dataset_free(&tr);
    rt_dataset_free(&te);
}

TD_TEST(linear, bad_arguments_are_einval)
{
    rt_dataset ds;
    cr_expect_eq(rt_linear_make(10, 0, 0.1f, 1, 0, &ds), FERRY_EINVAL);
    cr_expect_eq(rt_linear_make(10, 3, -1.0f, 1, 0, &ds), FERRY_EINVAL);
    cr_expect_eq(rt_linear_make(10, 3, NAN, 1, 0, &ds), FERRY_EINVAL);
    cr_expect_eq(rt_linear_make(10, 3, 0.1f, 1, 2, &ds), FERRY_EINVAL);
    cr_expect_eq(rt_linear_make(10, 3, 0.1f, 1, 0, NULL), FERRY_EINVAL);
    cr_expect_eq(rt_linear_make(SIZE_MAX / 2, 3, 0.1f, 1, 0, &ds), FERRY_ENOMEM);
}

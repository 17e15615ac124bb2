/* linreg against arithmetic done here in double: its loss and gradient are
 * the closed forms of least squares, and at the least-squares solution of a
 * small set made here its gradient vanishes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tcommon.h"
#include "tmodels.h"

enum { N = 40, F = 8 };

typedef struct set {
    float x[N * F], t[N];
} set;

/* t = x . w + b + 0.3 noise: the noise keeps the residuals away from 0, so
 * a zero gradient at the solution is the model's doing. */
static void make_set(set *s, uint64_t seed)
{
    uint64_t st = seed;
    float w[F], noise[N];
    tm_normal(s->x, N * F, &st);
    tm_normal(w, F, &st);
    tm_normal(noise, N, &st);
    for (int i = 0; i < N; i++) {
        double y = 0.5;
        for (int j = 0; j < F; j++)
            y += (double)s->x[i * F + j] * w[j];
        s->t[i] = (float)(y + 0.3 * noise[i]);
    }
}

/* Loss sum r^2 / (2N) and gradient X^T r / N, sum r / N of the residuals
 * r = X w + b - t, in double. */
static double reference(const set *s, const double *w, double b, double *gw, double *gb)
{
    double loss = 0;
    memset(gw, 0, F * sizeof *gw);
    *gb = 0;
    for (int i = 0; i < N; i++) {
        double r = b - s->t[i];
        for (int j = 0; j < F; j++)
            r += (double)s->x[i * F + j] * w[j];
        loss += r * r;
        for (int j = 0; j < F; j++)
            gw[j] += (double)s->x[i * F + j] * r;
        *gb += r;
    }
    for (int j = 0; j < F; j++)
        gw[j] /= N;
    *gb /= N;
    return loss / (2.0 * N);
}

/* The normal equations [X 1]^T [X 1] v = [X 1]^T t, by Gaussian elimination
 * with partial pivoting: v = (w, b). */
static void least_squares(const set *s, double v[F + 1])
{
    enum { D = F + 1 };
    double a[D][D + 1] = {{0}};
    for (int i = 0; i < N; i++) {
        double row[D];
        for (int j = 0; j < F; j++)
            row[j] = s->x[i * F + j];
        row[F] = 1;
        for (int r = 0; r < D; r++) {
            for (int c = 0; c < D; c++)
                a[r][c] += row[r] * row[c];
            a[r][D] += row[r] * s->t[i];
        }
    }
    for (int c = 0; c < D; c++) {
        int piv = c;
        for (int r = c + 1; r < D; r++)
            piv = fabs(a[r][c]) > fabs(a[piv][c]) ? r : piv;
        for (int k = 0; k <= D; k++) {
            double tmp = a[c][k];
            a[c][k] = a[piv][k];
            a[piv][k] = tmp;
        }
        for (int r = 0; r < D; r++) {
            if (r == c)
                continue;
            double f = a[r][c] / a[c][c];
            for (int k = c; k <= D; k++)
                a[r][k] -= f * a[c][k];
        }
    }
    for (int r = 0; r < D; r++)
        v[r] = a[r][D] / a[r][r];
}

static void load(tmodel *t, const set *s, ferry_batch_t *b)
{
    cr_assert_eq(t->features, F);
    cr_assert_eq(t->m->outputs, 1);
    tm_batch(t, N, s->x, NULL, s->t, b);
}

Test(models_linreg, loss_and_gradient_are_least_squares_closed_forms)
{
    tmodel t;
    tm_open(&t, "linreg", N, 3);
    set s;
    make_set(&s, 8);
    ferry_batch_t b;
    load(&t, &s, &b);
    float *p = tm_init(&t);
    float *grad = malloc(t.len * sizeof *grad);
    cr_assert(grad);
    float loss;
    cr_assert_eq(tm_loss_grad(&t, p, &b, grad, &loss), 0);

    double w[F], gw[F], gb;
    for (int j = 0; j < F; j++)
        w[j] = p[t.off[0] + j];
    double want = reference(&s, w, p[t.off[1]], gw, &gb);
    cr_expect(fabs(loss - want) <= 1e-5 * want, "loss %.8g, closed form %.8g", loss,
              want);
    for (int j = 0; j < F; j++)
        cr_expect(fabs(grad[t.off[0] + j] - gw[j]) <= 1e-5 * (1 + fabs(gw[j])),
                  "weight[%d]: %.8g, closed form %.8g", j, grad[t.off[0] + j], gw[j]);
    cr_expect(fabs(grad[t.off[1]] - gb) <= 1e-5 * (1 + fabs(gb)),
              "bias: %.8g, closed form %.8g", grad[t.off[1]], gb);

    float le;
    int correct;
    cr_assert_eq(tm_evaluate(&t, p, &b, &le, &correct), 0);
    cr_expect(fabs(le - want) <= 1e-5 * want && correct == 0);

    free(grad);
    free(p);
    tm_close(&t);
    tcom_assert_no_leaks();
}

Test(models_linreg, gradient_vanishes_at_the_least_squares_solution)
{
    tmodel t;
    tm_open(&t, "linreg", N, 3);
    set s;
    make_set(&s, 9);
    ferry_batch_t b;
    load(&t, &s, &b);
    double v[F + 1];
    least_squares(&s, v);

    /* The solution is a true minimum of the reference: its gradient is 0
     * to double precision, so what is left below is the model's rounding. */
    double gw[F], gb;
    double best = reference(&s, v, v[F], gw, &gb);
    for (int j = 0; j < F; j++)
        cr_assert(fabs(gw[j]) < 1e-12);

    float *p = calloc(t.len, sizeof *p);
    float *grad = malloc(t.len * sizeof *grad);
    cr_assert(p && grad);
    for (int j = 0; j < F; j++)
        p[t.off[0] + j] = (float)v[j];
    p[t.off[1]] = (float)v[F];
    float loss;
    cr_assert_eq(tm_loss_grad(&t, p, &b, grad, &loss), 0);
    cr_expect(fabs(loss - best) <= 1e-5 * best, "loss %.8g, least squares %.8g", loss,
              best);
    cr_expect(best > 0.01, "the noise leaves a residual (%g)", best);
    for (int j = 0; j <= F; j++) {
        float g = grad[t.off[j < F ? 0 : 1] + (j < F ? j : 0)];
        cr_expect(fabsf(g) < 1e-5f, "coordinate %d of the gradient at the solution: %g",
                  j, g);
    }
    /* ...and anywhere else it does not. */
    p[t.off[0] + 2] += 0.1f;
    cr_assert_eq(tm_loss_grad(&t, p, &b, grad, &loss), 0);
    cr_expect(fabsf(grad[t.off[0] + 2]) > 1e-2f, "moved off the solution: %g",
              grad[t.off[0] + 2]);
    cr_expect_gt(loss, best);

    free(grad);
    free(p);
    tm_close(&t);
    tcom_assert_no_leaks();
}

/* The model's input is what the "linear" set it names makes for it. */
Test(models_linreg, fits_the_linear_dataset_it_names)
{
    tmodel t;
    tm_open(&t, "linreg", 64, 1);
    cr_assert_str_eq(t.m->dataset, "linear");
    cr_assert_eq(t.m->kind, FERRY_MODEL_REGRESSOR);
    rt_dataset ds;
    char err[256] = "";
    int rc =
        rt_dataset_load(t.m->dataset, NULL, true, t.features, 1, &ds, err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
    cr_expect_eq(ds.features, t.features);
    cr_expect_eq(ds.outputs, t.m->outputs);
    cr_assert_geq(ds.n, 64);

    ferry_batch_t b;
    tm_batch(&t, 64, ds.x, NULL, ds.targets, &b);
    float *p = tm_init(&t);
    float loss;
    int correct;
    cr_expect_eq(tm_evaluate(&t, p, &b, &loss, &correct), 0);
    cr_expect(isfinite(loss) && loss > 0);

    free(p);
    rt_dataset_free(&ds);
    tm_close(&t);
    tcom_assert_no_leaks();
}

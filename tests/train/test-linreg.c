/* linreg trained by the runtime reaches the least-squares solution that the
 * normal equations give in closed form, on the runtime's own "linear" set. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tcommon.h"
#include "ttrain.h"

#define MAXD 16

/* Solves the normal equations of [X 1] beta = t in double: beta[0..d) the
 * weights, beta[d] the bias. */
static void least_squares(const rt_dataset *ds, double *beta)
{
    int d = ds->features, m = d + 1;
    double a[MAXD + 1][MAXD + 2] = {{0}};
    for (size_t s = 0; s < ds->n; s++) {
        double row[MAXD + 1];
        for (int j = 0; j < d; j++)
            row[j] = ds->x[s * (size_t)d + (size_t)j];
        row[d] = 1;
        for (int i = 0; i < m; i++) {
            for (int j = 0; j < m; j++)
                a[i][j] += row[i] * row[j];
            a[i][m] += row[i] * ds->targets[s];
        }
    }
    /* Gaussian elimination with partial pivoting. */
    for (int c = 0; c < m; c++) {
        int piv = c;
        for (int r = c + 1; r < m; r++)
            if (fabs(a[r][c]) > fabs(a[piv][c]))
                piv = r;
        for (int j = 0; j <= m; j++) {
            double tmp = a[c][j];
            a[c][j] = a[piv][j];
            a[piv][j] = tmp;
        }
        for (int r = 0; r < m; r++) {
            if (r == c)
                continue;
            double k = a[r][c] / a[c][c];
            for (int j = c; j <= m; j++)
                a[r][j] -= k * a[c][j];
        }
    }
    for (int i = 0; i < m; i++)
        beta[i] = a[i][m] / a[i][i];
}

Test(linreg, full_batch_descent_converges_to_the_closed_form_solution)
{
    ttrain f;
    ttrain_open(&f, "linreg");
    const ferry_model_t *m = f.mod.task->model;
    cr_assert_eq(m->kind, FERRY_MODEL_REGRESSOR);
    /* One step an epoch over the whole set: plain gradient descent, which
     * converges to the minimiser itself, not to a neighbourhood of it. */
    rt_train_opts o = {
        .batch = 1 << 20, .optim = {.kind = RT_OPT_SGD, .lr = 0.5f}, .seed = 5};
    rt_trainer *t;
    char err[512] = "";
    cr_assert_eq(rt_trainer_create(m, f.dev, &o, &t, err, sizeof err), 0, "%s", err);
    const rt_dataset *ds = rt_trainer_dataset(t, true);
    cr_assert(ds->features > 0 && ds->features <= MAXD);
    cr_assert_eq(ds->outputs, 1);
    rt_epoch_stats st;
    for (int e = 0; e < 150; e++)
        cr_assert_eq(rt_trainer_epoch(t, &st, NULL, NULL, err, sizeof err), 0, "%s", err);

    double beta[MAXD + 1];
    least_squares(ds, beta);
    size_t offs[8];
    size_t len = ferry_model_layout(m, offs);
    float *p = malloc(len * sizeof *p);
    cr_assert_eq(rt_trainer_params(t, p), 0);
    /* linreg's tensors: the weights (features x 1), then the bias. */
    cr_assert_eq(ferry_param_count(&m->params[0]), (size_t)ds->features);
    cr_assert_eq(ferry_param_count(&m->params[1]), 1);
    for (int j = 0; j < ds->features; j++)
        cr_assert_float_eq(p[offs[0] + (size_t)j], beta[j], 1e-4, "weight %d: %g vs %g",
                           j, p[offs[0] + (size_t)j], beta[j]);
    cr_assert_float_eq(p[offs[1]], beta[ds->features], 1e-4, "bias: %g vs %g", p[offs[1]],
                       beta[ds->features]);
    /* The set's noise is 0.1: the best mean squared error is about
     * 0.01 / 2 on unseen samples too. */
    cr_assert(st.test_loss < 0.01, "test loss %g", st.test_loss);
    free(p);
    rt_trainer_destroy(t);
    ttrain_close(&f);
    tcom_assert_no_leaks();
}

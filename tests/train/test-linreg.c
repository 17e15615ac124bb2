/* linreg trained by the runtime reaches the least-squares solution that the
 * normal equations give in closed form, on the runtime's own "linear" set. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tcommon.h"
#include "ttrain.h"

#define MAXD TTRAIN_MAXD

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
    ttrain_least_squares(ds, beta);
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

/* The figures a model reports of itself after each evaluation
 * (ferry_model_t.metrics): linreg's test MSE and the distance of its
 * weights from the data set's known answer; none from a descriptor built
 * before the member; a bad name refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tcommon.h"
#include "ttrain.h"

enum { FEATURES = 8 };

static void linear_sets(rt_dataset *train, rt_dataset *test)
{
    cr_assert_eq(rt_linear_make(2048, FEATURES, 0.1f, 5, 0, train), 0);
    cr_assert_eq(rt_linear_make(512, FEATURES, 0.1f, 5, 1, test), 0);
}

static rt_trainer *trainer(const ferry_model_t *m, ttrain *f, const rt_dataset *train,
                           const rt_dataset *test)
{
    rt_train_opts o = {.batch = 64,
                       .optim = {.kind = RT_OPT_SGD, .lr = 0.05f, .momentum = 0.9f},
                       .seed = 3,
                       .train_set = train,
                       .test_set = test};
    rt_trainer *t;
    char err[512] = "";
    cr_assert_eq(rt_trainer_create(m, f->dev, &o, &t, err, sizeof err), 0, "%s", err);
    return t;
}

/* The distance of the trainer's weights and bias from the set's answer,
 * computed here from the parameters themselves. */
static double distance(rt_trainer *t, const ferry_model_t *m, const rt_dataset *set)
{
    size_t len = rt_trainer_params_len(t), off[2];
    float *p = malloc(len * sizeof *p);
    cr_assert(p);
    cr_assert_eq(rt_trainer_params(t, p), 0);
    ferry_model_layout(m, off);
    double d2 = 0;
    for (int i = 0; i <= FEATURES; i++) {
        double got = i < FEATURES ? p[off[0] + (size_t)i] : p[off[1]];
        d2 += (got - set->answer[i]) * (got - set->answer[i]);
    }
    free(p);
    return sqrt(d2);
}

Test(model_metrics, linreg_reports_its_test_mse_and_its_distance_from_the_answer)
{
    ttrain f;
    ttrain_open(&f, "linreg");
    const ferry_model_t *m = f.mod.task->model;
    rt_dataset train, test;
    linear_sets(&train, &test);
    cr_assert(train.answer && train.answer_n == FEATURES + 1);
    rt_trainer *t = trainer(m, &f, &train, &test);
    char err[512] = "";
    double first = 0, last = 0;
    for (int e = 0; e < 4; e++) {
        rt_epoch_stats st;
        cr_assert_eq(rt_trainer_epoch(t, &st, NULL, NULL, err, sizeof err), 0, "%s", err);
        cr_assert_eq(st.n_metrics, 2);
        cr_assert_str_eq(st.metrics[0].name, "test_mse");
        cr_assert_str_eq(st.metrics[1].name, "weight_error");
        /* linreg's loss is half the squared error. */
        cr_assert(fabs(st.metrics[0].value - 2 * st.test_loss) <= 1e-12 * st.test_loss,
                  "test_mse %g, test_loss %g", st.metrics[0].value, st.test_loss);
        double want = distance(t, m, &train);
        cr_assert(fabs(st.metrics[1].value - want) <= 1e-6 * (1 + want),
                  "epoch %d: weight_error %g, the parameters are %g away", e + 1,
                  st.metrics[1].value, want);
        if (e == 0)
            first = st.metrics[1].value;
        last = st.metrics[1].value;
    }
    /* The noise (0.1) bounds the test MSE below by about 0.01. */
    cr_assert(last < first && last < 0.05, "weight_error %g after %g", last, first);
    rt_trainer_destroy(t);
    rt_dataset_free(&train);
    rt_dataset_free(&test);
    ttrain_close(&f);
}

Test(model_metrics, a_set_without_a_known_answer_gives_only_the_test_mse)
{
    ttrain f;
    ttrain_open(&f, "linreg");
    rt_dataset train, test;
    linear_sets(&train, &test);
    free(train.answer);
    train.answer = NULL;
    rt_trainer *t = trainer(f.mod.task->model, &f, &train, &test);
    rt_epoch_stats st;
    char err[512] = "";
    cr_assert_eq(rt_trainer_epoch(t, &st, NULL, NULL, err, sizeof err), 0, "%s", err);
    cr_assert_eq(st.n_metrics, 1);
    cr_assert_str_eq(st.metrics[0].name, "test_mse");
    rt_trainer_destroy(t);
    rt_dataset_free(&train);
    rt_dataset_free(&test);
    ttrain_close(&f);
}

Test(model_metrics, a_descriptor_built_before_metrics_trains_and_reports_none)
{
    ttrain f;
    ttrain_open(&f, "linreg");
    ferry_model_t old = *f.mod.task->model;
    old.size = (uint32_t)FERRY_MODEL_SIZE_V1; /* what such a module says it has */
    rt_dataset train, test;
    linear_sets(&train, &test);
    rt_trainer *t = trainer(&old, &f, &train, &test);
    rt_epoch_stats st;
    char err[512] = "";
    cr_assert_eq(rt_trainer_epoch(t, &st, NULL, NULL, err, sizeof err), 0, "%s", err);
    cr_assert_eq(st.n_metrics, 0);
    rt_trainer_destroy(t);
    rt_dataset_free(&train);
    rt_dataset_free(&test);
    ttrain_close(&f);
}

static int bad_name(ferry_model_ctx_t *mc, const float *p, double test_loss,
                    ferry_model_metric_t *out, int max)
{
    (void)mc, (void)p, (void)max;
    out[0] = (ferry_model_metric_t){"Test MSE\n", test_loss};
    return 1;
}

Test(model_metrics, a_metric_without_a_plain_name_fails_the_epoch_saying_so)
{
    ttrain f;
    ttrain_open(&f, "linreg");
    ferry_model_t m = *f.mod.task->model;
    m.metrics = bad_name;
    rt_dataset train, test;
    linear_sets(&train, &test);
    rt_trainer *t = trainer(&m, &f, &train, &test);
    rt_epoch_stats st;
    char err[512] = "";
    cr_assert_eq(rt_trainer_epoch(t, &st, NULL, NULL, err, sizeof err), FERRY_EINVAL);
    cr_assert(strstr(err, "the model's metric 0 has no name"), "%s", err);
    rt_trainer_destroy(t);
    rt_dataset_free(&train);
    rt_dataset_free(&test);
    ttrain_close(&f);
}

/* rt_trainer on the cpu: seeds give bit-identical runs, a diverging loss
 * stops training with a clear error, cancellation stops it between steps,
 * and a model that does not fit its data is refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tcommon.h"
#include "ttrain.h"

/* Trains the mlp for `epochs` on 512 random samples and returns its
 * parameters (malloc'ed), *len floats. */
static float *train_mlp(ttrain *f, uint64_t seed, int epochs, size_t *len)
{
    rt_dataset train, test;
    ttrain_random_set(&train, 512, 1, 28, 28, 10, 7);
    ttrain_random_set(&test, 128, 1, 28, 28, 10, 8);
    rt_train_opts o = {.batch = 64,
                       .optim = {.kind = RT_OPT_SGD, .lr = 0.05f, .momentum = 0.9f},
                       .seed = seed,
                       .train_set = &train,
                       .test_set = &test};
    rt_trainer *t;
    char err[512] = "";
    cr_assert_eq(rt_trainer_create(f->mod.task->model, f->dev, &o, &t, err, sizeof err),
                 0, "%s", err);
    for (int e = 0; e < epochs; e++) {
        rt_epoch_stats st;
        cr_assert_eq(rt_trainer_epoch(t, &st, NULL, NULL, err, sizeof err), 0, "%s", err);
        cr_assert_eq(st.epoch, e + 1);
        cr_assert_eq(st.samples, 512);
        cr_assert(isfinite(st.train_loss) && st.train_loss > 0);
        cr_assert(st.test_accuracy >= 0 && st.test_accuracy <= 1);
    }
    *len = rt_trainer_params_len(t);
    float *p = malloc(*len * sizeof *p);
    cr_assert(p);
    cr_assert_eq(rt_trainer_params(t, p), 0);
    rt_trainer_destroy(t);
    ttrain_free_set(&train);
    ttrain_free_set(&test);
    return p;
}

Test(trainer, the_same_seed_gives_bit_identical_parameters_on_the_cpu)
{
    ttrain f;
    ttrain_open(&f, "mlp");
    size_t n1, n2, n3;
    float *a = train_mlp(&f, 42, 2, &n1);
    float *b = train_mlp(&f, 42, 2, &n2);
    float *c = train_mlp(&f, 43, 2, &n3);
    cr_assert_eq(n1, n2);
    cr_assert_eq(memcmp(a, b, n1 * sizeof *a), 0, "two runs with seed 42 differ");
    cr_assert_neq(memcmp(a, c, n1 * sizeof *a), 0, "seeds 42 and 43 gave the same model");
    free(a);
    free(b);
    free(c);
    ttrain_close(&f);
    tcom_assert_no_leaks();
}

Test(trainer, the_mlp_fits_a_small_training_set)
{
    /* Random labels can only be memorised: the training loss falls well
     * below ln(10) if forward, backward and the optimizer agree. */
    ttrain f;
    ttrain_open(&f, "mlp");
    rt_dataset train;
    ttrain_random_set(&train, 256, 1, 28, 28, 10, 3);
    rt_train_opts o = {.batch = 32,
                       .optim = {.kind = RT_OPT_ADAM, .lr = 0.001f},
                       .seed = 1,
                       .train_set = &train,
                       .test_set = &train};
    rt_trainer *t;
    char err[512] = "";
    cr_assert_eq(rt_trainer_create(f.mod.task->model, f.dev, &o, &t, err, sizeof err), 0,
                 "%s", err);
    rt_epoch_stats st;
    double first = 0;
    for (int e = 0; e < 15; e++) {
        cr_assert_eq(rt_trainer_epoch(t, &st, NULL, NULL, err, sizeof err), 0, "%s", err);
        if (e == 0)
            first = st.train_loss;
    }
    cr_assert(first > 1.8, "first epoch's loss %g: not near ln(10)", first);
    cr_assert(st.test_loss < 0.3, "loss still %g after 15 epochs", st.test_loss);
    cr_assert(st.test_accuracy > 0.95, "accuracy on the training set %g",
              st.test_accuracy);
    rt_trainer_destroy(t);
    ttrain_free_set(&train);
    ttrain_close(&f);
    tcom_assert_no_leaks();
}

Test(trainer, a_diverging_loss_stops_training_and_says_so)
{
    ttrain f;
    ttrain_open(&f, "linreg");
    rt_train_opts o = {.batch = 64, .optim = {.kind = RT_OPT_SGD, .lr = 1e4f}, .seed = 1};
    rt_trainer *t;
    char err[512] = "";
    cr_assert_eq(rt_trainer_create(f.mod.task->model, f.dev, &o, &t, err, sizeof err), 0,
                 "%s", err);
    rt_epoch_stats st;
    int rc = 0, e = 0;
    while (e < 3 && rc == 0) {
        e++;
        rc = rt_trainer_epoch(t, &st, NULL, NULL, err, sizeof err);
    }
    cr_assert_eq(rc, FERRY_ERANGE, "got %d: %s", rc, err);
    /* The README: the error says at which epoch and step. */
    const char *at = strstr(err, "loss is ");
    char what[16] = "";
    int epoch = 0;
    size_t step = 0;
    cr_assert(at && sscanf(at, "loss is %15s at epoch %d step %zu", what, &epoch, &step) == 3,
              "%s", err);
    cr_assert((strcmp(what, "nan") == 0 || strcmp(what, "infinite") == 0) &&
                  epoch == e && step >= 1 && strstr(err, ": training stopped"),
              "epoch %d of %d, step %zu: %s", epoch, e, step, err);
    rt_trainer_destroy(t);
    ttrain_close(&f);
    tcom_assert_no_leaks();
}

static bool always(void *arg)
{
    int *polls = arg;
    return ++*polls >= 3;
}

Test(trainer, cancellation_stops_an_epoch_between_steps)
{
    ttrain f;
    ttrain_open(&f, "linreg");
    rt_train_opts o = {.batch = 16, .optim = {.kind = RT_OPT_SGD}, .seed = 1};
    rt_trainer *t;
    char err[512] = "";
    cr_assert_eq(rt_trainer_create(f.mod.task->model, f.dev, &o, &t, err, sizeof err), 0,
                 "%s", err);
    rt_epoch_stats st;
    int polls = 0;
    cr_assert_eq(rt_trainer_epoch(t, &st, always, &polls, err, sizeof err),
                 FERRY_ECANCELED);
    cr_assert_eq(polls, 3);
    cr_assert(strstr(err, "cancelled"), "%s", err);
    rt_trainer_destroy(t);
    ttrain_close(&f);
    tcom_assert_no_leaks();
}

Test(trainer, a_model_that_does_not_fit_its_data_is_refused)
{
    ttrain f;
    ttrain_open(&f, "cnn"); /* its input is fixed; the mlp takes the data's */
    rt_dataset small;
    ttrain_random_set(&small, 64, 1, 5, 5, 10, 1); /* 25 features, the cnn takes 784 */
    rt_train_opts o = {
        .optim = {.kind = RT_OPT_SGD}, .train_set = &small, .test_set = &small};
    rt_trainer *t;
    char err[512] = "";
    cr_assert_eq(rt_trainer_create(f.mod.task->model, f.dev, &o, &t, err, sizeof err),
                 FERRY_EINVAL);
    cr_assert_null(t);
    cr_assert(strstr(err, "25 features") && strstr(err, "784"), "%s", err);
    ttrain_free_set(&small);
    ttrain_close(&f);
    tcom_assert_no_leaks();
}

Test(trainer, a_missing_dataset_directory_is_a_clear_error)
{
    ttrain f;
    ttrain_open(&f, "mlp");
    rt_train_opts o = {.optim = {.kind = RT_OPT_SGD}, .data_dir = "/nonexistent/fmnist"};
    rt_trainer *t;
    char err[512] = "";
    cr_assert_eq(rt_trainer_create(f.mod.task->model, f.dev, &o, &t, err, sizeof err),
                 FERRY_ENOENT);
    cr_assert(strstr(err, "/nonexistent/fmnist"), "%s", err);
    ttrain_close(&f);
    tcom_assert_no_leaks();
}

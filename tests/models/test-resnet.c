/* The bundled resnet (residual blocks with batch normalisation) learns on
 * the cpu: one epoch on a slice of Fashion-MNIST takes its test accuracy
 * far above chance, through the trainer as a worker runs it, and its
 * batch normalisations' running statistics moved. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "runtime/train/tensors.h"
#include "tmodels.h"

#define TRAIN_N 3072
#define TEST_N  1000

Test(models_resnet, one_short_epoch_on_the_cpu_learns)
{
    const char *dir = getenv("FERRY_TEST_TASKS");
    cr_assert(dir);
    char path[4096], err[512] = "";
    snprintf(path, sizeof path, "%s/resnet.so", dir);
    rt_module mod;
    cr_assert_eq(rt_module_open(&mod, path, "resnet.so", err, sizeof err), 0, "%s", err);
    ferry_device_t *dev;
    cr_assert_eq(rt_device_open("cpu", &dev, err, sizeof err), 0, "%s", err);
    rt_dataset train, test;
    if (rt_dataset_load("fashion-mnist", NULL, true, 784, 1, &train, err, sizeof err) ||
        rt_dataset_load("fashion-mnist", NULL, false, 784, 1, &test, err, sizeof err))
        cr_skip_test("no Fashion-MNIST here: %s", err);
    /* Views of the first samples: the sets stay whole for freeing. */
    rt_dataset tr = train, te = test;
    tr.n = TRAIN_N;
    te.n = TEST_N;
    rt_train_opts o = {.batch = 64,
                       .optim = {.kind = RT_OPT_SGD, .lr = 0.02f, .momentum = 0.9f},
                       .seed = 5,
                       .train_set = &tr,
                       .test_set = &te};
    rt_trainer *t;
    cr_assert_eq(rt_trainer_create(mod.task->model, dev, &o, &t, err, sizeof err), 0,
                 "%s", err);
    rt_epoch_stats st;
    cr_assert_eq(rt_trainer_epoch(t, &st, NULL, NULL, err, sizeof err), 0, "%s", err);
    /* 0.64 here (chance is 0.1), evaluated by the running statistics. */
    cr_expect_gt(st.test_accuracy, 0.5, "test accuracy %.3f after one short epoch",
                 st.test_accuracy);
    cr_expect(isfinite(st.test_loss) && st.test_loss < 1.6, "test loss %g", st.test_loss);
    size_t n = rt_trainer_params_len(t);
    float *p = malloc(n * sizeof *p);
    cr_assert(p && rt_trainer_params(t, p) == 0);
    rt_tensors ts;
    cr_assert_eq(rt_trainer_tensors(t, p, &ts), 0);
    size_t at = 0;
    bool seen = false;
    for (size_t i = 0; i < ts.n; i++) {
        size_t c = 1;
        for (int d = 0; d < 4 && ts.shapes[4 * i + d]; d++)
            c *= ts.shapes[4 * i + d];
        if (strcmp(ts.names[i], "stem_bn.num_batches_tracked") == 0) {
            seen = true;
            cr_expect_eq(ts.values[at], (float)rt_trainer_steps(t),
                         "the stem's batch normalisation counted every step");
        }
        at += c;
    }
    cr_expect(seen, "the saved tensors hold stem_bn.num_batches_tracked");
    rt_tensors_free(&ts);
    free(p);
    rt_trainer_destroy(t);
    rt_dataset_free(&train);
    rt_dataset_free(&test);
    rt_device_close(dev);
    rt_module_close(&mod);
}

/* A model's buffers (batch normalisation's running statistics) travel with
 * its parameters by name: a trainer's saved state holds them under
 * PyTorch's names after the parameters, a trainer started from that state
 * holds the same tensors bit for bit and evaluates the same, and a state
 * that lacks one or has it in another shape is refused naming it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "runtime/train/tensors.h"
#include "runtime/train/trainer_int.h"
#include "ttrain.h"

typedef struct bn_fixture {
    rt_module mod;
    ferry_device_t *dev;
    rt_dataset train, test;
    rt_train_opts o;
} bn_fixture;

static void bn_open(bn_fixture *f)
{
    const char *dir = getenv("FERRY_TEST_NN");
    cr_assert(dir, "FERRY_TEST_NN is not set (run through meson test)");
    char path[4096], err[512] = "";
    snprintf(path, sizeof path, "%s/nn_bn.so", dir);
    cr_assert_eq(rt_module_open(&f->mod, path, "nn_bn.so", err, sizeof err), 0, "%s",
                 err);
    cr_assert_eq(rt_device_open("cpu", &f->dev, err, sizeof err), 0, "%s", err);
    ttrain_random_set(&f->train, 96, 2, 5, 5, 3, 1);
    ttrain_random_set(&f->test, 40, 2, 5, 5, 3, 2);
    f->o = (rt_train_opts){.batch = 16,
                           .optim = {.kind = RT_OPT_SGD, .lr = 0.05f, .momentum = 0.9f},
                           .seed = 4,
                           .train_set = &f->train,
                           .test_set = &f->test};
}

static void bn_close(bn_fixture *f)
{
    ttrain_free_set(&f->train);
    ttrain_free_set(&f->test);
    rt_device_close(f->dev);
    rt_module_close(&f->mod);
}

/* The trainer's parameters and buffers by name (rt_tensors_free). */
static void state_of(rt_trainer *t, rt_tensors *out)
{
    float *p = malloc(rt_trainer_params_len(t) * sizeof *p);
    cr_assert(p && rt_trainer_params(t, p) == 0);
    cr_assert_eq(rt_trainer_tensors(t, p, out), 0);
    free(p);
}

/* `in` without tensor `drop` (NULL: none), and with tensor `reshape` (NULL:
 * none) of shape [1] when it is a scalar: views into `in`'s arrays. */
typedef struct edited {
    const char *names[64];
    uint32_t shapes[256];
    float values[4096];
    rt_tensors t;
} edited;

static void edit(const rt_tensors *in, const char *drop, const char *reshape, edited *e)
{
    memset(e, 0, sizeof *e);
    size_t at = 0, n = 0, floats = 0;
    for (size_t i = 0; i < in->n; i++) {
        size_t c = 1;
        for (int d = 0; d < 4 && in->shapes[4 * i + d]; d++)
            c *= in->shapes[4 * i + d];
        if (!drop || strcmp(in->names[i], drop) != 0) {
            cr_assert(n < 64 && floats + c <= 4096);
            e->names[n] = in->names[i];
            memcpy(e->shapes + 4 * n, in->shapes + 4 * i, 4 * sizeof(uint32_t));
            if (reshape && strcmp(in->names[i], reshape) == 0)
                e->shapes[4 * n] = 1;
            memcpy(e->values + floats, in->values + at, c * sizeof(float));
            floats += c;
            n++;
        }
        at += c;
    }
    e->t = (rt_tensors){n, e->names, e->shapes, e->values, floats};
}

Test(train_bn_state, the_saved_state_holds_the_buffers_and_starts_a_trainer_the_same)
{
    bn_fixture f;
    bn_open(&f);
    rt_trainer *a, *b;
    char err[512] = "";
    cr_assert_eq(rt_trainer_create(f.mod.task->model, f.dev, &f.o, &a, err, sizeof err),
                 0, "%s", err);
    rt_epoch_stats st, again;
    cr_assert_eq(rt_trainer_epoch(a, &st, NULL, NULL, err, sizeof err), 0, "%s", err);
    rt_tensors sa, sb;
    state_of(a, &sa);
    static const char *const want[] = {"conv.weight",
                                       "conv.bias",
                                       "bn1.weight",
                                       "bn1.bias",
                                       "fc.weight",
                                       "fc.bias",
                                       "bn2.weight",
                                       "bn2.bias",
                                       "out.weight",
                                       "out.bias",
                                       "bn1.running_mean",
                                       "bn1.running_var",
                                       "bn1.num_batches_tracked",
                                       "bn2.running_mean",
                                       "bn2.running_var",
                                       "bn2.num_batches_tracked"};
    cr_assert_eq(sa.n, sizeof want / sizeof want[0], "%zu tensors", sa.n);
    for (size_t i = 0; i < sa.n; i++)
        cr_expect_str_eq(sa.names[i], want[i]);
    cr_expect_eq(sa.shapes[4 * 12], 0, "num_batches_tracked is saved as a scalar");

    rt_train_opts o = f.o;
    o.init_tensors = &sa;
    cr_assert_eq(rt_trainer_create(f.mod.task->model, f.dev, &o, &b, err, sizeof err), 0,
                 "%s", err);
    state_of(b, &sb);
    cr_assert_eq(sb.n, sa.n);
    cr_assert_eq(sb.floats, sa.floats);
    cr_expect_arr_eq(sb.values, sa.values, sa.floats * sizeof(float),
                     "started from the state, the trainer holds it bit for bit");
    cr_assert_eq(rt_trainer_evaluate(b, b->params, &again, err, sizeof err), 0, "%s",
                 err);
    cr_expect(again.test_loss == st.test_loss && again.test_accuracy == st.test_accuracy,
              "evaluated from the state: loss %.9g, accuracy %g; the run's %.9g, %g",
              again.test_loss, again.test_accuracy, st.test_loss, st.test_accuracy);
    rt_tensors_free(&sb);
    rt_trainer_destroy(b);

    /* A file of the parameters alone (one written before buffers). */
    edited *e = malloc(sizeof *e);
    cr_assert(e);
    edit(&sa, "bn1.running_var", NULL, e);
    o.init_tensors = &e->t;
    err[0] = '\0';
    cr_expect_eq(rt_trainer_create(f.mod.task->model, f.dev, &o, &b, err, sizeof err),
                 FERRY_EINVAL);
    cr_expect(strstr(err, "they have no tensor 'bn1.running_var' (the model's is 3)"),
              "%s", err);
    edit(&sa, NULL, "bn2.num_batches_tracked", e);
    err[0] = '\0';
    cr_expect_eq(rt_trainer_create(f.mod.task->model, f.dev, &o, &b, err, sizeof err),
                 FERRY_EINVAL);
    cr_expect(strstr(err, "tensor 'bn2.num_batches_tracked' is 1 there and scalar in the "
                          "model"),
              "%s", err);
    free(e);
    rt_tensors_free(&sa);
    rt_trainer_destroy(a);
    bn_close(&f);
}

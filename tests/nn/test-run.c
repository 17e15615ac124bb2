/* A layer-list model run the way the trainer runs it (tests/models'
 * fixture): grad_ready for each layer once its gradient is final, in
 * reverse order; dropout drawing a new mask each training batch and none in
 * evaluation; the empty batch; and a device table without the new ops. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tmodels.h"

static void open_nn(tmodel *t, const char *name, int batch)
{
    /* tm_open looks in FERRY_TEST_TASKS: the bundled models, or ours. */
    bool bundled = strcmp(name, "mlp") == 0;
    const char *dir = getenv(bundled ? "FERRY_TEST_TASKS" : "FERRY_TEST_NN");
    cr_assert(dir);
    char keep[4096];
    snprintf(keep, sizeof keep, "%s", getenv("FERRY_TEST_TASKS"));
    setenv("FERRY_TEST_TASKS", dir, 1);
    tm_open(t, name, batch, 3);
    setenv("FERRY_TEST_TASKS", keep, 1);
}

typedef struct ready_log {
    tmodel *t;
    int order[TM_MAX_PARAMS], n;
    double sum[TM_MAX_PARAMS]; /* the tensor's gradient when it was said final */
} ready_log;

static double tensor_sum(tmodel *t, const float *host, int i)
{
    double s = 0;
    for (size_t j = 0; j < tm_count(t, i); j++)
        s += fabs((double)host[t->off[i] + j]);
    return s;
}

static void on_ready(void *arg, int tensor)
{
    ready_log *r = arg;
    float *g = malloc(r->t->len * sizeof *g);
    cr_assert(g);
    r->t->dev->ops->download(r->t->dev, g, r->t->grad, r->t->len * sizeof *g);
    r->order[r->n++] = tensor;
    r->sum[tensor] = tensor_sum(r->t, g, tensor);
    free(g);
}

Test(nn_run, grad_ready_comes_for_each_tensor_once_final_last_layer_first)
{
    tmodel t;
    open_nn(&t, "mlp", 4);
    ready_log r = {.t = &t};
    t.mc.grad_ready = on_ready;
    t.mc.grad_ready_arg = &r;
    float *p = tm_init(&t), *g = malloc(t.len * sizeof *g), loss;
    ferry_batch_t b;
    tm_random_batch(&t, 4, 17, &b);
    cr_assert_eq(tm_loss_grad(&t, p, &b, g, &loss), 0);
    static const int want[] = {4, 5, 2, 3, 0, 1}; /* fc3, fc2, fc1 */
    cr_assert_eq(r.n, 6, "%d calls", r.n);
    for (int i = 0; i < 6; i++) {
        cr_expect_eq(r.order[i], want[i], "call %d: tensor %d", i, r.order[i]);
        cr_expect_eq(r.sum[r.order[i]], tensor_sum(&t, g, r.order[i]),
                     "tensor %d changed after grad_ready", r.order[i]);
    }
    free(p), free(g);
    tm_close(&t);
}

Test(nn_run, dropout_draws_a_mask_each_training_batch_and_none_in_evaluation)
{
    tmodel t;
    open_nn(&t, "nn_avg", 6);
    float *p = tm_init(&t), l1, l2, e1, e2;
    ferry_batch_t b;
    tm_random_batch(&t, 6, 17, &b);
    int c1, c2;
    cr_assert_eq(tm_loss_grad(&t, p, &b, NULL, &l1), 0);
    cr_assert_eq(tm_loss_grad(&t, p, &b, NULL, &l2), 0);
    cr_assert_eq(tm_evaluate(&t, p, &b, &e1, &c1), 0);
    cr_assert_eq(tm_evaluate(&t, p, &b, &e2, &c2), 0);
    cr_expect_neq(l1, l2, "two training batches drew the same mask");
    cr_expect_eq(e1, e2, "evaluation is not deterministic");
    cr_expect_eq(c1, c2);
    cr_expect_neq(l1, e1, "training and evaluation gave the same loss: no dropout");
    free(p);
    tm_close(&t);
}

Test(nn_run, an_empty_batch_gives_a_zero_gradient_and_loss)
{
    tmodel t;
    open_nn(&t, "nn_bce", 4);
    float *p = tm_init(&t), *g = malloc(t.len * sizeof *g), loss = 1;
    int correct = 1;
    ferry_batch_t b = {.n = 0};
    cr_assert_eq(tm_loss_grad(&t, p, &b, g, &loss), 0);
    cr_expect_eq(loss, 0.0f);
    for (int i = 0; i < t.nparams; i++)
        cr_expect_eq(tensor_sum(&t, g, i), 0.0, "tensor %d", i);
    cr_expect_eq(tm_evaluate(&t, p, &b, &loss, &correct), 0);
    cr_expect(loss == 0.0f && correct == 0);
    b.n = 5; /* more than the workspace holds */
    cr_expect_eq(tm_loss_grad(&t, p, &b, g, &loss), FERRY_EINVAL);
    free(p), free(g);
    tm_close(&t);
}

Test(nn_run, a_device_without_the_activation_ops_is_refused_not_crashed)
{
    tmodel t;
    open_nn(&t, "nn_act", 4);
    ferry_device_ops_t old = *t.dev->ops;
    old.size = (uint32_t)offsetof(ferry_device_ops_t, activation);
    const ferry_device_ops_t *keep = t.dev->ops;
    t.dev->ops = &old;
    float *p = tm_init(&t), loss;
    ferry_batch_t b;
    tm_random_batch(&t, 4, 17, &b);
    cr_expect_eq(tm_loss_grad(&t, p, &b, NULL, &loss), FERRY_ENOTSUP);
    t.dev->ops = keep;
    cr_expect_eq(tm_loss_grad(&t, p, &b, NULL, &loss), 0);
    free(p);
    tm_close(&t);
}

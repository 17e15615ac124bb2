/* Batch normalisation's running statistics, through a layer-list model as
 * the trainer runs it (tests/models' fixture): after k training batches
 * they are what PyTorch's momentum rule gives from those batches (the
 * variance unbiased), evaluation and prediction normalise with them and
 * leave them alone, a runtime that keeps no buffers is told so, and a
 * training batch of one value a channel is refused as PyTorch refuses it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tmodels.h"

#define EPS 1e-5
#define MOM 0.1
#define K   3 /* training batches */
#define B   4 /* samples a batch */

static void open_bn(tmodel *t, const char *name)
{
    char keep[4096];
    snprintf(keep, sizeof keep, "%s", getenv("FERRY_TEST_TASKS"));
    setenv("FERRY_TEST_TASKS", getenv("FERRY_TEST_NN"), 1);
    tm_open(t, name, B, 3);
    setenv("FERRY_TEST_TASKS", keep, 1);
}

/* The layer's channels and values a channel, from the model's input. */
static void shape_of(const tmodel *t, int *ch, int *hw)
{
    const int *in = t->m->input;
    bool vector = in[0] == 1 && in[1] == 1;
    *ch = vector ? in[2] : in[0];
    *hw = vector ? 1 : in[1] * in[2];
}

static double at(const float *x, int ch, int hw, int i, int c, int j)
{
    return x[((size_t)i * ch + c) * hw + j];
}

static void download_buffers(tmodel *t, float *host)
{
    cr_assert_eq(rt_model_ctx_get_buffers(&t->mc, host), 0);
}

static void check_running_statistics(const char *name)
{
    tmodel t;
    open_bn(&t, name);
    int ch, hw;
    shape_of(&t, &ch, &hw);
    const ferry_param_t *bl = ferry_model_buffer_list(t.m);
    cr_assert(bl, "%s declares no buffers", name);
    cr_expect_str_eq(bl[0].name, "bn.running_mean");
    cr_expect_str_eq(bl[1].name, "bn.running_var");
    cr_expect_str_eq(bl[2].name, "bn.num_batches_tracked");
    cr_expect_eq(bl[2].shape[0], 0, "num_batches_tracked is a scalar");
    cr_expect_null(bl[3].name);
    size_t off[3], blen = ferry_model_buffers_layout(t.m, off);
    cr_assert_eq(blen, t.mc.blen);
    float *buf = calloc(blen, sizeof *buf);
    download_buffers(&t, buf);
    for (int c = 0; c < ch; c++)
        cr_expect(buf[off[0] + c] == 0 && buf[off[1] + c] == 1,
                  "the running mean starts at 0 and the variance at 1");

    /* Weights and biases other than 1 and 0, so that evaluation shows them. */
    float *p = tm_init(&t);
    for (int c = 0; c < ch; c++) {
        cr_expect_eq(p[t.off[0] + c], 1.0f, "bn.weight starts at 1");
        cr_expect_eq(p[t.off[1] + c], 0.0f, "bn.bias starts at 0");
        p[t.off[0] + c] = 0.5f + 0.25f * (float)c;
        p[t.off[1] + c] = 0.1f * (float)c - 0.2f;
    }
    double rm[64], rv[64];
    for (int c = 0; c < ch; c++)
        rm[c] = 0, rv[c] = 1;
    size_t feats = (size_t)t.features, n_all = (size_t)B * feats;
    float *x = malloc(n_all * sizeof *x), *y = malloc(n_all * sizeof *y);
    uint64_t s = 41;
    for (int k = 0; k < K; k++) {
        tm_normal(x, n_all, &s);
        for (size_t q = 0; q < n_all; q++) /* a mean and a spread of their own */
            x[q] = x[q] * (1.0f + (float)k) + 2.0f * (float)k - 1.0f;
        tm_normal(y, n_all, &s);
        ferry_batch_t b;
        tm_batch(&t, B, x, NULL, y, &b);
        float loss, want_loss = 0;
        cr_assert_eq(tm_loss_grad(&t, p, &b, NULL, &loss), 0);
        double cnt = (double)B * hw;
        for (int c = 0; c < ch; c++) {
            double m = 0, v = 0;
            for (int i = 0; i < B; i++)
                for (int j = 0; j < hw; j++)
                    m += at(x, ch, hw, i, c, j) / cnt;
            for (int i = 0; i < B; i++)
                for (int j = 0; j < hw; j++)
                    v += pow(at(x, ch, hw, i, c, j) - m, 2) / cnt;
            /* Training normalises by the batch's own statistics. */
            for (int i = 0; i < B; i++)
                for (int j = 0; j < hw; j++) {
                    double z =
                        (at(x, ch, hw, i, c, j) - m) / sqrt(v + EPS) * p[t.off[0] + c] +
                        p[t.off[1] + c];
                    want_loss += (float)(pow(z - at(y, ch, hw, i, c, j), 2) / (2.0 * B));
                }
            rm[c] = (1 - MOM) * rm[c] + MOM * m;
            rv[c] = (1 - MOM) * rv[c] + MOM * v * cnt / (cnt - 1);
        }
        cr_expect_float_eq(loss, want_loss, 1e-4 * fabsf(want_loss),
                           "%s step %d: loss %g, by the batch's statistics %g", name, k,
                           (double)loss, (double)want_loss);
    }
    download_buffers(&t, buf);
    for (int c = 0; c < ch; c++) {
        cr_expect_float_eq(buf[off[0] + c], rm[c], 1e-5 * (1 + fabs(rm[c])),
                           "%s: running_mean[%d] %g, expected %g", name, c,
                           (double)buf[off[0] + c], rm[c]);
        cr_expect_float_eq(buf[off[1] + c], rv[c], 1e-5 * (1 + fabs(rv[c])),
                           "%s: running_var[%d] %g, expected %g", name, c,
                           (double)buf[off[1] + c], rv[c]);
    }
    cr_expect_eq(buf[off[2]], (float)K, "num_batches_tracked %g after %d batches",
                 (double)buf[off[2]], K);

    /* Evaluation and prediction: the running statistics, untouched. */
    tm_normal(x, n_all, &s);
    tm_normal(y, n_all, &s);
    ferry_batch_t b;
    tm_batch(&t, B, x, NULL, y, &b);
    float loss, want_loss = 0;
    int correct;
    cr_assert_eq(tm_evaluate(&t, p, &b, &loss, &correct), 0);
    float *out = t.dev->ops->alloc(t.dev, n_all * sizeof *out);
    cr_assert_eq(rt_model_predict(t.m)(&t.mc.pub, t.params, &b, out), 0);
    float *got = malloc(n_all * sizeof *got);
    cr_assert_eq(t.dev->ops->download(t.dev, got, out, n_all * sizeof *got), 0);
    for (int i = 0; i < B; i++)
        for (int c = 0; c < ch; c++)
            for (int j = 0; j < hw; j++) {
                size_t q = ((size_t)i * ch + c) * hw + j;
                double z = (x[q] - rm[c]) / sqrt(rv[c] + EPS) * p[t.off[0] + c] +
                           p[t.off[1] + c];
                cr_expect_float_eq(
                    got[q], z, 1e-4 * (1 + fabs(z)),
                    "%s: prediction %zu is %g, by the running statistics %g", name, q,
                    (double)got[q], z);
                want_loss += (float)(pow(z - y[q], 2) / (2.0 * B));
            }
    cr_expect_float_eq(loss, want_loss, 1e-4 * fabsf(want_loss),
                       "%s: evaluation's loss %g, by the running statistics %g", name,
                       (double)loss, (double)want_loss);
    float *after = calloc(blen, sizeof *after);
    download_buffers(&t, after);
    cr_expect_arr_eq(after, buf, blen * sizeof *buf,
                     "evaluation and prediction leave the buffers alone");
    t.dev->ops->free(t.dev, out);
    free(after), free(got), free(x), free(y), free(p), free(buf);
    tm_close(&t);
}

Test(nn_bn, batchnorm2d_running_statistics_after_k_batches_and_evaluation_by_them)
{
    check_running_statistics("nn_bn2d");
}

Test(nn_bn, batchnorm1d_running_statistics_after_k_batches_and_evaluation_by_them)
{
    check_running_statistics("nn_bn1d");
}

Test(nn_bn, a_training_batch_of_one_vector_is_refused_as_pytorch_refuses_it)
{
    tmodel t;
    open_bn(&t, "nn_bn1d");
    float *p = tm_init(&t), x[5] = {1, 2, 3, 4, 5}, y[5] = {0};
    ferry_batch_t b;
    tm_batch(&t, 1, x, NULL, y, &b);
    float loss;
    cr_expect_eq(tm_loss_grad(&t, p, &b, NULL, &loss), FERRY_EINVAL);
    int correct;
    cr_expect_eq(tm_evaluate(&t, p, &b, &loss, &correct), 0,
                 "evaluation takes one sample: it has running statistics");
    free(p);
    tm_close(&t);
}

Test(nn_bn, a_runtime_that_keeps_no_buffers_is_told_the_layer_needs_them)
{
    tmodel t;
    open_bn(&t, "nn_bn2d");
    float *p = tm_init(&t), x[48] = {0}, y[48] = {0};
    x[1] = 1;
    ferry_batch_t b;
    tm_batch(&t, 4, x, NULL, y, &b);
    /* A context as an older runtime hands it: no `buffers` member. */
    uint32_t size = t.mc.pub.size;
    t.mc.pub.size = (uint32_t)offsetof(ferry_model_ctx_t, buffers);
    float loss;
    cr_expect_eq(tm_loss_grad(&t, p, &b, NULL, &loss), FERRY_ENOTSUP);
    t.mc.pub.size = size;
    cr_expect_eq(tm_loss_grad(&t, p, &b, NULL, &loss), 0);
    free(p);
    tm_close(&t);
}

/* What loss_grad and evaluate report for a batch, checked against each
 * other and against the same samples one at a time: the two losses agree,
 * a batch's loss and gradient are the means of its samples', evaluate
 * counts exactly the samples whose top logit is their label, every element
 * of the gradient is written, and bad batches are refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tcommon.h"
#include "tmodels.h"

typedef struct host_batch {
    int n;
    float *x, *targets;
    int32_t *labels;
} host_batch;

static void make_batch(const tmodel *t, int n, uint64_t seed, host_batch *h)
{
    uint64_t s = seed;
    h->n = n;
    h->x = malloc((size_t)n * t->features * sizeof(float));
    h->labels = malloc((size_t)n * sizeof(int32_t));
    h->targets = malloc((size_t)n * t->m->outputs * sizeof(float));
    cr_assert(h->x && h->labels && h->targets);
    tm_normal(h->x, (size_t)n * t->features, &s);
    tm_labels(h->labels, (size_t)n, t->m->outputs, &s);
    tm_normal(h->targets, (size_t)n * t->m->outputs, &s);
}

static void free_batch(host_batch *h)
{
    free(h->x);
    free(h->labels);
    free(h->targets);
}

/* Samples [from, from + n) of h, uploaded. */
static void upload(tmodel *t, const host_batch *h, int from, int n, ferry_batch_t *b)
{
    bool cls = t->m->kind == FERRY_MODEL_CLASSIFIER;
    tm_batch(t, n, h->x + (size_t)from * t->features, cls ? h->labels + from : NULL,
             cls ? NULL : h->targets + (size_t)from * t->m->outputs, b);
}

static void losses_agree(const char *name)
{
    tmodel t;
    tm_open(&t, name, 16, 5);
    float *p = tm_init(&t);
    float *grad = malloc(t.len * sizeof *grad);
    cr_assert(grad);
    host_batch h;
    make_batch(&t, 16, 9, &h);
    ferry_batch_t b;
    upload(&t, &h, 0, 16, &b);

    float lg = NAN, le = NAN;
    int correct = -1;
    cr_assert_eq(tm_loss_grad(&t, p, &b, grad, &lg), 0);
    cr_assert_eq(tm_evaluate(&t, p, &b, &le, &correct), 0);
    cr_expect(isfinite(lg) && lg > 0, "%s: loss %g", name, lg);
    cr_expect(fabsf(lg - le) <= 1e-6f * fabsf(lg),
              "%s: loss_grad says %.9g, evaluate %.9g", name, lg, le);
    if (t.m->kind == FERRY_MODEL_REGRESSOR)
        cr_expect_eq(correct, 0, "a regressor counts no correct samples");
    else
        cr_expect(correct >= 0 && correct <= 16);

    /* Every element of every tensor was written (tm_loss_grad NaN-fills). */
    for (int i = 0; i < t.nparams; i++)
        for (size_t j = 0; j < tm_count(&t, i); j++)
            cr_assert(isfinite(grad[t.off[i] + j]), "%s: %s[%zu] not written (%g)", name,
                      t.m->params[i].name, j, grad[t.off[i] + j]);

    free_batch(&h);
    free(grad);
    free(p);
    tm_close(&t);
    tcom_assert_no_leaks();
}

Test(models_batch, mlp_loss_grad_and_evaluate_agree_on_the_loss)
{
    losses_agree("mlp");
}

Test(models_batch, cnn_loss_grad_and_evaluate_agree_on_the_loss)
{
    losses_agree("cnn");
}

Test(models_batch, linreg_loss_grad_and_evaluate_agree_on_the_loss)
{
    losses_agree("linreg");
}

/* A batch's loss and gradient are the means over its samples, each
 * computed alone: the batch dimension is handled, and divided by, once. */
static void batch_is_mean_of_samples(const char *name, int n)
{
    tmodel t;
    tm_open(&t, name, n, 13);
    float *p = tm_init(&t);
    float *grad = malloc(t.len * sizeof *grad);
    float *one = malloc(t.len * sizeof *one);
    double *sum = calloc(t.len, sizeof *sum);
    cr_assert(grad && one && sum);
    host_batch h;
    make_batch(&t, n, 21, &h);
    ferry_batch_t b;
    upload(&t, &h, 0, n, &b);
    float loss;
    cr_assert_eq(tm_loss_grad(&t, p, &b, grad, &loss), 0);

    double losses = 0;
    for (int i = 0; i < n; i++) {
        float li;
        upload(&t, &h, i, 1, &b);
        cr_assert_eq(tm_loss_grad(&t, p, &b, one, &li), 0);
        losses += li;
        for (size_t j = 0; j < t.len; j++)
            sum[j] += one[j];
    }
    cr_expect(fabs(losses / n - loss) <= 1e-5 * fabs(loss),
              "%s: batch loss %.8g, mean of its samples' %.8g", name, loss, losses / n);
    for (int i = 0; i < t.nparams; i++) {
        double scale = 0;
        for (size_t j = 0; j < tm_count(&t, i); j++)
            scale = fmax(scale, fabs(grad[t.off[i] + j]));
        for (size_t j = 0; j < tm_count(&t, i); j++) {
            size_t at = t.off[i] + j;
            double mean = sum[at] / n;
            cr_assert(
                fabs(mean - grad[at]) <= 1e-4 * scale + 1e-4 * fabs(mean),
                "%s: %s[%zu] is %.8g for the batch, %.8g as the mean of its samples",
                name, t.m->params[i].name, j, grad[at], mean);
        }
    }

    free_batch(&h);
    free(sum);
    free(one);
    free(grad);
    free(p);
    tm_close(&t);
    tcom_assert_no_leaks();
}

Test(models_batch, mlp_batch_gradient_is_the_mean_of_its_samples)
{
    batch_is_mean_of_samples("mlp", 6);
}

Test(models_batch, cnn_batch_gradient_is_the_mean_of_its_samples)
{
    batch_is_mean_of_samples("cnn", 4);
}

Test(models_batch, linreg_batch_gradient_is_the_mean_of_its_samples)
{
    batch_is_mean_of_samples("linreg", 7);
}

/* The model's logits are out of reach, but not its top class: a sample's
 * cross-entropy, log-sum-exp minus the label's logit, is smallest for the
 * label with the largest logit. Half the samples get that label, half
 * another, and evaluate must count exactly the first half. */
static void evaluate_counts_top_logits(const char *name)
{
    enum { N = 12 };
    tmodel t;
    tm_open(&t, name, N, 17);
    float *p = tm_init(&t);
    host_batch h;
    make_batch(&t, N, 23, &h);
    int classes = t.m->outputs;
    ferry_batch_t b;
    double sum = 0;
    int expect = 0;
    for (int i = 0; i < N; i++) {
        int top = -1;
        float best = INFINITY;
        for (int c = 0; c < classes; c++) {
            h.labels[i] = c;
            upload(&t, &h, i, 1, &b);
            float l;
            int correct;
            cr_assert_eq(tm_evaluate(&t, p, &b, &l, &correct), 0);
            if (l > logf((float)classes))
                cr_assert_eq(correct, 0,
                             "a sample whose loss exceeds ln(classes) is "
                             "not one its top logit gets right");
            if (l < best) {
                best = l;
                top = c;
            }
        }
        /* The single-sample count agrees with the loss ranking. */
        h.labels[i] = top;
        upload(&t, &h, i, 1, &b);
        float l;
        int correct;
        cr_assert_eq(tm_evaluate(&t, p, &b, &l, &correct), 0);
        cr_assert_eq(correct, 1, "%s: sample %d with its top label %d is not counted",
                     name, i, top);
        if (i % 2)
            h.labels[i] = (top + 1 + i % (classes - 1)) % classes;
        else
            expect++;
        upload(&t, &h, i, 1, &b);
        cr_assert_eq(tm_evaluate(&t, p, &b, &l, &correct), 0);
        sum += l;
    }
    upload(&t, &h, 0, N, &b);
    float loss;
    int correct;
    cr_assert_eq(tm_evaluate(&t, p, &b, &loss, &correct), 0);
    cr_expect_eq(correct, expect, "%s: evaluate counts %d right, the logits say %d", name,
                 correct, expect);
    cr_expect(fabs(sum / N - loss) <= 1e-5 * fabs(loss),
              "%s: batch loss %.8g, mean of its samples' %.8g", name, loss, sum / N);

    free_batch(&h);
    free(p);
    tm_close(&t);
    tcom_assert_no_leaks();
}

Test(models_batch, mlp_evaluate_counts_the_samples_whose_top_logit_is_the_label)
{
    evaluate_counts_top_logits("mlp");
}

Test(models_batch, cnn_evaluate_counts_the_samples_whose_top_logit_is_the_label)
{
    evaluate_counts_top_logits("cnn");
}

/* Batches a model must refuse, and the empty one a rank can get when the
 * global batch is smaller than the world. */
static void odd_batches(const char *name)
{
    tmodel t;
    tm_open(&t, name, 4, 3);
    float *p = tm_init(&t);
    float *grad = malloc(t.len * sizeof *grad);
    cr_assert(grad);
    host_batch h;
    make_batch(&t, 4, 1, &h);
    ferry_batch_t b;
    upload(&t, &h, 0, 4, &b);
    float loss;
    int correct;

    ferry_batch_t big = b;
    big.n = 5;
    cr_expect_eq(tm_loss_grad(&t, p, &big, grad, &loss), FERRY_EINVAL,
                 "%s: a batch beyond the workspace", name);
    cr_expect_eq(tm_evaluate(&t, p, &big, &loss, &correct), FERRY_EINVAL);

    if (t.m->kind == FERRY_MODEL_CLASSIFIER) {
        h.labels[2] = t.m->outputs;
        upload(&t, &h, 0, 4, &b);
        cr_expect_eq(tm_loss_grad(&t, p, &b, grad, &loss), FERRY_EINVAL,
                     "%s: a label out of range", name);
        cr_expect_eq(tm_evaluate(&t, p, &b, &loss, &correct), FERRY_EINVAL);
        ferry_batch_t nolabels = b;
        nolabels.labels = NULL;
        cr_expect_eq(tm_loss_grad(&t, p, &nolabels, grad, &loss), FERRY_EINVAL);
    } else {
        ferry_batch_t notargets = b;
        notargets.targets = NULL;
        cr_expect_eq(tm_loss_grad(&t, p, &notargets, grad, &loss), FERRY_EINVAL);
    }

    ferry_batch_t empty = b;
    empty.n = 0;
    loss = NAN;
    cr_assert_eq(tm_loss_grad(&t, p, &empty, grad, &loss), 0);
    cr_expect_eq(loss, 0.0f);
    for (int i = 0; i < t.nparams; i++)
        for (size_t j = 0; j < tm_count(&t, i); j++)
            cr_assert_eq(grad[t.off[i] + j], 0.0f, "%s: an empty batch's gradient", name);
    correct = -1;
    cr_assert_eq(tm_evaluate(&t, p, &empty, &loss, &correct), 0);
    cr_expect(loss == 0.0f && correct == 0);

    free_batch(&h);
    free(grad);
    free(p);
    tm_close(&t);
    tcom_assert_no_leaks();
}

Test(models_batch, mlp_refuses_bad_batches_and_takes_an_empty_one)
{
    odd_batches("mlp");
}

Test(models_batch, cnn_refuses_bad_batches_and_takes_an_empty_one)
{
    odd_batches("cnn");
}

Test(models_batch, linreg_refuses_bad_batches_and_takes_an_empty_one)
{
    odd_batches("linreg");
}

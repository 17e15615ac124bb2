/* The evaluation after an epoch: the test set through the model's
 * evaluate, summed over the ranks where the mode has several, and the
 * model's own metrics. */
#include <stdio.h>
#include <string.h>

#include "trainer_int.h"

/* The model's own figures on the parameters just evaluated. A name that is
 * not a plain identifier is the module's mistake, refused rather than
 * passed on to logs and JSON. */
static int model_metrics(rt_trainer *t, const float *params, rt_epoch_stats *st,
                         char *err, size_t errlen)
{
    st->n_metrics = 0;
    rt_metrics_fn fn = rt_model_metrics(t->m);
    if (!fn)
        return 0;
    ferry_model_metric_t got[FERRY_MODEL_METRICS_MAX];
    memset(got, 0, sizeof got);
    int n = fn(&t->mc.pub, params, st->test_loss, got, FERRY_MODEL_METRICS_MAX);
    if (n < 0) {
        snprintf(err, errlen, "the model's metrics failed: %s", ferry_strerror(n));
        return n;
    }
    if (n > FERRY_MODEL_METRICS_MAX)
        n = FERRY_MODEL_METRICS_MAX;
    for (int i = 0; i < n; i++) {
        const char *name = got[i].name;
        size_t len = name ? strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") : 0;
        if (!name || len == 0 || name[len] || len >= sizeof st->metrics[i].name) {
            snprintf(err, errlen,
                     "the model's metric %d has no name of 1 to %zu lowercase letters, "
                     "digits or '_'",
                     i, sizeof st->metrics[i].name - 1);
            return FERRY_EINVAL;
        }
        memcpy(st->metrics[i].name, name, len + 1);
        st->metrics[i].value = got[i].value;
    }
    st->n_metrics = n;
    return 0;
}

int rt_trainer_evaluate(rt_trainer *t, const float *params, rt_epoch_stats *st, char *err,
                        size_t errlen)
{
    double loss_sum = 0;
    size_t right = 0, seen = 0;
    int rc = rt_loader_begin(t->test, 0);
    const rt_batch_host *hb;
    while (rc == 0 && (hb = rt_loader_next(t->test))) {
        ferry_batch_t b;
        float loss = 0;
        int correct = 0;
        if ((rc = rt_trainer_to_device(t, hb, &b)))
            break;
        if ((rc = t->m->evaluate(&t->mc.pub, params, &b, &loss, &correct))) {
            snprintf(err, errlen, "the model's evaluate failed: %s", ferry_strerror(rc));
            return rc;
        }
        loss_sum += (double)loss * hb->n;
        right += (size_t)correct;
        seen += (size_t)hb->n;
    }
    if (rc) {
        snprintf(err, errlen, "evaluation: %s", ferry_strerror(rc));
        return rc;
    }
    if (t->mode->sum) {
        /* Counts below 2^24 are exact in float32; the test sets are far
         * smaller. */
        float sums[3] = {(float)loss_sum, (float)right, (float)seen};
        char why[512] = "";
        if ((rc = t->mode->sum(t, sums, 3, why, sizeof why))) {
            snprintf(err, errlen, "evaluation: summing over the ranks: %s", why);
            return rc;
        }
        loss_sum = sums[0];
        right = (size_t)sums[1];
        seen = (size_t)sums[2];
    }
    st->eval_samples = seen;
    st->test_loss = seen ? loss_sum / (double)seen : 0;
    st->test_accuracy =
        t->m->kind == FERRY_MODEL_CLASSIFIER && seen ? (double)right / (double)seen : 0;
    return model_metrics(t, params, st, err, errlen);
}

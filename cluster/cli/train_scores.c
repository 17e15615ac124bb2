/* What an epoch is judged by, as `ferry submit` prints it: a classifier's
 * test accuracy, and the figures a model reports of itself (a regressor's
 * test MSE and distance from the known answer), in the progress line, the
 * closing line and --json. Async mode's ranks each report their own, which
 * are averaged here as the test loss is. */
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "train_int.h"

void cli_scores_print(FILE *f, const cli_train_opts *o, const Ferry__TrainEpochReply *r)
{
    if (o->classifier)
        fprintf(f, "  test_accuracy %.4f", r->test_accuracy);
    for (size_t i = 0; i < r->n_metrics; i++)
        fprintf(f, "  %s %.4g", r->metrics[i]->name, r->metrics[i]->value);
}

void cli_scores_json(FILE *f, const Ferry__TrainEpochReply *r)
{
    fputs(",\"metrics\":{", f);
    for (size_t i = 0; i < r->n_metrics; i++) {
        fputs(i ? "," : "", f);
        json_str(f, r->metrics[i]->name);
        fprintf(f, ":%.6g", r->metrics[i]->value);
    }
    fputc('}', f);
}

void cli_scores_add(cli_scores *s, const Ferry__TrainEpochReply *r)
{
    for (size_t i = 0; i < r->n_metrics && i < FERRY_MODEL_METRICS_MAX; i++) {
        if (i >= s->n) {
            snprintf(s->name[i], sizeof s->name[i], "%s", r->metrics[i]->name);
            s->sum[i] = 0;
            s->n = i + 1;
        }
        s->sum[i] += r->metrics[i]->value * (double)r->eval_samples;
    }
    s->samples += r->eval_samples;
}

void cli_scores_mean(cli_scores *s, Ferry__TrainEpochReply *sum)
{
    for (size_t i = 0; i < s->n; i++) {
        ferry__model_metric__init(&s->metric[i]);
        s->metric[i].name = s->name[i];
        s->metric[i].value = s->samples ? s->sum[i] / (double)s->samples : 0;
        s->ptr[i] = &s->metric[i];
    }
    sum->n_metrics = s->n;
    sum->metrics = s->n ? s->ptr : NULL;
}

/* A model's own metrics in async mode, where each rank reports its own:
 * averaged over the ranks by their test samples, as the test loss is; and
 * the staleness of the pushes the shards applied. */
#include <stdio.h>
#include <string.h>

#include "train_int.h"

void ct_scores_add(ct_scores *s, const proto_train_epoch_reply *r)
{
    for (size_t i = 0; i < r->n_metrics && i < FERRY_MODEL_METRICS_MAX; i++) {
        if (i >= s->n) {
            snprintf(s->name[i], sizeof s->name[i], "%s", r->metrics[i].name);
            s->sum[i] = 0;
            s->n = i + 1;
        }
        s->sum[i] += r->metrics[i].value * (double)r->eval_samples;
    }
    s->samples += r->eval_samples;
}

void ct_scores_mean(const ct_scores *s, cluster_train_epoch *e)
{
    for (size_t i = 0; i < s->n; i++)
        e->metrics[i] = (cluster_train_metric){
            .name = s->name[i], .value = s->samples ? s->sum[i] / (double)s->samples : 0};
    e->n_metrics = s->n;
}

void ct_staleness(const ct_run *run, uint64_t *min, uint64_t *median, uint64_t *max)
{
    uint64_t total = 0;
    for (size_t b = 0; b < run->buckets; b++)
        total += run->staleness[b];
    *min = *median = *max = 0;
    bool first = true;
    uint64_t seen = 0;
    bool med = false;
    for (size_t b = 0; b < run->buckets; b++) {
        if (!run->staleness[b])
            continue;
        if (first)
            *min = b;
        first = false;
        seen += run->staleness[b];
        if (!med && 2 * seen >= total) {
            *median = b;
            med = true;
        }
        *max = b;
    }
}

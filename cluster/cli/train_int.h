/* `ferry submit`'s training, shared between train.c (the run: begin,
 * epochs, end) and train_async.c (async mode's epochs, which outlive a
 * lost worker). */
#ifndef FERRY_CLI_TRAIN_INT_H
#define FERRY_CLI_TRAIN_INT_H

#include <stdio.h>

#include "cli.h"
#include "ferry.pb-c.h"
#include <ferry/model.h>

/* Packs `msg` into `b` (malloc'ed). */
int cli_pack(const ProtobufCMessage *msg, ferry_bytes_t *b);

/* ---- what an epoch is judged by (train_scores.c) ---------------------------- */

/* "  test_accuracy A" for a classifier, then "  NAME V" for each of the
 * model's own metrics: the progress line's scores. */
void cli_scores_print(FILE *f, const cli_train_opts *o, const Ferry__TrainEpochReply *r);
/* ,"metrics":{"NAME":V,...} for --json. */
void cli_scores_json(FILE *f, const Ferry__TrainEpochReply *r);

/* Async mode's metrics, averaged over the ranks by their test samples. */
typedef struct cli_scores {
    size_t n;
    char name[FERRY_MODEL_METRICS_MAX][32];
    double sum[FERRY_MODEL_METRICS_MAX];
    uint64_t samples;
    Ferry__ModelMetric metric[FERRY_MODEL_METRICS_MAX];
    Ferry__ModelMetric *ptr[FERRY_MODEL_METRICS_MAX];
} cli_scores;
/* Adds rank r's figures, weighted by its test samples. */
void cli_scores_add(cli_scores *s, const Ferry__TrainEpochReply *r);
/* Points sum's metrics at the means (storage in `s`, which must outlive it). */
void cli_scores_mean(cli_scores *s, Ferry__TrainEpochReply *sum);

/* What the epochs of an async run added up to, and who is still in it. */
typedef struct cli_async_run {
    uint64_t session;
    int world;         /* ranks the session began with */
    int shards;        /* the parameter server's */
    bool *alive;       /* by rank */
    uint64_t *steps;   /* by rank: local steps over the run */
    int lost;          /* ranks lost so far */
    uint64_t pushes;   /* over every rank and epoch */
    uint64_t staleness[64]; /* merged histograms (the workers' bucket count at most) */
    size_t buckets;
    cli_scores scores; /* the last epoch's */
} cli_async_run;

/* One async epoch on every live rank. Each rank's figures are its own, so
 * they are added up here into *sum (losses and accuracy weighted by each
 * rank's samples; samples/s over the slowest rank's time). A lost rank
 * that held no shard leaves the run, which goes on; one that held a shard
 * ends it, the message naming the shard. Prints the progress line. */
int cli_async_epoch(cluster *cl, const cluster_module *m, const char *module,
                    const cli_train_opts *o, int e, cli_async_run *run, FILE *progress,
                    Ferry__TrainEpochReply *sum);

/* "min/median/max" of the merged staleness histogram into buf. */
void cli_async_staleness(const cli_async_run *run, uint64_t *min, uint64_t *median,
                         uint64_t *max);

#endif

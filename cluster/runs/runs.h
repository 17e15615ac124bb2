/* cluster/runs — a record of every training run, kept under
 * $FERRY_HOME/runs/<id>/ after the cluster is shut down:
 *
 *   run.json       what ran: module, task, every option of the training
 *                  spec by its flag, the submitting process and the time
 *   metrics.jsonl  one JSON object a line, written as the run goes:
 *                  {"event":"started", mode, workers, device, params, data},
 *                  one {"event":"epoch", ...} an epoch (epoch, step,
 *                  wall_s, train_loss, test_loss, test_accuracy, samples,
 *                  samples_per_s, lr, allreduce_share or the staleness,
 *                  the model's own figures), then {"event":"end", status
 *                  "finished" or "failed", why}
 *
 * Other tools read them as they are (jq, pandas.read_json(lines=True));
 * `ferry runs` lists them and `ferry plot` draws them. A run whose record
 * has no end is "running" while its submitter lives, else "interrupted". */
#ifndef FERRY_CLUSTER_RUNS_H
#define FERRY_CLUSTER_RUNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/train/train.h"

#define RUNS_ID_MAX 96

/* ---- record.c: writing a run's record as it goes -------------------------- */

typedef struct runs_log runs_log;

/* Creates the run's directory under `home_dir`/runs and writes run.json.
 * Returns 0, or FERRY_E* with `err` saying why (the run itself may go on
 * without a record: the caller says so). */
int runs_open(const char *home_dir, const char *module, const char *task,
              const cluster_train_opts *o, runs_log **out, char *err, size_t errlen);
const char *runs_id(const runs_log *l);
const char *runs_dir(const runs_log *l);
void runs_started(runs_log *l, const cluster_train_started *s);
void runs_epoch(runs_log *l, const cluster_train_epoch *e);
/* Writes the end (rc 0: finished; else failed, `why`) and frees `l`. */
void runs_close(runs_log *l, int rc, const char *why);

/* ---- read.c: a run's record read back --------------------------------------- */

/* One epoch of a run. test_accuracy is NaN for a regressor. */
typedef struct runs_point {
    unsigned epoch;
    uint64_t step;
    double wall_s, train_loss, test_loss, test_accuracy, samples_per_s;
} runs_point;

/* The training loss through the epochs (single and sync mode), from each
 * epoch's "loss_curve": a point every few steps, its time interpolated in
 * the epoch's training time. */
typedef struct runs_step {
    uint64_t step;
    double wall_s, loss;
} runs_step;

typedef struct runs_run {
    char id[RUNS_ID_MAX];
    char *module, *task, *mode, *device;
    int workers;
    long epochs;        /* asked for */
    double began;       /* seconds since the epoch */
    const char *status; /* "finished", "failed", "running" or "interrupted" */
    char *why;          /* a failed run's reason, or NULL */
    size_t n;
    runs_point *points;
    size_t n_steps;
    runs_step *steps;
} runs_run;

/* Reads the run in directory `dir` (whose last component is its id). A
 * record that is not what record.c writes (a line that is not a JSON
 * object, an event without its figures) is refused: FERRY_ECORRUPT with
 * `err` naming the file, the line and what is wrong; FERRY_ENOENT when the
 * directory holds no run. */
int runs_load(const char *dir, runs_run *out, char *err, size_t errlen);
void runs_run_fini(runs_run *r);

/* The ids under `home_dir`/runs, oldest first (ids sort by time): *ids
 * malloc'd, freed with runs_ids_free(). Returns 0 (none: *n 0) or
 * FERRY_ENOMEM. */
int runs_ids(const char *home_dir, char ***ids, size_t *n);
void runs_ids_free(char **ids, size_t n);

/* Which run `name` means: an id, the unique id it begins, "last" (the
 * newest), or a run's directory. Into `dir`; returns 0, or FERRY_ENOENT /
 * FERRY_EINVAL (ambiguous) with `err` saying so. */
int runs_find(const char *home_dir, const char *name, char *dir, size_t len, char *err,
              size_t errlen);

#endif

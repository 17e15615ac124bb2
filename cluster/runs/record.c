/* A run's record, written as the run goes: run.json once, then a line of
 * metrics.jsonl an event, each flushed as it is written, so that a run
 * killed halfway leaves every epoch it finished readable. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "base/base.h"
#include "runs.h"

struct runs_log {
    FILE *metrics;
    double t0_ms; /* monotonic, for wall_s */
    long batch;   /* the global batch, for the step count */
    bool classifier;
    uint64_t step;
    char id[RUNS_ID_MAX];
    char dir[4096];
};

static json_t *j_long(long v)
{
    return json_integer((json_int_t)v);
}

static json_t *j_u64(uint64_t v)
{
    return json_integer((json_int_t)v);
}

static json_t *j_text(const char *v)
{
    return v ? json_string(v) : json_null();
}

/* The spec's options as {"flag": value}: every row, default or not, so a
 * record says what ran without knowing this version's defaults. */
static json_t *spec_json(const proto_train_spec *s)
{
    json_t *o = json_object();
#define RUNS_VALUE(v)                                                                    \
    _Generic((v), long: j_long, uint64_t: j_u64, double: json_real, const char *: j_text, \
             char *: j_text)(v)
#define RUNS_OPTION(field, letter, flag, ...)                                            \
    json_object_set_new(o, flag, RUNS_VALUE(s->field));
    PROTO_TRAIN_SPEC(RUNS_OPTION)
#undef RUNS_OPTION
#undef RUNS_VALUE
    return o;
}

/* "20261128-023011-mlp-5f3a": sorts by time; the pid and the clock's
 * nanoseconds keep two runs of one second apart. */
static void make_id(char *id, size_t len, const char *task)
{
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char when[32];
    strftime(when, sizeof when, "%Y%m%d-%H%M%S", &tm);
    char name[40];
    size_t k = 0;
    for (const char *p = task && *task ? task : "run"; *p && k + 1 < sizeof name; p++)
        name[k++] = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                            (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'
                        ? *p
                        : '_';
    name[k] = '\0';
    unsigned tag = (unsigned)(base_wall_ns() ^ ((uint64_t)getpid() << 16)) & 0xffffu;
    snprintf(id, len, "%s-%s-%04x", when, name, tag);
}

static int make_dirs(const char *home_dir, runs_log *l, char *err, size_t errlen)
{
    char runs[4096];
    snprintf(runs, sizeof runs, "%s/runs", home_dir);
    if (mkdir(runs, 0700) != 0 && errno != EEXIST)
        return base_errf(err, errlen, FERRY_EIO, "cannot make %s: %s", runs,
                         strerror(errno));
    for (int tries = 0; tries < 8; tries++) {
        if ((size_t)snprintf(l->dir, sizeof l->dir, "%s/%s", runs, l->id) >=
            sizeof l->dir)
            return base_errf(err, errlen, FERRY_EINVAL, "%s: path too long", runs);
        if (mkdir(l->dir, 0700) == 0)
            return 0;
        if (errno != EEXIST)
            break;
        size_t n = strlen(l->id); /* taken this second: another tag */
        snprintf(l->id + n - 4, 5, "%04x", (unsigned)(base_wall_ns() >> 8) & 0xffffu);
    }
    return base_errf(err, errlen, FERRY_EIO, "cannot make %s: %s", l->dir,
                     strerror(errno));
}

static int write_run_json(runs_log *l, const char *module, const char *task,
                          const proto_train_spec *spec, char *err, size_t errlen)
{
    json_t *run = json_pack("{s:s, s:s?, s:s?, s:o, s:I, s:f}", "id", l->id, "module",
                            module, "task", task, "options", spec_json(spec), "pid",
                            (json_int_t)getpid(), "began", (double)base_wall_ms() / 1e3);
    char *text = run ? json_dumps(run, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(run);
    if (!text)
        return base_errf(err, errlen, FERRY_ENOMEM, "no memory for the run's record");
    char path[4200];
    snprintf(path, sizeof path, "%s/run.json", l->dir);
    size_t len = strlen(text);
    text[len] = '\n'; /* json_dumps's terminator becomes the line's end */
    int rc = base_write_atomic(path, text, len + 1, false);
    free(text);
    if (rc)
        return base_errf(err, errlen, FERRY_EIO, "cannot write %s: %s", path,
                         strerror(-rc));
    return 0;
}

int runs_open(const char *home_dir, const char *module, const char *task,
              const cluster_train_opts *o, runs_log **out, char *err, size_t errlen)
{
    const proto_train_spec *spec = &o->spec;
    *out = NULL;
    runs_log *l = calloc(1, sizeof *l);
    if (!l)
        return base_errf(err, errlen, FERRY_ENOMEM, "no memory for the run's record");
    l->t0_ms = base_mono_ms();
    l->batch = spec->batch > 0 ? spec->batch : PROTO_TRAIN_WORKER_BATCH;
    l->classifier = o->classifier;
    make_id(l->id, sizeof l->id, task);
    int rc = make_dirs(home_dir, l, err, errlen);
    if (rc == 0)
        rc = write_run_json(l, module, task, spec, err, errlen);
    if (rc == 0) {
        char path[4200];
        snprintf(path, sizeof path, "%s/metrics.jsonl", l->dir);
        if (!(l->metrics = fopen(path, "w")))
            rc = base_errf(err, errlen, FERRY_EIO, "cannot write %s: %s", path,
                           strerror(errno));
    }
    if (rc) {
        free(l);
        return rc;
    }
    *out = l;
    return 0;
}

const char *runs_id(const runs_log *l)
{
    return l->id;
}

const char *runs_dir(const runs_log *l)
{
    return l->dir;
}

/* One event a line, flushed: a reader (or a killed run) sees whole lines. */
static void emit(runs_log *l, json_t *event)
{
    if (!event)
        return;
    json_object_set_new(event, "wall_s", json_real((base_mono_ms() - l->t0_ms) / 1e3));
    char *text =
        json_dumps(event, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(event);
    if (!text)
        return;
    fprintf(l->metrics, "%s\n", text);
    fflush(l->metrics);
    free(text);
}

/* A figure that is not a number (a regressor's accuracy) is null in JSON,
 * which has no NaN. */
static json_t *number(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

void runs_started(runs_log *l, const cluster_train_started *s)
{
    if (!l)
        return;
    emit(l,
         json_pack("{s:s, s:s?, s:i, s:s?, s:I, s:I, s:I, s:s?}", "event", "started",
                   "mode", s->mode, "workers", s->workers, "device", s->device, "params",
                   (json_int_t)s->params, "train_samples", (json_int_t)s->train_samples,
                   "test_samples", (json_int_t)s->test_samples, "data", s->data));
}

void runs_epoch(runs_log *l, const cluster_train_epoch *e)
{
    if (!l)
        return;
    l->step += (e->samples + (uint64_t)l->batch - 1) / (uint64_t)l->batch;
    json_t *ev =
        json_pack("{s:s, s:i, s:I, s:o, s:o, s:o, s:I, s:o, s:f, s:f}", "event", "epoch",
                  "epoch", (int)e->epoch, "step", (json_int_t)l->step, "train_loss",
                  number(e->train_loss), "test_loss", number(e->test_loss),
                  "test_accuracy", number(l->classifier ? e->test_accuracy : NAN),
                  "samples", (json_int_t)e->samples, "samples_per_s",
                  number(e->samples_per_s), "train_s", e->train_s, "eval_s", e->eval_s);
    if (!ev)
        return;
    if (e->allreduce_s > 0 && e->train_s > 0)
        json_object_set_new(ev, "allreduce_share",
                            json_real(e->allreduce_s / e->train_s));
    if (e->pushes)
        json_object_set_new(ev, "staleness",
                            json_pack("{s:I, s:I, s:I}", "min",
                                      (json_int_t)e->staleness_min, "median",
                                      (json_int_t)e->staleness_median, "max",
                                      (json_int_t)e->staleness_max));
    for (size_t i = 0; i < e->n_metrics; i++)
        json_object_set_new(ev, e->metrics[i].name, number(e->metrics[i].value));
    if (e->n_loss_curve) {
        json_t *loss = json_array();
        for (size_t i = 0; i < e->n_loss_curve; i++)
            json_array_append_new(loss, number(e->loss_curve[i]));
        json_t *curve =
            json_pack("{s:i, s:o}", "every", (int)e->loss_curve_every, "loss", loss);
        if (e->lr_curve && curve) {
            json_t *lr = json_array();
            for (size_t i = 0; i < e->n_loss_curve; i++)
                json_array_append_new(lr, number(e->lr_curve[i]));
            json_object_set_new(curve, "lr", lr);
            json_object_set_new(ev, "lr", number(e->lr_curve[e->n_loss_curve - 1]));
        }
        json_object_set_new(ev, "loss_curve", curve);
    }
    emit(l, ev);
}

void runs_close(runs_log *l, int rc, const char *why)
{
    if (!l)
        return;
    emit(l, json_pack("{s:s, s:s, s:s?}", "event", "end", "status",
                      rc == 0 ? "finished" : "failed", "why", rc == 0 ? NULL : why));
    fclose(l->metrics);
    free(l);
}

/* `ferry submit MODEL.so --epochs E ...`: a training run through
 * cluster/train, told as it happens: a line before, a progress line an
 * epoch, and a summary (or, with --json, one JSON object on stdout and the
 * lines on stderr). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cluster/runs/runs.h"
#include "json.h"
#include "runtime/collective/collective.h"

/* What the callbacks print with. */
typedef struct teller {
    const cluster_train_opts *o;
    const char *task;
    FILE *progress;
    bool async;
    int workers;
    runs_log *record; /* $FERRY_HOME/runs/<id>, or NULL */
    char run_id[RUNS_ID_MAX];
    char why[512]; /* the run's first error, for its record */
    char checkpoint[4160]; /* the newest checkpoint written ("": none) */
    cli_progress *bar;     /* on a terminal, or NULL */
    int64_t started_ms;    /* wall clock: a shutdown since ends the run */
    const home_paths *h;   /* whose cluster a worker may join */
} teller;

/* "  test_accuracy A" for a classifier, then "  NAME V" for each of the
 * model's own metrics: the progress line's scores. */
static void scores_print(FILE *f, const cluster_train_opts *o,
                         const cluster_train_epoch *e)
{
    if (o->classifier)
        fprintf(f, "  test_accuracy %.4f", e->test_accuracy);
    for (size_t i = 0; i < e->n_metrics; i++)
        fprintf(f, "  %s %.4g", e->metrics[i].name, e->metrics[i].value);
}

/* ,"metrics":{"NAME":V,...} for --json. */
static void scores_json(FILE *f, const cluster_train_epoch *e)
{
    fputs(",\"metrics\":{", f);
    for (size_t i = 0; i < e->n_metrics; i++) {
        fputs(i ? "," : "", f);
        json_str(f, e->metrics[i].name);
        fprintf(f, ":%.6g", e->metrics[i].value);
    }
    fputc('}', f);
}

static void describe_optimizer(const cluster_train_opts *o, char *buf, size_t len)
{
    if (strcmp(o->optimizer, "sgd") == 0)
        snprintf(buf, len, "sgd lr %g momentum %g", o->lr, o->momentum);
    else
        snprintf(buf, len, "%s lr %g", o->optimizer, o->lr);
    if (strcmp(o->schedule, "constant") != 0)
        snprintf(buf + strlen(buf), len - strlen(buf), " (%s schedule)", o->schedule);
    if (o->weight_decay != 0)
        snprintf(buf + strlen(buf), len - strlen(buf), " weight decay %g",
                 o->weight_decay);
}

/* How runtime/collective sums a gradient among k workers. */
static const char *allreduce_kind(int k, char *text, size_t len)
{
    if (k == 2)
        return "all-reduce by exchange";
    if (rt_exchange_rounds(k) > 1) {
        snprintf(text, len, "ring all-reduce, exchange rounds up to %zu MiB",
                 RT_EX_MAX_BYTES >> 20);
        return text;
    }
    return "ring all-reduce";
}

static void on_error(void *data, const char *message)
{
    teller *t = data;
    if (!t->why[0])
        snprintf(t->why, sizeof t->why, "%s", message);
    cli_progress_hold(t->bar);
    cli_err("submit", "%s", message);
    cli_progress_release(t->bar);
}

static void on_started(void *data, const cluster_train_started *s)
{
    teller *t = data;
    const cluster_train_opts *o = t->o;
    FILE *f = t->progress;
    int k = s->workers;
    char optim[128], kind[96];
    describe_optimizer(o, optim, sizeof optim);
    t->async = strcmp(s->mode, "async") == 0;
    t->workers = k;
    runs_started(t->record, s);
    if (s->data && s->data[0])
        fprintf(f, "data: %s\n", s->data);
    if (k == 1)
        fprintf(f, "training %s on worker 0 (%s)", t->task, s->device);
    else if (t->async && o->staleness >= 0)
        fprintf(f,
                "training %s in async mode on %d workers (%s; %s, parameter server in %d "
                "shard%s, staleness bound %ld)",
                t->task, k, s->device, o->algo, s->shards, s->shards == 1 ? "" : "s",
                o->staleness);
    else if (t->async)
        fprintf(f,
                "training %s in async mode on %d workers (%s; %s, parameter server in %d "
                "shard%s, staleness unbounded)",
                t->task, k, s->device, o->algo, s->shards, s->shards == 1 ? "" : "s");
    else
        fprintf(f,
                "training %s in sync mode on %d workers (%s; %s, %u bucket%s a step%s%s)",
                t->task, k, s->device, allreduce_kind(k, kind, sizeof kind), s->buckets,
                s->buckets == 1 ? "" : "s",
                strcmp(o->grad_compression, "none") ? ", gradients as " : "",
                strcmp(o->grad_compression, "none") ? o->grad_compression : "");
    fprintf(
        f,
        ": %llu parameters, %llu training and %llu test samples, %s, batch %ld%s, seed "
        "%llu\n",
        (unsigned long long)s->params, (unsigned long long)s->train_samples,
        (unsigned long long)s->test_samples, optim, o->batch, k > 1 ? " (global)" : "",
        (unsigned long long)o->seed);
    fflush(f);
    cli_progress_begin(t->bar);
}

static void on_epoch(void *data, const cluster_train_epoch *e)
{
    teller *t = data;
    FILE *f = t->progress;
    runs_epoch(t->record, e);
    cli_progress_hold(t->bar);
    cli_progress_epoch(t->bar, e->epoch, e->samples_per_s);
    if (e->samples == 0) /* async: the checkpoint continued from had ended it */
        fprintf(f, "epoch %u/%ld  trained before the checkpoint  test_loss %.4f", e->epoch,
                t->o->epochs, e->test_loss);
    else
        fprintf(f, "epoch %u/%ld  loss %.4f  test_loss %.4f", e->epoch, t->o->epochs,
                e->train_loss, e->test_loss);
    scores_print(f, t->o, e);
    if (e->samples == 0) {
        fputc('\n', f);
    } else if (t->async) {
        fprintf(
            f,
            "  %.0f samples/s  "
            "%.2f s  pushes %llu  staleness %llu/%llu/%llu%s  waiting on the shards "
            "%.0f%%\n",
            e->samples_per_s, e->train_s + e->eval_s, (unsigned long long)e->pushes,
            (unsigned long long)e->staleness_min, (unsigned long long)e->staleness_median,
            (unsigned long long)e->staleness_max, e->staleness_saturated ? "+" : "",
            e->train_s > 0 ? 100.0 * e->ps_wait_s / (e->train_s * e->live_workers) : 0.0);
    } else {
        fprintf(f, "  %.0f samples/s  %.2f s", e->samples_per_s, e->train_s + e->eval_s);
        if (t->workers > 1)
            fprintf(f, "  all-reduce %.0f%% of a step",
                    e->train_s > 0 ? 100.0 * e->allreduce_s / e->train_s : 0.0);
        fputc('\n', f);
    }
    if (e->checkpoint && e->checkpoint[0]) {
        fprintf(f, "checkpoint written: %s\n", e->checkpoint);
        snprintf(t->checkpoint, sizeof t->checkpoint, "%s", e->checkpoint);
    }
    fflush(f);
    cli_progress_release(t->bar);
}

static void on_worker_lost(void *data, int rank, const char *target, int epoch,
                           const char *why, int left)
{
    teller *t = data;
    cli_progress_hold(t->bar);
    fprintf(
        t->progress,
        "worker %d (%s) lost in epoch %d: %s; async training goes on with %d worker%s\n",
        rank, target, epoch, why, left, left == 1 ? "" : "s");
    cli_progress_release(t->bar);
}

static void on_stall(void *data, const char *report)
{
    (void)data;
    fprintf(stderr, "ferry submit: stalled: %s\n", report);
}

static void on_worker_restarted(void *data, const cluster_train_lost *lost)
{
    teller *t = data;
    cli_say_worker_restarted(t->progress, lost);
}

static void on_worker_back(void *data, int rank, const char *target, int lost_in,
                           const char *how, bool back, int after, int restart, int max,
                           const char *from)
{
    teller *t = data;
    cli_progress_hold(t->bar);
    cli_say_worker_back(t->progress, rank, target, lost_in, how, back, after, restart,
                        max, from);
    cli_progress_release(t->bar);
}

static void on_worker_rejoined(void *data, int worker, const char *target, int epoch,
                               const char *from, int workers, bool first)
{
    teller *t = data;
    fprintf(t->progress,
            "worker %d (%s) answers%s: taken %sin after epoch %d; every rank "
            "continues from %s on %d workers\n",
            worker, target, first ? "" : " again", first ? "" : "back ", epoch, from,
            workers);
    fflush(t->progress);
}

static bool on_joined(void *data, int worker, char *target, size_t len)
{
    teller *t = data;
    return cli_joined_worker(t->h, worker, target, len);
}

static void on_worker_joined(void *data, int worker, const char *target, int epoch,
                             const char *from, int workers)
{
    teller *t = data;
    cli_say_joined(t->progress, worker, target, epoch, from, workers);
}

static void on_worker_absent(void *data, int worker, const char *target, int workers)
{
    teller *t = data;
    fprintf(t->progress,
            "worker %d (%s) does not answer: the run begins without it on %d workers "
            "(--min-workers), the global batch sliced over them, and takes it in at a "
            "checkpoint once it answers\n",
            worker, target, workers);
    fflush(t->progress);
}

static bool on_give_up(void *data)
{
    const teller *t = data;
    return cli_shutdown_since(t->started_ms);
}

/* The fields only one kind of mode has: the all-reduce's, or async mode's
 * parameter server and staleness. */
static void print_json_mode(const cluster_train_opts *o, const cluster_train_result *res)
{
    if (strcmp(res->started.mode, "async") != 0) {
        /* The all-reduce fields mean nothing in async mode, which has none. */
        printf(",\"grad_compression\":");
        json_str(stdout, o->grad_compression);
        printf(",\"buckets\":%u", res->started.buckets);
        printf(",\"allreduce_s\":%.3f,\"compute_s\":%.3f,\"allreduce_share\":%.4f",
               res->allreduce_s, res->compute_s,
               res->train_s > 0 ? res->allreduce_s / res->train_s : 0.0);
        return;
    }
    printf(",\"algo\":");
    json_str(stdout, o->algo);
    printf(",\"staleness_bound\":%ld,\"ps_shards\":%d,\"push_every\":%ld,"
           "\"pull_every\":%ld,\"pushes\":%llu,\"staleness_min\":%llu,"
           "\"staleness_median\":%llu,\"staleness_max\":%llu,\"workers_lost\":%d,"
           "\"ps_wait_s\":%.3f",
           o->staleness, res->started.shards, o->push_every ? o->push_every : 1,
           o->pull_every ? o->pull_every : 1, (unsigned long long)res->pushes,
           (unsigned long long)res->staleness_min,
           (unsigned long long)res->staleness_median,
           (unsigned long long)res->staleness_max, res->lost, res->ps_wait_s);
    printf(",\"steps_by_worker\":[");
    for (int r = 0; r < res->started.workers; r++)
        printf("%s%llu", r ? "," : "", (unsigned long long)res->steps_by_worker[r]);
    printf("]");
}

/* The ranks the run ended on: more than it began with when a worker was
 * taken in at a checkpoint (`ferry start --add`), fewer when some were
 * left out or lost. */
static int final_workers(const cluster_train_result *res)
{
    return res->last.live_workers > 0 ? res->last.live_workers : res->started.workers;
}

static void print_json(const cluster_train_opts *o, const char *module, const char *task,
                       const char *run_id, const cluster_train_result *res)
{
    const cluster_train_epoch *last = &res->last;
    printf("{\"module\":");
    json_str(stdout, module);
    printf(",\"run\":");
    json_str(stdout, run_id);
    printf(",\"task\":");
    json_str(stdout, task);
    printf(",\"device\":");
    json_str(stdout, res->started.device);
    printf(",\"precision\":");
    json_str(stdout, o->precision ? o->precision : "fp32");
    printf(",\"mode\":\"%s\",\"workers\":%d,\"workers_at_start\":%d", res->started.mode,
           final_workers(res), res->started.workers);
    printf(",\"epochs\":%ld,\"batch\":%ld,\"optimizer\":", o->epochs, o->batch);
    json_str(stdout, o->optimizer);
    printf(",\"schedule\":");
    json_str(stdout, o->schedule);
    printf(",\"lr\":%g,\"momentum\":%g,\"weight_decay\":%g,\"seed\":%llu,\"params\":%llu",
           o->lr, o->momentum, o->weight_decay, (unsigned long long)o->seed,
           (unsigned long long)res->started.params);
    printf(",\"train_loss\":%.6g,\"test_loss\":%.6g,\"test_accuracy\":%.6g",
           last->train_loss, last->test_loss, last->test_accuracy);
    scores_json(stdout, last);
    printf(",\"samples_per_s\":%.1f,\"train_s\":%.3f,\"wall_s\":%.3f",
           res->train_s > 0 ? res->samples / res->train_s : 0.0, res->train_s,
           res->wall_s);
    print_json_mode(o, res);
    printf(",\"params_identical\":%s,\"params_sha256\":",
           res->identical ? "true" : "false");
    json_str(stdout, res->params_sha256);
    printf("}\n");
}

/* Every run is recorded for `ferry runs` and `ferry plot`; one that cannot
 * be still trains, and says so. */
static void open_record(teller *t, const home_paths *h, const char *module,
                        const char *task)
{
    char err[512] = "";
    if (runs_open(h->dir, module, task, t->o, &t->record, err, sizeof err) != 0)
        fprintf(stderr, "ferry submit: this run is not recorded%s%s\n",
                err[0] ? ": " : "", err);
    else {
        snprintf(t->run_id, sizeof t->run_id, "%s", runs_id(t->record));
        fprintf(t->progress, "run %s (its record: %s)\n", t->run_id, runs_dir(t->record));
    }
}

/* Interrupted (SIGINT, SIGTERM) while checkpoints are written: where
 * they are and how to continue, said before the signal does what it does.
 * The workers see their caller gone and drop the run between two steps; a
 * checkpoint being written then is written whole or not at all. */
static char interrupted_text[8600];
static size_t interrupted_len;

static void interrupted(int sig)
{
    ssize_t w = write(STDERR_FILENO, interrupted_text, interrupted_len);
    (void)w;
    signal(sig, SIG_DFL);
    raise(sig);
}

static void say_where_on_interrupt(const char *module, const cluster_train_opts *o,
                                   bool on)
{
    if (!o->checkpoint_dir || !o->checkpoint_dir[0])
        return;
    if (!on) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        return;
    }
    char cwd[4096] = "";
    bool rel = o->checkpoint_dir[0] != '/' && getcwd(cwd, sizeof cwd);
    int n = snprintf(interrupted_text, sizeof interrupted_text,
                     "\nferry submit: interrupted; the checkpoints are in %s%s%s: `ferry "
                     "submit %s --resume %s%s%s` continues from the newest\n",
                     rel ? cwd : "", rel ? "/" : "", o->checkpoint_dir, module,
                     rel ? cwd : "", rel ? "/" : "", o->checkpoint_dir);
    interrupted_len = n > 0 && (size_t)n < sizeof interrupted_text ? (size_t)n : 0;
    struct sigaction sa = {.sa_handler = interrupted};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int cli_train(cluster *cl, const home_paths *h, const cluster_module *m,
              const char *module, const char *task, const cluster_train_opts *o)
{
    /* With --json, stdout holds the one JSON object; progress goes to stderr. */
    teller t = {.o = o,
                .task = task,
                .progress = o->json ? stderr : stdout,
                .started_ms = base_wall_ms(),
                .h = h};
    cluster_train_events ev = {.data = &t,
                               .error = on_error,
                               .started = on_started,
                               .epoch = on_epoch,
                               .worker_lost = on_worker_lost,
                               .stall = on_stall,
                               .worker_restarted = on_worker_restarted,
                               .worker_rejoined = on_worker_rejoined,
                               .worker_absent = on_worker_absent,
                               .worker_back = on_worker_back,
                               .joined = on_joined,
                               .worker_joined = on_worker_joined,
                               .give_up = on_give_up};
    params_file init;
    int rc = cli_params_init(o, &init);
    if (rc)
        return rc;
    cluster_train_opts ro = *o;
    ro.init = init.t.n ? &init.t : NULL;
    ro.with_params = o->save && o->save[0];
    open_record(&t, h, module, task);
    cluster_train_result res;
    say_where_on_interrupt(module, o, true);
    t.bar = cli_progress_create(t.progress, o->epochs);
    rc = cluster_train_run(cl, m, module, &ro, &ev, &res);
    cli_progress_destroy(t.bar);
    say_where_on_interrupt(module, o, false);
    params_file_free(&init);
    runs_close(t.record, rc, t.why[0] ? t.why : ferry_strerror(rc));
    if (rc && t.checkpoint[0])
        fprintf(stderr,
                "the last checkpoint is %s: `ferry submit %s --resume %s` continues "
                "from it\n",
                t.checkpoint, module, o->checkpoint_dir);
    if (rc)
        return rc;
    if (o->json) {
        print_json(o, module, task, t.run_id, &res);
    } else {
        int k = final_workers(&res);
        printf("done: test_loss %.4f", res.last.test_loss);
        scores_print(stdout, o, &res.last);
        printf(" after %ld epochs on %d worker%s, %.0f samples/s, %.1f s\n", o->epochs, k,
               k == 1 ? "" : "s", res.train_s > 0 ? res.samples / res.train_s : 0.0,
               res.wall_s);
    }
    rc = cli_params_save(o, task, &res);
    cluster_train_result_fini(&res);
    return rc;
}

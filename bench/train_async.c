/* bench/train --async — sync against async training with and without a
 * straggler (issue 13).
 *
 * Each run gets a fresh cluster under a private FERRY_HOME: `ferry start 4
 * --base-port 0`, the submit, `ferry shutdown`. The straggler is the last
 * worker (rank 3): from the launch of the submit to its exit, a child of
 * this process stops it with SIGSTOP for two thirds of every period and
 * continues it for the last third, so it runs at about a third of its
 * speed. A stopped worker also freezes the parameter shard it holds, so the
 * async variants run with --ps-shards 3 (shards on ranks 0 to 2, none on
 * the straggler); one more async run keeps the default, a shard on every
 * worker, to show what that costs. Time to 0.84 counts from the launch of
 * the submit to the arrival of the first epoch line at 0.84 test accuracy;
 * final accuracy is the last epoch's, every run having the same epochs. */
#include "train_async.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stats.h"
#include "train_async_duty.h"
#include "train_child.h"
#include "watch.h"

#define MAX_EPOCHS     32
#define WORKERS        4
#define STRAGGLER_RANK (WORKERS - 1)
#define BATCH          128
#define LR             "0.05"
#define MOMENTUM       "0.9"
#define SEED           "1"

/* The goal and targets. */
#define ACC_GOAL          0.84
#define TARGET_TIME_RATIO 1.5   /* sync's time to 0.84 / async's, straggler */
#define TARGET_ACC_DIFF   -0.01 /* async's accuracy - sync's, no straggler */

typedef struct variant {
    const char *name;
    const char *mode, *algo; /* algo: NULL for sync */
    int staleness;           /* -1: unbounded */
    int ps_shards;           /* 0: ferry's default, one per worker */
    bool quick;              /* run by --quick too */
} variant;

enum { V_SYNC, V_ASYNC, V_STALE2, V_EASGD, V_ASYNC4, N_VARIANTS };

static const variant variants[N_VARIANTS] = {
    [V_SYNC] = {"sync", "sync", NULL, -1, 0, true},
    [V_ASYNC] = {"async", "async", "downpour", -1, WORKERS - 1, true},
    [V_STALE2] = {"async_staleness2", "async", "downpour", 2, WORKERS - 1, false},
    [V_EASGD] = {"easgd", "async", "easgd", -1, WORKERS - 1, false},
    [V_ASYNC4] = {"async_4shards", "async", "downpour", -1, 0, false},
};

typedef struct async_run {
    const variant *v;
    bool straggler, ran;
    int epochs; /* epoch lines read */
    double acc[MAX_EPOCHS];
    double at_s[MAX_EPOCHS]; /* arrival, seconds since the submit's launch */
    double wall_s;           /* the submit's launch to its exit */
    double setup_s;          /* to its "training ..." line: connect, ship, load */
    long periods;            /* the straggler's duty cycles */
    double stopped_fraction;
    char json[8192]; /* the submit's --json object */
    char skipped[256];
} async_run;

/* Seconds from launch to the first epoch line at ACC_GOAL; NaN if none. */
static double time_to_goal(const async_run *r)
{
    for (int e = 0; e < r->epochs; e++)
        if (r->acc[e] >= ACC_GOAL)
            return r->at_s[e];
    return NAN;
}

static double final_accuracy(const async_run *r)
{
    double a = bench_json_number(r->json, "test_accuracy");
    return !isnan(a) ? a : r->epochs ? r->acc[r->epochs - 1] : NAN;
}

/* ---- one run ---------------------------------------------------------------------- */

/* The submit's lines: progress on stderr ("epoch 2/3  loss ... test_accuracy
 * 0.8512 ..."), its JSON object on stdout. */
static void submit_line(void *arg, int stream, char *line, double t_s)
{
    async_run *r = arg;
    if (stream == 1 && line[0] == '{') {
        snprintf(r->json, sizeof r->json, "%s", line);
        return;
    }
    if (line[0])
        bench_log("  %s%s | %s", r->v->name, r->straggler ? "+straggler" : "", line);
    if (stream == 2 && isnan(r->setup_s) && strncmp(line, "training ", 9) == 0)
        r->setup_s = t_s;
    unsigned epoch;
    const char *acc = strstr(line, "test_accuracy ");
    if (stream != 2 || sscanf(line, "epoch %u/", &epoch) != 1 || !acc || epoch < 1 ||
        epoch > MAX_EPOCHS)
        return;
    r->acc[epoch - 1] = strtod(acc + strlen("test_accuracy "), NULL);
    r->at_s[epoch - 1] = t_s;
    if ((int)epoch > r->epochs)
        r->epochs = (int)epoch;
}

/* The straggler's pid, from the file its supervisor wrote; 0 if none. */
static pid_t read_worker_pid(const char *home, int rank)
{
    char path[256];
    snprintf(path, sizeof path, "%s/workers/%d/pid", home, rank);
    FILE *f = fopen(path, "r");
    long pid = 0;
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    return pid > 0 && kill((pid_t)pid, 0) == 0 ? (pid_t)pid : 0;
}

/* Whether `pid`'s command line holds `what`: a pid file's number is ours. */
static bool cmdline_has(pid_t pid, const char *what)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    for (size_t i = 0; i < n; i++)
        buf[i] = buf[i] ? buf[i] : ' ';
    buf[n] = '\0';
    return strstr(buf, what) != NULL;
}

/* When `ferry shutdown` cannot run (a build replacing build/ferry under
 * us): the cluster's processes by the pids its home holds, before the home
 * goes. */
static void stop_by_pids(const char *home)
{
    char path[256];
    snprintf(path, sizeof path, "%s/supervisor.pid", home);
    FILE *f = fopen(path, "r");
    long sup = 0;
    if (f) {
        if (fscanf(f, "%ld", &sup) != 1)
            sup = 0;
        fclose(f);
    }
    if (sup > 0 && cmdline_has((pid_t)sup, "ferry start"))
        kill((pid_t)sup, SIGTERM);
    sleep(2);
    for (int rank = 0; rank < WORKERS; rank++) {
        pid_t w = read_worker_pid(home, rank);
        if (w && cmdline_has(w, home)) {
            kill(w, SIGCONT);
            kill(w, SIGKILL);
        }
    }
    bench_log("ferry shutdown failed: the cluster under %s stopped by its pids", home);
}

static void run_one(const bench_async_cfg *c, async_run *r)
{
    const variant *v = r->v;
    r->ran = true;
    char home[] = "/tmp/ferry-bench-async-XXXXXX";
    if (!mkdtemp(home)) {
        snprintf(r->skipped, sizeof r->skipped, "mkdtemp: %s", strerror(errno));
        return;
    }
    char env_home[64], ks[16], es[16], bs[16], ss[16], ps[16];
    snprintf(env_home, sizeof env_home, "FERRY_HOME=%s", home);
    snprintf(ks, sizeof ks, "%d", WORKERS);
    snprintf(es, sizeof es, "%d", c->epochs);
    snprintf(bs, sizeof bs, "%d", BATCH);
    snprintf(ss, sizeof ss, "%d", v->staleness);
    snprintf(ps, sizeof ps, "%d", v->ps_shards);
    /* One BLAS thread a worker: the workers inherit it from `ferry start`. */
    const char *env[] = {env_home, "OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1", NULL};
    char *stop[] = {(char *)c->ferry, "shutdown", "--grace-ms", "2000", NULL};
    /* A signal to the bench stops this cluster too. */
    char *stop_env[] = {env_home, "PATH=/usr/bin:/bin", NULL};
    bench_duty_on_signal(stop, stop_env, home);

    char *start[] = {(char *)c->ferry, "start", ks,  "--base-port", "0",
                     "--device",       "cpu",   NULL};
    int code = bench_watch(start, env, 0, 60, NULL, NULL);
    if (code != 0) {
        snprintf(r->skipped, sizeof r->skipped, "ferry start %d exited %d", WORKERS,
                 code);
        goto shutdown;
    }
    pid_t slow = 0;
    if (r->straggler && !(slow = read_worker_pid(home, STRAGGLER_RANK))) {
        snprintf(r->skipped, sizeof r->skipped, "no live pid in %s/workers/%d/pid", home,
                 STRAGGLER_RANK);
        goto shutdown;
    }

    char *argv[32] = {(char *)c->ferry,
                      "submit",
                      (char *)c->mlp_so,
                      "--mode",
                      (char *)v->mode,
                      "--workers",
                      ks,
                      "--epochs",
                      es,
                      "--batch",
                      bs,
                      "--optimizer",
                      "sgd",
                      "--lr",
                      LR,
                      "--momentum",
                      MOMENTUM,
                      "--seed",
                      SEED,
                      "--json"};
    int n = 20;
    if (v->algo)
        argv[n++] = "--algo", argv[n++] = (char *)v->algo;
    if (v->staleness >= 0)
        argv[n++] = "--staleness", argv[n++] = ss;
    if (v->ps_shards > 0)
        argv[n++] = "--ps-shards", argv[n++] = ps;
    argv[n] = NULL;
    bench_log("ferry: submit --mode %s%s%s%s%s%s%s --workers %d --epochs %d%s", v->mode,
              v->algo ? " --algo " : "", v->algo ? v->algo : "",
              v->staleness >= 0 ? " --staleness " : "", v->staleness >= 0 ? ss : "",
              v->ps_shards > 0 ? " --ps-shards " : "", v->ps_shards > 0 ? ps : "",
              WORKERS, c->epochs, r->straggler ? ", rank 3 a straggler" : "");
    int stop_ms = (c->period_ms * 2 + 1) / 3;
    if (slow && bench_duty_start(slow, stop_ms, c->period_ms - stop_ms) != 0) {
        snprintf(r->skipped, sizeof r->skipped, "cannot fork the duty cycle: %s",
                 strerror(errno));
        goto shutdown;
    }
    uint64_t t0 = bench_now_ns();
    code = bench_watch(argv, env, BENCH_WATCH_OUT | BENCH_WATCH_ERR,
                       60 + 90 * c->epochs * (r->straggler ? 3 : 1), submit_line, r);
    r->wall_s = (double)(bench_now_ns() - t0) / 1e9;
    if (slow) {
        r->periods = bench_duty_stop();
        r->stopped_fraction = bench_duty_stopped_fraction();
    }
    if (code != 0 || r->epochs != c->epochs || !r->json[0])
        snprintf(r->skipped, sizeof r->skipped,
                 "ferry submit --mode %s %s %d after %d of %d epochs%s", v->mode,
                 code == 124 ? "timed out, status" : "exited", code, r->epochs, c->epochs,
                 r->json[0] ? "" : ", no JSON");
shutdown:
    bench_duty_stop(); /* a no-op unless a step above failed mid-way */
    if (bench_watch(stop, env, 0, 30, NULL, NULL) != 0) {
        sleep(1);
        if (bench_watch(stop, env, 0, 30, NULL, NULL) != 0)
            stop_by_pids(home);
    }
    bench_duty_on_signal(NULL, NULL, NULL);
    bench_remove_tree(home);
}

/* ---- the lines -------------------------------------------------------------------- */

/* Appends to a line of JSON members. */
static void add(char *p, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void add(char *p, size_t len, const char *fmt, ...)
{
    size_t at = strlen(p);
    if (at + 1 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p + at, len - at, fmt, ap);
    va_end(ap);
}

/* x as a JSON number with `prec` decimals, or null. */
static const char *num(char *buf, size_t len, double x, int prec)
{
    if (!isfinite(x))
        snprintf(buf, len, "null");
    else
        snprintf(buf, len, "%.*f", prec, x);
    return buf;
}
#define NUM(x, prec) num((char[32]){0}, 32, (x), (prec))

/* What every line of a run says about it. */
static void params(char *p, size_t len, const bench_async_cfg *c, const async_run *r)
{
    const variant *v = r->v;
    p[0] = '\0';
    add(p, len, "\"impl\":\"ferry\",\"model\":\"mlp\",\"variant\":\"%s\",\"mode\":\"%s\"",
        v->name, v->mode);
    if (v->algo)
        add(p, len, ",\"algo\":\"%s\"", v->algo);
    else
        add(p, len, ",\"algo\":null");
    /* What the run's JSON says it ran, else what was asked. */
    double shards = bench_json_number(r->json, "ps_shards");
    if (isnan(shards) && v->algo)
        shards = v->ps_shards ? v->ps_shards : WORKERS;
    add(p, len, ",\"staleness_bound\":%s,\"ps_shards\":%s,\"workers\":%d,\"batch\":%d",
        v->staleness >= 0 ? NUM(v->staleness, 0) : "null", NUM(shards, 0), WORKERS,
        BATCH);
    add(p, len, ",\"epochs\":%d,\"straggler\":%s", c->epochs,
        r->straggler ? "true" : "false");
    if (r->straggler)
        add(p, len,
            ",\"straggler_rank\":%d,\"period_ms\":%d,\"stopped_share\":%s,"
            "\"duty_periods\":%ld",
            STRAGGLER_RANK, c->period_ms, NUM(r->stopped_fraction, 3), r->periods);
}

static void emit_run(const bench_async_cfg *c, const async_run *r)
{
    char p[4096];
    params(p, sizeof p, c, r);
    double goal = time_to_goal(r), acc = final_accuracy(r);
    add(p, sizeof p, ",\"t_to_084_s\":%s,\"final_accuracy\":%s,\"wall_s\":%s",
        NUM(goal, 3), NUM(acc, 4), NUM(r->wall_s, 3));
    /* The part of both that is the same for every variant, for the record. */
    add(p, sizeof p, ",\"setup_s\":%s,\"setup_is\":\"launch to the training line\"",
        NUM(r->setup_s, 3));
    add(p, sizeof p, ",\"samples_per_s\":%s,\"train_s\":%s",
        NUM(bench_json_number(r->json, "samples_per_s"), 1),
        NUM(bench_json_number(r->json, "train_s"), 3));
    add(p, sizeof p, ",\"pushes\":%s,\"staleness_median\":%s,\"staleness_max\":%s",
        NUM(bench_json_number(r->json, "pushes"), 0),
        NUM(bench_json_number(r->json, "staleness_median"), 0),
        NUM(bench_json_number(r->json, "staleness_max"), 0));
    add(p, sizeof p, ",\"workers_lost\":%s",
        NUM(bench_json_number(r->json, "workers_lost"), 0));
    /* Async: how many steps each rank took (the straggler's few). */
    const char *steps = strstr(r->json, "\"steps_by_worker\":[");
    const char *end = steps ? strchr(steps, ']') : NULL;
    if (end)
        add(p, sizeof p, ",%.*s", (int)(end + 1 - steps), steps);
    add(p, sizeof p, ",\"epoch_test_accuracy\":[");
    for (int e = 0; e < r->epochs; e++)
        add(p, sizeof p, "%s%.4f", e ? "," : "", r->acc[e]);
    add(p, sizeof p, "],\"epoch_at_s\":[");
    for (int e = 0; e < r->epochs; e++)
        add(p, sizeof p, "%s%.3f", e ? "," : "", r->at_s[e]);
    add(p, sizeof p, "],\"from\":\"launch of the submit\"");
    if (r->skipped[0])
        add(p, sizeof p, ",\"skipped\":\"%s\"", r->skipped);
    bench_emit("final_accuracy", acc, "fraction", NULL, "%s", p);
    bench_log(
        "%s%s: 0.84 at %s s, accuracy %.4f after %d epochs, %.2f s, %.0f samples/s, "
        "staleness max %s, pushes %s%s%s",
        r->v->name, r->straggler ? " +straggler" : "", NUM(goal, 2), acc, r->epochs,
        r->wall_s, bench_json_number(r->json, "samples_per_s"),
        NUM(bench_json_number(r->json, "staleness_max"), 0),
        NUM(bench_json_number(r->json, "pushes"), 0), r->skipped[0] ? "; " : "",
        r->skipped);
}

static int missed;
static bool quick;

/* One target line ("value", "target", "met"), and its members for the
 * summary line in `sum`. A value that cannot be had is null and not met;
 * `bound` (NaN: none) is a lower bound on it that may still meet it. */
static void target(char *sum, size_t len, const char *metric, double value, double bound,
                   double goal, const char *why)
{
    bool met = isfinite(value) ? value >= goal : isfinite(bound) && bound >= goal;
    missed += !met;
    char p[512] = "";
    add(p, sizeof p, "\"target\":%g,\"met\":%s", goal, met ? "true" : "false");
    if (isfinite(bound))
        add(p, sizeof p, ",\"lower_bound\":%s", NUM(bound, 3));
    if (!isfinite(value) && why)
        add(p, sizeof p, ",\"why\":\"%s\"", why);
    if (quick)
        add(p, sizeof p, ",\"note\":\"--quick: a smoke run of 1 epoch\"");
    bench_emit(metric, value, "ratio", NULL, "%s", p);
    add(sum, len, "%s\"%s\":{\"value\":%s,%s}", sum[0] ? "," : "", metric, NUM(value, 4),
        p);
    bench_log("%-42s %s (target %g) %s", metric, NUM(value, 3), goal,
              met ? "met" : "MISSED");
}

int bench_train_async(const bench_async_cfg *c)
{
    static async_run run[N_VARIANTS][2]; /* [variant][straggler] */
    missed = 0;
    quick = c->quick;
    bench_duty_install();
    /* Each variant without and then with the straggler, so that a machine
     * that speeds up or slows down during the bench moves both sides. */
    for (int i = 0; i < N_VARIANTS; i++) {
        for (int s = 0; s < 2; s++) {
            async_run *r = &run[i][s];
            *r = (async_run){.v = &variants[i], .straggler = s, .setup_s = NAN};
            if (c->quick && !variants[i].quick)
                continue;
            if (i == V_ASYNC4 && !s && c->quick)
                continue;
            run_one(c, r);
            emit_run(c, r);
        }
    }

    const async_run *sync_s = &run[V_SYNC][1], *async_s = &run[V_ASYNC][1];
    const async_run *sync_n = &run[V_SYNC][0], *async_n = &run[V_ASYNC][0];
    char sum[2048] = "";
    double ts = time_to_goal(sync_s), ta = time_to_goal(async_s);
    /* Sync never at 0.84: it would have got there after its end, if at all. */
    double bound = isnan(ts) && !sync_s->skipped[0] ? sync_s->wall_s / ta : NAN;
    target(sum, sizeof sum, "async_vs_sync_time_to_084_straggler", ts / ta, bound,
           TARGET_TIME_RATIO,
           sync_s->skipped[0] || async_s->skipped[0] ? "a run failed"
           : isnan(ta)                               ? "async did not reach 0.84"
                                                     : "sync did not reach 0.84");
    target(sum, sizeof sum, "async_minus_sync_accuracy_no_straggler",
           sync_n->skipped[0] || async_n->skipped[0]
               ? NAN
               : final_accuracy(async_n) - final_accuracy(sync_n),
           NAN, TARGET_ACC_DIFF, "a run failed");
    /* Throughput with the straggler, for the record (no target). */
    add(sum, sizeof sum, ",\"async_vs_sync_samples_per_s_straggler\":%s",
        NUM(bench_json_number(async_s->json, "samples_per_s") /
                bench_json_number(sync_s->json, "samples_per_s"),
            3));
    /* The other variants against sync, for the record. */
    add(sum, sizeof sum, ",\"vs_sync_time_to_084\":{");
    bool first = true;
    for (int i = V_ASYNC; i < N_VARIANTS; i++)
        for (int s = 0; s < 2; s++) {
            const async_run *r = &run[i][s];
            if (!r->ran)
                continue;
            add(sum, sizeof sum, "%s\"%s%s\":%s", first ? "" : ",", r->v->name,
                s ? "_straggler" : "",
                NUM(time_to_goal(&run[V_SYNC][s]) / time_to_goal(r), 3));
            first = false;
        }
    add(sum, sizeof sum, "},\"workers\":%d,\"epochs\":%d,\"period_ms\":%d,\"quick\":%s",
        WORKERS, c->epochs, c->period_ms, c->quick ? "true" : "false");
    bench_emit("async_summary", missed, "targets missed", NULL, "%s", sum);
    return missed;
}

/* bench/train --sync — `ferry submit --mode sync` against PyTorch DDP.
 *
 * Each ferry run gets a private FERRY_HOME: `ferry start K --base-port 0`,
 * the submit, `ferry shutdown`. Time to accuracy counts from the launch of
 * the submit (the workers are a running service, as a cluster is) and, on
 * its own line, from `ferry start`; DDP's counts from the launch of its
 * processes (python, torch, the data and the process group included). Both
 * are read from the arrival times of the per-epoch lines. */
#include "train_sync.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stats.h"
#include "train_child.h"
#include "watch.h"

#define MAX_EPOCHS 32
#define BATCH      128
#define LR         "0.05"
#define MOMENTUM   "0.9"
#define SEED       "1"

/* The goal and targets. */
#define ACC_GOAL             0.85
#define TARGET_SYNC2_VS_DDP2 3.0
#define TARGET_T085_VS_DDP   0.5
#define TARGET_SYNC2_VS_1    1.5
#define TARGET_SYNC4_VS_1    3.2
#define TARGET_SYNC8_VS_1    5.6
#define TARGET_SYNC_VS_DDP   1.5 /* 4 workers and more */

typedef struct sync_run {
    const char *impl; /* "ferry_sync", "ddp_gloo" */
    int workers, epochs;
    double acc[MAX_EPOCHS];  /* test accuracy after each epoch */
    double at_s[MAX_EPOCHS]; /* when its line arrived, seconds since launch */
    double samples_per_s, train_s, wall_s;
    double samples;                         /* DDP: summed from its epochs */
    double allreduce_s, compute_s, start_s; /* ferry's; NaN for DDP */
    char mode[16];
    int json_workers;
    const char *params_identical; /* "true", "false" or "null" */
    char json[8192];              /* ferry's --json object */
    char skipped[256];
} sync_run;

/* Seconds from launch to the first epoch at ACC_GOAL; NaN if none. */
static double time_to_goal(const sync_run *r)
{
    for (int e = 0; e < r->epochs; e++)
        if (r->acc[e] >= ACC_GOAL)
            return r->at_s[e];
    return NAN;
}

/* ---- ferry --------------------------------------------------------------------- */

/* The submit's lines: progress on stderr ("epoch 2/5  loss ...
 * test_accuracy 0.8512 ..."), its JSON object on stdout. */
static void ferry_line(void *arg, int stream, char *line, double t_s)
{
    sync_run *r = arg;
    if (stream == 1) {
        if (line[0] == '{')
            snprintf(r->json, sizeof r->json, "%s", line);
        else if (line[0])
            bench_log("  ferry %d | %s", r->workers, line);
        return;
    }
    bench_log("  ferry %d | %s", r->workers, line);
    unsigned epoch;
    const char *acc = strstr(line, "test_accuracy ");
    if (sscanf(line, "epoch %u/", &epoch) != 1 || !acc || epoch < 1 || epoch > MAX_EPOCHS)
        return;
    r->acc[epoch - 1] = strtod(acc + strlen("test_accuracy "), NULL);
    r->at_s[epoch - 1] = t_s;
    if ((int)epoch > r->epochs)
        r->epochs = (int)epoch;
}

static void ferry_run(const bench_sync_cfg *c, int k, sync_run *r)
{
    /* Under $TMPDIR when set: a caller that must stop what a killed run
     * left (tests/gpu/scaling.sh) finds every home there. */
    const char *tmp = getenv("TMPDIR");
    char home[128];
    snprintf(home, sizeof home, "%.80s/ferry-bench-sync-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(home)) {
        snprintf(r->skipped, sizeof r->skipped, "mkdtemp %s: %s", home, strerror(errno));
        return;
    }
    char env_home[160], ks[16], es[16], bs[16];
    snprintf(env_home, sizeof env_home, "FERRY_HOME=%s", home);
    snprintf(ks, sizeof ks, "%d", k);
    snprintf(es, sizeof es, "%d", c->epochs);
    snprintf(bs, sizeof bs, "%d", BATCH);
    /* One BLAS thread a worker: the workers inherit it from `ferry start`. */
    const char *env[] = {env_home, "OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1", NULL};

    /* Bound, as DDP's ranks are (bench/train_ddp.py). */
    char *start[] = {(char *)c->ferry, "start", ks,   "--base-port", "0", "--device",
                     "cpu",            "--bind-to", "core", NULL};
    uint64_t t0 = bench_now_ns();
    int code = bench_watch(start, env, 0, 60, NULL, NULL);
    r->start_s = (double)(bench_now_ns() - t0) / 1e9;
    if (code != 0) {
        snprintf(r->skipped, sizeof r->skipped, "ferry start %d exited %d", k, code);
        goto shutdown;
    }
    char *submit[] = {(char *)c->ferry,
                      "submit",
                      (char *)c->mlp_so,
                      "--mode",
                      "sync",
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
                      "--json",
                      NULL,
                      NULL,
                      NULL};
    if (c->data_dir) { /* into the two spare slots */
        size_t n = sizeof submit / sizeof submit[0];
        submit[n - 3] = "--data";
        submit[n - 2] = (char *)c->data_dir;
    }
    bench_log("ferry: submit --mode sync --workers %d --epochs %d", k, c->epochs);
    t0 = bench_now_ns();
    code = bench_watch(submit, env, BENCH_WATCH_OUT | BENCH_WATCH_ERR,
                       60 + 60 * c->epochs, ferry_line, r);
    r->wall_s = (double)(bench_now_ns() - t0) / 1e9;
    r->samples_per_s = bench_json_number(r->json, "samples_per_s");
    r->train_s = bench_json_number(r->json, "train_s");
    r->allreduce_s = bench_json_number(r->json, "allreduce_s");
    r->compute_s = bench_json_number(r->json, "compute_s");
    r->json_workers = (int)bench_json_number(r->json, "workers");
    bench_json_string(r->json, "mode", r->mode, sizeof r->mode);
    /* Every worker ended with the same parameters (the sync check). */
    r->params_identical = strstr(r->json, "\"params_identical\":true")    ? "true"
                          : strstr(r->json, "\"params_identical\":false") ? "false"
                                                                          : "null";
    if (code != 0 || !(r->samples_per_s > 0))
        snprintf(r->skipped, sizeof r->skipped,
                 "ferry submit --mode sync --workers %d %s %d%s", k,
                 code == 124 ? "timed out, status" : "exited", code,
                 code == 0 ? " without samples_per_s in its JSON" : "");
    else if (r->json_workers != k)
        bench_log("  ferry %d: its JSON says workers %d, mode '%s'", k, r->json_workers,
                  r->mode);
shutdown:;
    char *stop[] = {(char *)c->ferry, "shutdown", "--grace-ms", "2000", NULL};
    bench_watch(stop, env, 0, 30, NULL, NULL);
    bench_remove_tree(home);
}

/* ---- DDP ------------------------------------------------------------------------- */

static void ddp_line(void *arg, int stream, char *line, double t_s)
{
    sync_run *r = arg;
    (void)stream;
    if (line[0] != '{') {
        if (line[0])
            bench_log("  ddp %d | %s", r->workers, line);
        return;
    }
    if (strstr(line, "\"skipped\"")) {
        bench_json_string(line, "skipped", r->skipped, sizeof r->skipped);
        return;
    }
    int e = r->epochs;
    double sps = bench_json_number(line, "samples_per_s");
    if (e >= MAX_EPOCHS || !(sps > 0))
        return;
    r->acc[e] = bench_json_number(line, "test_accuracy");
    r->at_s[e] = t_s;
    r->train_s += bench_json_number(line, "train_s");
    r->samples += bench_json_number(line, "samples");
    r->epochs = e + 1;
    bench_log("  ddp %d | epoch %d  %.0f samples/s  train %.2f s  test_accuracy %.4f  at "
              "%.2f s",
              r->workers, e + 1, sps, bench_json_number(line, "train_s"), r->acc[e], t_s);
}

static void ddp_run(const bench_sync_cfg *c, int k, sync_run *r)
{
    if (!c->ddp_on) {
        snprintf(r->skipped, sizeof r->skipped, "--no-pytorch");
        return;
    }
    if (access(c->python, X_OK) != 0) {
        snprintf(r->skipped, sizeof r->skipped, "no %s: %s", c->python, strerror(errno));
        return;
    }
    char ks[16], es[16], bs[16];
    snprintf(ks, sizeof ks, "%d", k);
    snprintf(es, sizeof es, "%d", c->epochs);
    snprintf(bs, sizeof bs, "%d", BATCH);
    char *argv[] = {(char *)c->python,
                    (char *)c->ddp_script,
                    "--world",
                    ks,
                    "--epochs",
                    es,
                    "--batch",
                    bs,
                    "--lr",
                    LR,
                    "--momentum",
                    MOMENTUM,
                    "--seed",
                    SEED,
                    NULL,
                    NULL,
                    NULL};
    if (c->data_dir) {
        size_t n = sizeof argv / sizeof argv[0];
        argv[n - 3] = "--data-dir";
        argv[n - 2] = (char *)c->data_dir;
    }
    /* Debian's site-packages, not a virtual environment's or the user's. */
    const char *env[] = {"OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1", "PYTHONPATH",
                         "PYTHONHOME",        "PYTHONNOUSERSITE=1",     NULL};
    bench_log("pytorch DDP (gloo): %d processes, %d epochs", k, c->epochs);
    uint64_t t0 = bench_now_ns();
    int code = bench_watch(argv, env, BENCH_WATCH_OUT, 120 + 60 * c->epochs, ddp_line, r);
    r->wall_s = (double)(bench_now_ns() - t0) / 1e9;
    if (r->skipped[0])
        return;
    if (code != 0 || r->epochs != c->epochs)
        snprintf(r->skipped, sizeof r->skipped, "%s exited %d after %d of %d epochs",
                 c->ddp_script, code, r->epochs, c->epochs);
    else
        r->samples_per_s = r->samples / r->train_s;
}

/* ---- the lines ------------------------------------------------------------------ */

static void params(char *p, size_t len, const sync_run *r, const bench_sync_cfg *c)
{
    snprintf(
        p, len,
        "\"impl\":\"%s\",\"model\":\"mlp\",\"workers\":%d,\"batch\":%d,\"epochs\":%d,"
        "\"threads_per_worker\":1",
        r->impl, r->workers, BATCH, c->epochs);
}

static void emit_run(const sync_run *r, const bench_sync_cfg *c)
{
    char p[256];
    params(p, sizeof p, r, c);
    if (r->skipped[0]) {
        bench_emit("samples_per_s", NAN, "samples/s", NULL, "%s,\"skipped\":\"%s\"", p,
                   r->skipped);
        bench_log("%s %d: skipped: %s", r->impl, r->workers, r->skipped);
        return;
    }
    for (int e = 0; e < r->epochs; e++)
        bench_emit("epoch_test_accuracy", r->acc[e], "fraction", NULL,
                   "%s,\"epoch\":%d,\"at_s\":%.3f", p, e + 1, r->at_s[e]);
    if (r->mode[0]) /* ferry's: what its JSON says it ran */
        bench_emit("samples_per_s", r->samples_per_s, "samples/s", NULL,
                   "%s,\"over\":\"training steps of every epoch\",\"mode\":\"%s\","
                   "\"params_identical\":%s",
                   p, r->mode, r->params_identical);
    else
        bench_emit("samples_per_s", r->samples_per_s, "samples/s", NULL,
                   "%s,\"over\":\"training steps of every epoch\"", p);
    bench_emit("train_s", r->train_s, "s", NULL, "%s", p);
    bench_emit("wall_s", r->wall_s, "s", NULL, "%s,\"from\":\"launch\"", p);
    double goal = time_to_goal(r);
    bench_emit("time_to_085_s", goal, "s", NULL, "%s,\"from\":\"launch\",\"reached\":%s",
               p, isnan(goal) ? "false" : "true");
    if (!isnan(r->start_s)) {
        bench_emit("start_s", r->start_s, "s", NULL, "%s,\"what\":\"ferry start\"", p);
        bench_emit("time_to_085_s", r->start_s + goal, "s", NULL,
                   "%s,\"from\":\"ferry start\",\"reached\":%s", p,
                   isnan(goal) ? "false" : "true");
    }
    if (!isnan(r->start_s)) { /* ferry's, null when its JSON lacks them */
        bench_emit("allreduce_s", r->allreduce_s, "s", NULL, "%s", p);
        bench_emit("compute_s", r->compute_s, "s", NULL, "%s", p);
        bench_emit("allreduce_share", r->allreduce_s / r->train_s, "fraction", NULL,
                   "%s,\"of\":\"train_s\"", p);
    }
    bench_log(
        "%s %d: %.0f samples/s, train %.2f s, wall %.2f s, test accuracy %.4f after "
        "%d epochs, 0.85 at %.2f s%s",
        r->impl, r->workers, r->samples_per_s, r->train_s, r->wall_s,
        r->epochs ? r->acc[r->epochs - 1] : 0.0, r->epochs, goal,
        isnan(r->allreduce_s) ? "" : " (ferry: all-reduce share below)");
    if (!isnan(r->allreduce_s))
        bench_log("  all-reduce %.2f s of %.2f s training (%.0f%%), compute %.2f s",
                  r->allreduce_s, r->train_s, 100 * r->allreduce_s / r->train_s,
                  r->compute_s);
}

static int missed;

#define NOT_REACHED "0.85 test accuracy not reached in the epochs run"

/* One ratio line: a target line when `target` is not NaN. */
static void ratio(const char *metric, const sync_run *a, const sync_run *b, double va,
                  double vb, double target, bool is_min, const char *nan_why)
{
    char p[128];
    snprintf(p, sizeof p, "\"workers\":%d,\"vs_workers\":%d,\"vs\":\"%s\"", a->workers,
             b->workers, b->impl);
    char t[64] = "";
    if (!isnan(target))
        snprintf(t, sizeof t, ",\"%s\":%g", is_min ? "target_min" : "target_max", target);
    const char *why = a->skipped[0]            ? a->skipped
                      : b->skipped[0]          ? b->skipped
                      : isnan(va) || isnan(vb) ? nan_why
                                               : NULL;
    if (why) {
        bench_emit(metric, NAN, "ratio", NULL, "%s%s,\"skipped\":\"%s\"", p, t, why);
        bench_log("%-30s skipped: %s", metric, why);
        return;
    }
    double v = va / vb;
    bool ok = isnan(target) || (is_min ? v >= target : v <= target);
    missed += !ok;
    bench_emit(metric, v, "ratio", NULL, "%s%s", p, t);
    bench_log("%-30s %7.3f%s%s", metric, v, t[0] ? "  " : "",
              t[0] ? (ok ? "met" : "MISSED") : "");
}

/* A ratio line for a target with ferry's all-reduce taken as free: a's
 * samples over its training time less the time it waited for the
 * all-reduce. An upper bound (the ranks' compute then also shares the
 * cores with nothing that waits): below the target, no all-reduce,
 * however fast, meets it on this machine. Not itself a target. */
static void bound(const char *metric, const sync_run *a, const sync_run *b, double target)
{
    double vb = b->samples_per_s;
    double samples = a->samples_per_s * a->train_s, busy = a->train_s - a->allreduce_s;
    if (a->skipped[0] || b->skipped[0] || !(samples > 0) || !(busy > 0) || !(vb > 0))
        return;
    double v = samples / busy / vb;
    /* Within reach: what the all-reduce may cost a step to meet it, and
     * what it cost. */
    double steps = samples / BATCH;
    double budget_ms = (samples / (target * vb) - busy) / steps * 1e3;
    double cost_ms = a->allreduce_s / steps * 1e3;
    char extra[128] = "";
    if (v >= target)
        snprintf(extra, sizeof extra,
                 ",\"allreduce_budget_ms_per_step\":%.4g,\"allreduce_ms_per_step\":%.4g",
                 budget_ms, cost_ms);
    bench_emit(metric, v, "ratio", NULL,
               "\"workers\":%d,\"vs_workers\":%d,\"vs\":\"%s\",\"bound\":\"upper, the "
               "all-reduce taken as free\",\"of_target_min\":%g%s",
               a->workers, b->workers, b->impl, target, extra);
    if (v < target)
        bench_log("%-34s %7.3f  upper bound (all-reduce free): target %g out of reach here",
                  metric, v, target);
    else
        bench_log("%-34s %7.3f  upper bound (all-reduce free): target %g needs the "
                  "all-reduce at %.3f ms a step or less; it took %.3f",
                  metric, v, target, budget_ms, cost_ms);
}

/* The targets at `k` workers; NaN: none. At 2 workers, the 2-core
 * machine's (against 1 worker, DDP and DDP's time to 0.85); at 4 and 8,
 * those of workers with cores of their own: 80% and 70% of linear
 * scaling, and 1.5x DDP. */
static double target_vs_1(int k)
{
    return k == 2   ? TARGET_SYNC2_VS_1
           : k == 4 ? TARGET_SYNC4_VS_1
           : k == 8 ? TARGET_SYNC8_VS_1
                    : NAN;
}

static double target_vs_ddp(int k)
{
    return k == 2 ? TARGET_SYNC2_VS_DDP2 : k >= 4 ? TARGET_SYNC_VS_DDP : NAN;
}

/* Every ratio of `k` workers: against 1 worker (ferry's) and DDP at the
 * same count, time to 0.85 against DDP's, and the upper bounds with the
 * all-reduce free where a target is set. */
static void ratios(const sync_run *f, const sync_run *d, const sync_run *f1)
{
    char metric[64];
    int k = f->workers;
    snprintf(metric, sizeof metric, "sync%d_vs_ddp%d_samples_per_s", k, k);
    ratio(metric, f, d, f->samples_per_s, d->samples_per_s, target_vs_ddp(k), true,
          "no samples/s");
    if (f1 && k > 1) {
        snprintf(metric, sizeof metric, "sync%d_vs_sync1_samples_per_s", k);
        ratio(metric, f, f1, f->samples_per_s, f1->samples_per_s, target_vs_1(k), true,
              "no samples/s");
    }
    ratio("time_to_085_vs_ddp", f, d, time_to_goal(f), time_to_goal(d),
          k == 2 ? TARGET_T085_VS_DDP : NAN, false, NOT_REACHED);
    if (!isnan(target_vs_ddp(k))) {
        snprintf(metric, sizeof metric, "sync%d_vs_ddp%d_if_allreduce_free", k, k);
        bound(metric, f, d, target_vs_ddp(k));
    }
    if (f1 && !isnan(target_vs_1(k))) {
        snprintf(metric, sizeof metric, "sync%d_vs_sync1_if_allreduce_free", k);
        bound(metric, f, f1, target_vs_1(k));
    }
}

int bench_train_sync(const bench_sync_cfg *c)
{
    static sync_run ferry[BENCH_SYNC_MAX_COUNTS], ddp[BENCH_SYNC_MAX_COUNTS];
    missed = 0;
    /* Interleaved, so that a machine that speeds up or slows down during
     * the bench moves both sides. */
    for (int i = 0; i < c->n_workers; i++) {
        int k = c->workers[i];
        sync_run *f = &ferry[i], *d = &ddp[i];
        *f = (sync_run){.impl = "ferry_sync",
                        .workers = k,
                        .allreduce_s = NAN,
                        .compute_s = NAN,
                        .start_s = NAN};
        ferry_run(c, k, f);
        emit_run(f, c);
        *d = (sync_run){.impl = "ddp_gloo",
                        .workers = k,
                        .allreduce_s = NAN,
                        .compute_s = NAN,
                        .start_s = NAN};
        if (c->quick && !c->workers_given && k != 2)
            snprintf(d->skipped, sizeof d->skipped,
                     "--quick runs DDP on 2 processes only");
        else
            ddp_run(c, k, d);
        emit_run(d, c);
    }
    const sync_run *f1 = NULL;
    for (int i = 0; i < c->n_workers; i++)
        if (c->workers[i] == 1)
            f1 = &ferry[i];
    for (int i = 0; i < c->n_workers; i++)
        ratios(&ferry[i], &ddp[i], f1);
    return missed;
}

/* bench/train — single-worker training on Fashion-MNIST (issue 4):
 *
 *   openblas  the eight sgemm products of one MLP step at batch 128, one
 *             thread, and nothing else: the compute limit of a step
 *   ferry     tasks/mlp trained by ferry's trainer in this process on the
 *             cpu device (SGD lr 0.05, momentum 0.9, batch 128, one BLAS
 *             thread); then tasks/cnn, which may use every core
 *   pytorch   the same MLP, batch, optimizer and data in PyTorch
 *             (bench/train_torch.py under Debian's /usr/bin/python3), one
 *             thread
 *
 * then the targets as ratio lines. (With --sync, instead:
 * synchronous data parallelism against PyTorch DDP, bench/train_sync.c. With
 * --async: sync against async training with and without a straggler,
 * bench/train_async.c.)
 * The OpenBLAS limit is measured
 * before the MLP's first epoch, between its epochs, and after PyTorch's
 * run, so that a machine that speeds up or slows down during the run moves
 * both sides. JSON lines on stdout, text on stderr. */
#include <libgen.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cblas.h>

#include "stats.h"
#include "train_blas.h"
#include "train_async.h"
#include "train_gpu.h"
#include "train_nn.h"
#include "train_run.h"
#include "train_sync.h"
#include "train_timeline.h"

#define BATCH 128

#ifndef BENCH_TORCH_SCRIPT
#define BENCH_TORCH_SCRIPT "bench/train_torch.py"
#endif
#ifndef BENCH_TORCH_GPU_SCRIPT
#define BENCH_TORCH_GPU_SCRIPT "bench/train_torch_gpu.py"
#endif
#ifndef BENCH_DDP_SCRIPT
#define BENCH_DDP_SCRIPT "bench/train_ddp.py"
#endif

/* The targets (the layer list against the hand-written models,
 * 0.97 and 0.95, are train_nn.c's). */
#define TARGET_VS_PYTORCH   1.2
#define TARGET_VS_LIMIT     0.95
#define TARGET_MLP_ACCURACY 0.88
#define TARGET_CNN_ACCURACY 0.90
#define TARGET_EPOCHS       5
/* A smoke value for --quick's shorter MLP run, not the target. */
#define QUICK_MLP_ACCURACY 0.84
#define QUICK_MLP_EPOCHS   3

typedef struct bench_cfg {
    bool quick;
    int blas_reps, blas_steps;
    bench_run_opts mlp, cnn;
    bool cnn_on, torch_on, submit_on, sync, async;
    bool nn_only; /* --nn: the layer lists against the hand-written models */
    bool timeline; /* --timeline: a step's cost of recording a timeline */
    int period_ms; /* --async: the straggler's duty-cycle period */
    int epochs;    /* --epochs, 0: the default */
    int workers[BENCH_SYNC_MAX_COUNTS], n_workers; /* --workers (--sync) */
    const char *data_dir;                          /* --data (--sync) */
    const char *device; /* --device: NULL (the cpu benchmark) or "cuda[:N]" */
    const char *python, *script;
    char mlp_so[PATH_MAX], cnn_so[PATH_MAX], ferry_bin[PATH_MAX];
    char mlp_hand_so[PATH_MAX], cnn_hand_so[PATH_MAX];
} bench_cfg;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: train [--quick] [--sync | --async [--period-ms MS] | --device cuda | "
        "--nn]\n"
        "             [--timeline] [--epochs N] [--workers LIST] [--data DIR]\n"
        "             [--no-cnn] [--no-pytorch] [--python PATH] [--help]\n"
        "\n"
        "Trains ferry's tasks/mlp (784-256-128-10) on Fashion-MNIST in this process\n"
        "with the runtime's trainer on the cpu device (batch 128, SGD lr 0.05\n"
        "momentum 0.9, one BLAS thread), the same MLP in PyTorch (one thread), and\n"
        "tasks/cnn (every core); times the eight sgemm products of one MLP step\n"
        "with OpenBLAS alone as the compute limit; and prints one JSON object per\n"
        "line on stdout: samples/s (training steps only) and seconds per epoch as\n"
        "medians over epochs with min/max, test accuracy after each epoch, then\n"
        "its targets as ratio lines, last; then the layer-list mlp and cnn of tasks/\n"
        "against the hand-written ones (bench/mlp_hand.so, cnn_hand.so), an epoch of\n"
        "each in turn. Progress goes to stderr.\n"
        "\n"
        "  --quick       3 MLP epochs, a CNN epoch on 2,000 samples, fewer sgemm\n"
        "                repetitions: a smoke run of well under a minute; accuracy\n"
        "                targets hold only for a full run\n"
        "  --sync        instead: synchronous data parallelism, `ferry submit\n"
        "                tasks/mlp.so --mode sync` on 1, 2 and 4 local workers (bound,\n"
        "                `ferry start N --bind-to core`) against PyTorch DDP (gloo) on\n"
        "                as many processes, bound alike, one BLAS thread a worker:\n"
        "                samples/s, time to 0.85 test accuracy, the all-reduce share\n"
        "                of training, N workers against 1 and against DDP (with\n"
        "                --quick: 2 epochs, DDP on 2 processes only)\n"
        "  --workers LIST  --sync's worker counts, comma-separated, ascending, 1 to\n"
        "                64 (default 1,2,4; DDP runs at every one, --quick too)\n"
        "  --data DIR    --sync's Fashion-MNIST folder, for ferry's workers and DDP\n"
        "                (default: /usr/share/datasets/fashion-mnist)\n"
        "  --async       instead: the straggler case, `ferry submit\n"
        "                tasks/mlp.so` on 4 local workers in sync mode and in async\n"
        "                mode (downpour, downpour --staleness 2, easgd; --ps-shards 3,\n"
        "                and downpour on the default 4 shards), each with and without\n"
        "                rank 3 stopped 2/3 of every period (SIGSTOP/SIGCONT): time to\n"
        "                0.84 test accuracy, accuracy after 3 epochs (with --quick:\n"
        "                1 epoch, sync and async only, a few minutes)\n"
        "  --device cuda instead: ferry against PyTorch eager on the same GPU, mlp\n"
        "                and cnn at batch 128 and 1024, fp32 and bf16 (PyTorch AMP),\n"
        "                and the resnet at both batches in fp32,\n"
        "                both holding the data on the GPU (bench/train_torch_gpu.py,\n"
        "                cudnn.benchmark on): samples/s and the ratios; every line\n"
        "                skipped, with the reason, where no GPU is visible (with\n"
        "                --quick: fp32 at batch 128, 1 epoch)\n"
        "  --nn          instead: only the layer lists against the hand-written\n"
        "                models: 6 rounds of an MLP epoch each and 4 of a CNN epoch on\n"
        "                6,000 samples (with --quick: 2 rounds, fewer samples)\n"
        "  --timeline    instead: an MLP step's time with a timeline recorded\n"
        "                against without, epoch about in this process (target:\n"
        "                at most 3%% slower; with --quick: fewer, shorter rounds),\n"
        "                then a 2-worker sync run's step with --timeline and the\n"
        "                metrics endpoint on against both off, an epoch each in turn\n"
        "  --period-ms MS  the straggler's duty-cycle period (default 30)\n"
        "  --epochs N    MLP and CNN epochs (default 5; --async: 3)\n"
        "  --no-cnn      skip the CNN\n"
        "  --no-pytorch  skip PyTorch\n"
        "  --python P    the interpreter with torch (default /usr/bin/python3)\n"
        "  --help        this text\n");
}

/* --workers 1,2,4,8: ascending counts, each a `ferry start` and a DDP world. */
static void parse_workers(const char *s, bench_cfg *c)
{
    c->n_workers = 0;
    for (char *end; *s; s = *end ? end + 1 : end) {
        long n = strtol(s, &end, 10);
        if (end == s || (*end && *end != ',') || n < 1 || n > 64 ||
            c->n_workers == BENCH_SYNC_MAX_COUNTS ||
            (c->n_workers && n <= c->workers[c->n_workers - 1]))
            bench_die("--workers takes up to %d ascending counts of 1 to 64",
                      BENCH_SYNC_MAX_COUNTS);
        c->workers[c->n_workers++] = (int)n;
    }
    if (!c->n_workers)
        bench_die("--workers takes up to %d ascending counts of 1 to 64",
                  BENCH_SYNC_MAX_COUNTS);
}

static void parse_args(int argc, char **argv, bench_cfg *c)
{
    int epochs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--quick") == 0) {
            c->quick = true;
        } else if (strcmp(a, "--sync") == 0) {
            c->sync = true;
        } else if (strcmp(a, "--device") == 0 && i + 1 < argc) {
            c->device = argv[++i];
            if (strcmp(c->device, "cpu") == 0)
                c->device = NULL; /* the default benchmark */
            else if (strncmp(c->device, "cuda", 4) != 0)
                bench_die("--device takes cpu, cuda or cuda:N");
        } else if (strcmp(a, "--nn") == 0) {
            c->nn_only = true;
        } else if (strcmp(a, "--timeline") == 0) {
            c->timeline = true;
        } else if (strcmp(a, "--async") == 0) {
            c->async = true;
        } else if (strcmp(a, "--period-ms") == 0 && i + 1 < argc) {
            c->period_ms = atoi(argv[++i]);
            if (c->period_ms < 3 || c->period_ms > 10000)
                bench_die("--period-ms takes 3 to 10000");
        } else if (strcmp(a, "--epochs") == 0 && i + 1 < argc) {
            epochs = atoi(argv[++i]);
            if (epochs < 1 || epochs > BENCH_MAX_EPOCHS)
                bench_die("--epochs takes 1 to %d", BENCH_MAX_EPOCHS);
        } else if (strcmp(a, "--workers") == 0 && i + 1 < argc) {
            parse_workers(argv[++i], c);
        } else if (strcmp(a, "--data") == 0 && i + 1 < argc) {
            c->data_dir = argv[++i];
        } else if (strcmp(a, "--no-cnn") == 0) {
            c->cnn_on = false;
        } else if (strcmp(a, "--no-submit") == 0) {
            c->submit_on = false;
        } else if (strcmp(a, "--no-pytorch") == 0) {
            c->torch_on = false;
        } else if (strcmp(a, "--python") == 0 && i + 1 < argc) {
            c->python = argv[++i];
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else {
            fprintf(stderr, "train: unknown argument '%s'\n", a);
            usage(stderr);
            exit(2);
        }
    }
    if ((c->n_workers || c->data_dir) && !c->sync)
        bench_die("--workers and --data go with --sync");
    if (c->quick) {
        c->blas_reps = 6;
        c->blas_steps = 100;
        c->mlp.epochs = QUICK_MLP_EPOCHS;
        c->cnn.epochs = 1;
        c->cnn.train_samples = 2000;
        c->cnn.test_samples = 1000;
        c->submit_on = false;
    }
    if (epochs)
        c->mlp.epochs = c->cnn.epochs = epochs;
    c->epochs = epochs;
}

/* --epochs when given, else the mode's default for a quick or a full run. */
static int epochs_or(const bench_cfg *c, int quick, int full)
{
    return c->epochs ? c->epochs : c->quick ? quick : full;
}

/* The last line of a run: its mode, the targets missed, the time taken. */
static void say_missed(const char *mode, int missed, uint64_t t_start)
{
    bench_log("bench/train%s: %d target(s) missed; %.1f s", mode, missed,
              (double)(bench_now_ns() - t_start) * 1e-9);
}

/* build/bench/train -> build/REL */
static void build_path(char *out, const char *rel)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        bench_die("cannot find this executable");
    self[n] = '\0';
    char *bench_dir = dirname(self);
    char *build_dir = dirname(bench_dir);
    snprintf(out, PATH_MAX, "%.3800s/%s", build_dir, rel);
}

/* ---- the lines ------------------------------------------------------------- */

static int missed;

static void params(char *buf, size_t len, const char *impl, const char *model,
                   int threads, const bench_run_opts *o)
{
    int n =
        snprintf(buf, len, "\"impl\":\"%s\",\"model\":\"%s\",\"batch\":%d,\"threads\":%d",
                 impl, model, o->batch, threads);
    if (o->epochs > 0)
        n += snprintf(buf + n, len - (size_t)n, ",\"epochs\":%d", o->epochs);
    if (o->train_samples)
        snprintf(buf + n, len - (size_t)n, ",\"train_samples\":%zu", o->train_samples);
}

static void target_line(const char *metric, double value, double target, const char *unit,
                        const char *p, const char *note)
{
    bool ok = value >= target;
    if (!ok)
        missed++;
    if (note)
        bench_emit(metric, value, unit, NULL, "%s,\"target_min\":%g,\"note\":\"%s\"", p,
                   target, note);
    else
        bench_emit(metric, value, unit, NULL, "%s,\"target_min\":%g", p, target);
    bench_log("%-32s %7.3f  (target_min %g%s) %s", metric, value, target,
              note ? ", quick smoke value" : "", ok ? "met" : "MISSED");
}

/* What a target line says when its baseline could not be run: the value
 * null, and why (quotes and control characters made JSON-safe). */
static void skipped_line(const char *metric, double target, const char *p,
                         const char *why)
{
    char safe[256];
    size_t n = 0;
    for (; why[n] && n + 1 < sizeof safe; n++)
        safe[n] = why[n] == '"' || why[n] == '\\' || (unsigned char)why[n] < 0x20
                      ? '\''
                      : why[n];
    safe[n] = '\0';
    bench_emit(metric, NAN, "ratio", NULL, "%s,\"target_min\":%g,\"skipped\":\"%s\"", p,
               target, safe);
    bench_log("%-32s skipped: %s", metric, why);
}

/* Per-epoch accuracy and the medians of one run; returns its samples/s. */
static double emit_run(const char *impl, const char *model, int threads,
                       const bench_run_opts *o, const bench_run *r)
{
    char p[256];
    params(p, sizeof p, impl, model, threads, o);
    for (int e = 0; e < r->epochs; e++)
        bench_emit("epoch_test_accuracy", r->test_accuracy[e], "fraction", NULL,
                   "%s,\"epoch\":%d", p, e + 1);
    double v[BENCH_MAX_EPOCHS];
    memcpy(v, r->samples_per_s, sizeof v);
    bench_summary sps = bench_summarize(v, (size_t)r->epochs);
    bench_emit("samples_per_s", sps.median, "samples/s", &sps, "%s", p);
    memcpy(v, r->train_s, sizeof v);
    bench_summary ts = bench_summarize(v, (size_t)r->epochs);
    bench_emit("epoch_train_s", ts.median, "s", &ts, "%s", p);
    memcpy(v, r->wall_s, sizeof v);
    bench_summary ws = bench_summarize(v, (size_t)r->epochs);
    bench_emit("epoch_wall_s", ws.median, "s", &ws, "%s,\"includes\":\"evaluation\"", p);
    bench_log("%s %s: %.0f samples/s (median of %d epochs, %.0f..%.0f), %.2f s an epoch "
              "(%.2f with evaluation), test accuracy %.4f after %d",
              impl, model, sps.median, r->epochs, sps.min, sps.max, ts.median, ws.median,
              r->epochs ? r->test_accuracy[r->epochs - 1] : 0.0, r->epochs);
    return sps.median;
}

/* ---- the measurements --------------------------------------------------------- */

typedef struct blas_samples {
    bench_blas *b;
    int steps;
    double v[128]; /* samples/s of each repetition */
    int n;
} blas_samples;

static void blas_rep(void *arg)
{
    blas_samples *bs = arg;
    if (bs->n < (int)(sizeof bs->v / sizeof bs->v[0]))
        bs->v[bs->n++] = (double)BATCH * bs->steps / bench_blas_run(bs->b, bs->steps);
}

static void blas_half(blas_samples *bs, const bench_cfg *c)
{
    for (int r = 0; r < c->blas_reps / 2; r++)
        blas_rep(bs);
}

static double emit_blas(blas_samples *bs, const bench_cfg *c)
{
    const bench_blas *b = bs->b;
    int n = bs->n;
    bench_summary s = bench_summarize(bs->v, (size_t)n);
    double per_sample = bench_blas_step_flops(b) / BATCH / 1e9;
    bench_summary g = {s.median * per_sample, s.min * per_sample, s.max * per_sample,
                       s.reps};
    const char *p =
        "\"impl\":\"openblas_sgemm\",\"model\":\"mlp\",\"batch\":%d,\"threads\":1,"
        "\"products\":8,\"steps\":%d";
    bench_emit("samples_per_s", s.median, "samples/s", &s, p, BATCH, c->blas_steps);
    bench_emit("gflops", g.median, "GFLOP/s", &g, p, BATCH, c->blas_steps);
    bench_log(
        "openblas limit: %.0f samples/s (%.0f..%.0f), %.1f GFLOP/s, %d reps of %d steps",
        s.median, s.min, s.max, g.median, n, c->blas_steps);
    return s.median;
}

/* `ferry submit mlp.so --epochs 1 --json`, one local worker, one BLAS
 * thread (the worker inherits OPENBLAS_NUM_THREADS). */
static void submit_mlp(const bench_cfg *c)
{
    bench_run_opts o = c->mlp;
    o.epochs = 1;
    char p[256];
    params(p, sizeof p, "ferry_submit", "mlp", 1, &o);
    bench_log("ferry submit: %s, 1 epoch, one local worker", c->mlp_so);
    bench_submit s;
    bench_submit_train(c->ferry_bin, c->mlp_so, &o, &s);
    if (s.skipped[0]) {
        bench_emit("command_s", NAN, "s", NULL, "%s,\"skipped\":\"%s\"", p, s.skipped);
        bench_log("ferry submit skipped: %s", s.skipped);
        return;
    }
    bench_emit("command_s", s.command_s, "s", NULL,
               "%s,\"includes\":\"connect, ship, data, evaluation\"", p);
    bench_emit("samples_per_s", s.samples_per_s, "samples/s", NULL, "%s", p);
    bench_emit("epoch_train_s", s.train_s, "s", NULL, "%s", p);
    bench_emit("epoch_test_accuracy", s.test_accuracy, "fraction", NULL, "%s,\"epoch\":1",
               p);
    bench_log("ferry submit on %s: %.2f s end to end, %.0f samples/s, train %.2f s, wall "
              "%.2f s, "
              "test accuracy %.4f",
              s.device, s.command_s, s.samples_per_s, s.train_s, s.wall_s,
              s.test_accuracy);
}

int main(int argc, char **argv)
{
    bench_set_name("train");
    bench_cfg c = {
        .blas_reps = 10,
        .blas_steps = 300,
        .mlp = {.epochs = TARGET_EPOCHS,
                .batch = BATCH,
                .lr = 0.05f,
                .momentum = 0.9f,
                .seed = 1},
        .cnn = {.epochs = TARGET_EPOCHS,
                .batch = BATCH,
                .lr = 0.05f,
                .momentum = 0.9f,
                .seed = 1},
        .cnn_on = true,
        .submit_on = true,
        .torch_on = true,
        .period_ms = 30,
        .python = "/usr/bin/python3",
        .script = BENCH_TORCH_SCRIPT,
    };
    parse_args(argc, argv, &c);
    build_path(c.mlp_so, "tasks/mlp.so");
    build_path(c.cnn_so, "tasks/cnn.so");
    build_path(c.ferry_bin, "ferry");
    build_path(c.mlp_hand_so, "bench/mlp_hand.so");
    build_path(c.cnn_hand_so, "bench/cnn_hand.so");
    uint64_t t_start = bench_now_ns();

    /* One thread for the MLP, here and in every child (PyTorch's products
     * go through OpenBLAS too, and it reads these when it loads). */
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    openblas_set_num_threads(1);

    if (c.device) {
        /* A bundle (tests/gpu/pack.sh) carries the script beside this
         * executable, away from the source tree it was built from. */
        char script[PATH_MAX] = BENCH_TORCH_GPU_SCRIPT;
        if (access(script, R_OK) != 0)
            build_path(script, "bench/train_torch_gpu.py");
        bench_gpu_cfg g = {
            .quick = c.quick,
            .epochs = epochs_or(&c, 1, TARGET_EPOCHS),
            .device = c.device,
            .mlp_so = c.mlp_so,
            .cnn_so = c.cnn_so,
            .python = c.python,
            .script = script,
            .torch_on = c.torch_on,
        };
        int n = bench_train_gpu(&g);
        char mode[300];
        snprintf(mode, sizeof mode, " --device %s", c.device);
        say_missed(mode, n, t_start);
        return 0;
    }
    long ncores = sysconf(_SC_NPROCESSORS_ONLN);
    bench_nn_cfg nc = {.quick = c.quick, .cnn_on = c.cnn_on,
                       .cnn_threads = ncores > 0 ? (int)ncores : 1,
                       .mlp_so = c.mlp_so, .mlp_hand_so = c.mlp_hand_so,
                       .cnn_so = c.cnn_so, .cnn_hand_so = c.cnn_hand_so};
    if (c.timeline) {
        int n =
            bench_train_timeline(&(bench_tl_cfg){.quick = c.quick, .mlp_so = c.mlp_so});
        int e2e = bench_train_observe(c.ferry_bin, c.mlp_so, c.quick);
        n = n < 0 || e2e < 0 ? -1 : n + e2e;
        say_missed(" --timeline", n, t_start);
        return n < 0;
    }
    if (c.nn_only) {
        int n = bench_train_nn(&nc);
        say_missed(" --nn", n, t_start);
        return 0;
    }
    if (c.async) {
        bench_async_cfg a = {
            .quick = c.quick,
            .epochs = epochs_or(&c, 1, 3),
            .period_ms = c.period_ms,
            .ferry = c.ferry_bin,
            .mlp_so = c.mlp_so,
        };
        int n = bench_train_async(&a);
        say_missed(" --async", n, t_start);
        return 0;
    }
    if (c.sync) {
        /* A bundle carries the script beside this executable. */
        static char script[PATH_MAX] = BENCH_DDP_SCRIPT;
        if (access(script, R_OK) != 0)
            build_path(script, "bench/train_ddp.py");
        bench_sync_cfg s = {
            .quick = c.quick,
            .epochs = epochs_or(&c, 2, TARGET_EPOCHS),
            .workers = {1, 2, 4},
            .n_workers = 3,
            .workers_given = c.n_workers > 0,
            .data_dir = c.data_dir,
            .ferry = c.ferry_bin,
            .mlp_so = c.mlp_so,
            .python = c.python,
            .ddp_script = script,
            .ddp_on = c.torch_on,
        };
        if (c.n_workers) {
            memcpy(s.workers, c.workers, sizeof c.workers);
            s.n_workers = c.n_workers;
        }
        int n = bench_train_sync(&s);
        say_missed(" --sync", n, t_start);
        return 0;
    }

    /* The limit is measured before, between and after the MLP's epochs and
     * after PyTorch's, so that its median sees the machine they saw. */
    blas_samples limit = {.b = bench_blas_create(BATCH), .steps = c.blas_steps};
    if (!limit.b)
        bench_die("out of memory");
    bench_blas_run(limit.b, c.blas_steps / 2); /* warm up: pages, caches, clocks */
    blas_half(&limit, &c);

    bench_run ferry_mlp, torch_mlp, ferry_cnn;
    bench_log("ferry: %s, %d epochs", c.mlp_so, c.mlp.epochs);
    if (bench_ferry_train(c.mlp_so, &c.mlp, blas_rep, &limit, &ferry_mlp) != 0 ||
        ferry_mlp.epochs == 0)
        bench_die("ferry's MLP training failed");
    bench_log("  on %s", ferry_mlp.device);
    memset(&torch_mlp, 0, sizeof torch_mlp);
    if (!c.torch_on) {
        snprintf(torch_mlp.skipped, sizeof torch_mlp.skipped, "--no-pytorch");
    } else {
        bench_log("pytorch: %s %s, %d epochs", c.python, c.script, c.mlp.epochs);
        if (bench_pytorch_train(c.python, c.script, 1, &c.mlp, &torch_mlp) != 0)
            bench_die("the PyTorch baseline failed");
    }
    blas_half(&limit, &c);

    double limit_sps = emit_blas(&limit, &c);
    double ferry_sps = emit_run("ferry", "mlp", 1, &c.mlp, &ferry_mlp);
    double torch_sps = 0;
    if (torch_mlp.skipped[0]) {
        bench_log("pytorch skipped: %s", torch_mlp.skipped);
    } else {
        bench_log("  on %s", torch_mlp.device);
        torch_sps = emit_run("pytorch", "mlp", 1, &c.mlp, &torch_mlp);
    }

    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int cnn_threads = cores > 0 ? (int)cores : 1;
    memset(&ferry_cnn, 0, sizeof ferry_cnn);
    if (c.cnn_on) {
        /* The CNN is allowed every core: its lines say how many. */
        openblas_set_num_threads(cnn_threads);
        bench_log("ferry: %s, %d epochs, %d BLAS threads%s", c.cnn_so, c.cnn.epochs,
                  cnn_threads,
                  c.cnn.train_samples ? " (on a part of the training set)" : "");
        if (bench_ferry_train(c.cnn_so, &c.cnn, NULL, NULL, &ferry_cnn) != 0 ||
            ferry_cnn.epochs == 0)
            bench_die("ferry's CNN training failed");
        openblas_set_num_threads(1);
        emit_run("ferry", "cnn", cnn_threads, &c.cnn, &ferry_cnn);
    }

    if (c.submit_on)
        submit_mlp(&c);
    missed += bench_train_nn(&nc);

    /* ---- the targets ---- */
    char p[256];
    params(p, sizeof p, "ferry", "mlp", 1, &c.mlp);
    if (torch_mlp.skipped[0])
        skipped_line("ferry_vs_pytorch_samples_per_s", TARGET_VS_PYTORCH, p,
                     torch_mlp.skipped);
    else
        target_line("ferry_vs_pytorch_samples_per_s", ferry_sps / torch_sps,
                    TARGET_VS_PYTORCH, "ratio", p, NULL);
    target_line("ferry_vs_openblas_limit", ferry_sps / limit_sps, TARGET_VS_LIMIT,
                "ratio", p, NULL);

    double mlp_acc = ferry_mlp.test_accuracy[ferry_mlp.epochs - 1];
    bool full_mlp = c.mlp.epochs == TARGET_EPOCHS && !c.mlp.train_samples;
    if (full_mlp)
        target_line("test_accuracy", mlp_acc, TARGET_MLP_ACCURACY, "fraction", p, NULL);
    else if (c.quick && c.mlp.epochs == QUICK_MLP_EPOCHS)
        target_line(
            "test_accuracy", mlp_acc, QUICK_MLP_ACCURACY, "fraction", p,
            "quick smoke value after 3 epochs; the target is 0.88 after 5");
    else
        bench_emit("test_accuracy", mlp_acc, "fraction", NULL, "%s", p);
    if (c.cnn_on) {
        params(p, sizeof p, "ferry", "cnn", cnn_threads, &c.cnn);
        double cnn_acc = ferry_cnn.test_accuracy[ferry_cnn.epochs - 1];
        if (c.cnn.epochs == TARGET_EPOCHS && !c.cnn.train_samples)
            target_line("test_accuracy", cnn_acc, TARGET_CNN_ACCURACY, "fraction", p,
                        NULL);
        else
            bench_emit("test_accuracy", cnn_acc, "fraction", NULL, "%s", p);
    }
    bench_blas_destroy(limit.b);
    say_missed("", missed, t_start);
    return 0;
}

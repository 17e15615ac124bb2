/* bench/faults — what surviving faults costs:
 *
 *   recovery   a 3-worker sync run of tasks/linreg under `ferry submit`
 *              (checkpoints every 100 steps) whose worker 1 is killed with
 *              SIGKILL: the time from the kill to the run's next epoch
 *              line, and that time less the steps it recomputed (from the
 *              checkpoint it went back to, at the step time measured
 *              before the kill), the part the target bounds
 *   checkpoint two trainers of tasks/mlp in this process, the same options
 *              but one writing a checkpoint at each epoch's end: the cost
 *              of one write (the median difference of their epochs), and
 *              its share of the step time when written each epoch of
 *              Fashion-MNIST (469 steps) and every 100 steps
 *
 * Runs build/ferry under a temporary FERRY_HOME. JSON lines on stdout,
 * text on stderr. */
#include <errno.h>
#include <ftw.h>
#include <libgen.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ferry/error.h>

#include "runtime/device/device.h"
#include "runtime/runtime.h"
#include "runtime/train/train.h"
#include "stats.h"

#define TARGET_RECOVERY_S 2.0
#define TARGET_CKPT_SHARE 0.03
#define CKPT_EVERY        "100"
#define WORKERS           "3"
#define RECOVERY_REPS     5
#define QUICK_REPS        2
#define CKPT_ROUNDS       24
#define QUICK_CKPT_ROUNDS 6
#define SHORT_SAMPLES     6400 /* 50 steps of 128: an epoch for each round */
#define LINE_WAIT_MS      120000

static char ferry_bin[4096], linreg_so[4096], mlp_so[4096], home[256];

static void usage(FILE *f)
{
    fprintf(f, "usage: faults [--quick] [--help]\n"
               "\n"
               "Measures the time from a SIGKILL of a worker of a sync run to the run's\n"
               "next progress (less the steps it recomputed), and the cost of writing\n"
               "checkpoints each epoch and every 100 steps against none, as JSON lines\n"
               "on stdout. Runs build/ferry under a temporary FERRY_HOME.\n"
               "\n"
               "  --quick   fewer repetitions (a smoke run)\n"
               "  --help    this text\n");
}

static int run_ferry(const char *a, const char *b, const char *c, const char *d)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        bench_die("fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(2, 1); /* stdout is for JSON lines only */
        execl(ferry_bin, ferry_bin, a, b, c, d, (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ---- recovery ---------------------------------------------------------------- */

typedef struct submit {
    pid_t pid;
    FILE *out; /* its stdout: the progress lines */
} submit;

static void submit_start(submit *s, const char *dir)
{
    int fd[2];
    if (pipe(fd))
        bench_die("pipe: %s", strerror(errno));
    fflush(NULL);
    s->pid = fork();
    if (s->pid < 0)
        bench_die("fork: %s", strerror(errno));
    if (s->pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        execl(ferry_bin, ferry_bin, "submit", linreg_so, "--epochs", "100000",
              "--checkpoint-dir", dir, "--checkpoint-every", CKPT_EVERY, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    s->out = fdopen(fd[0], "r");
}

/* The next progress line into buf, or false past LINE_WAIT_MS or its end. */
static bool next_line(submit *s, char *buf, size_t len)
{
    struct pollfd p = {.fd = fileno(s->out), .events = POLLIN};
    if (poll(&p, 1, LINE_WAIT_MS) <= 0 || !fgets(buf, (int)len, s->out))
        return false;
    if (strcmp(buf, "\n") != 0)
        fputs(buf, stderr);
    return true;
}

static void submit_stop(submit *s)
{
    kill(s->pid, SIGINT);
    int status;
    waitpid(s->pid, &status, 0);
    fclose(s->out);
}

static pid_t worker_pid(int rank)
{
    char path[512];
    snprintf(path, sizeof path, "%s/workers/%d/pid", home, rank);
    FILE *f = fopen(path, "r");
    long pid = 0;
    if (!f || fscanf(f, "%ld", &pid) != 1)
        pid = 0;
    if (f)
        fclose(f);
    return (pid_t)pid;
}

/* One kill: the seconds to the next epoch line, and the steps recomputed
 * to reach it and the step time before the kill. */
static bool recover_once(int rep, double *secs, double *steps, double *step_s)
{
    char dir[512], line[8192];
    snprintf(dir, sizeof dir, "%s/ck%d", home, rep);
    submit s;
    submit_start(&s, dir);
    unsigned long long train = 0, batch = 0, epoch = 0, from = 0;
    double rate = 0;
    int epochs_seen = 0;
    bool ok = false;
    while (next_line(&s, line, sizeof line)) {
        const char *p = strstr(line, "parameters, ");
        if (p && sscanf(p, "parameters, %llu training", &train) == 1 &&
            (p = strstr(line, "batch ")))
            sscanf(p, "batch %llu", &batch);
        if (sscanf(line, "epoch %llu/", &epoch) == 1 &&
            (p = strstr(line, " samples/s"))) {
            while (p > line && p[-1] != ' ')
                p--;
            rate = atof(p);
        }
        if (epoch && ++epochs_seen >= 4 && rate > 0) {
            ok = true;
            break;
        }
    }
    ok = ok && train && batch;
    uint64_t t0 = bench_now_ns();
    if (ok)
        ok = kill(worker_pid(1), SIGKILL) == 0;
    bool restarted = false;
    while (ok && (ok = next_line(&s, line, sizeof line))) {
        const char *p = strstr(line, "checkpoint-");
        if (strstr(line, "every rank continues from")) {
            restarted = true;
            if (!p || sscanf(p, "checkpoint-%llu", &from) != 1)
                from = 0;
        } else if (restarted && sscanf(line, "epoch %llu/", &epoch) == 1) {
            *secs = (double)(bench_now_ns() - t0) / 1e9;
            break;
        }
    }
    submit_stop(&s);
    if (!ok)
        return false;
    unsigned long long per_epoch = (train + batch - 1) / batch;
    *steps = (double)(epoch * per_epoch - from);
    *step_s = (double)batch / rate;
    return true;
}

static int bench_recovery(bool quick)
{
    int reps = quick ? QUICK_REPS : RECOVERY_REPS, n = 0;
    double total[RECOVERY_REPS], rest[RECOVERY_REPS], recomputed[RECOVERY_REPS];
    for (int r = 0; r < reps; r++) {
        /* A fresh cluster each time: a worker that crashes again within
         * 30 s is restarted after a crash loop's pause, on purpose. */
        if (run_ferry("start", WORKERS, "--base-port", "0") != 0)
            bench_die("ferry start %s failed", WORKERS);
        double secs, steps, step_s;
        bool ok = recover_once(r, &secs, &steps, &step_s);
        run_ferry("shutdown", "--grace-ms", "1000", NULL);
        if (!ok) {
            bench_log("faults: repetition %d saw no recovery", r + 1);
            continue;
        }
        total[n] = secs;
        recomputed[n] = steps;
        rest[n] = secs - steps * step_s;
        bench_log("  kill %d: %.3f s to the next epoch, %.0f steps recomputed at %.2f ms",
                  r + 1, secs, steps, step_s * 1e3);
        n++;
    }
    if (n == 0)
        return -1;
    bench_summary t = bench_summarize(total, (size_t)n);
    bench_summary c = bench_summarize(recomputed, (size_t)n);
    bench_summary q = bench_summarize(rest, (size_t)n);
    const char *p =
        "\"model\":\"linreg\",\"workers\":" WORKERS ",\"checkpoint_every\":" CKPT_EVERY;
    bench_emit("kill_to_progress_s", t.median, "s", &t, "%s", p);
    bench_emit("steps_recomputed", c.median, "steps", &c, "%s", p);
    bool met = q.median < TARGET_RECOVERY_S;
    bench_emit("kill_to_progress_less_recompute_s", q.median, "s", &q,
               "%s,\"target_max\":%.1f,\"met\":%s", p, TARGET_RECOVERY_S,
               met ? "true" : "false");
    return met ? 0 : 1;
}

/* ---- checkpoint cost ----------------------------------------------------------- */

/* One epoch's wall time (evaluation and the epoch's checkpoint included),
 * in ms; negative on failure. */
static double epoch_ms(rt_trainer *t)
{
    rt_epoch_stats st;
    char err[512] = "";
    uint64_t t0 = bench_now_ns();
    if (rt_trainer_epoch(t, &st, NULL, NULL, err, sizeof err)) {
        bench_log("faults: %s", err);
        return -1;
    }
    return (double)(bench_now_ns() - t0) / 1e6;
}

/* Two trainers on short epochs, one writing a checkpoint at each epoch's
 * end: a checkpoint's cost is the median over the rounds of the
 * difference between the two sides' epochs (each round runs both, the
 * order turned), which a machine shared with other work disturbs far less
 * than the ratio of two epochs would; the share of a step at an interval
 * follows from it and the step time without. */
static int ckpt_rounds(const ferry_model_t *m, ferry_device_t *dev, bool quick)
{
    char err[512] = "", dir[512];
    rt_dataset full[2] = {0}, view[2];
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++)
        rc = rt_fmnist_load(NULL, i == 0, &full[i], err, sizeof err);
    if (rc) {
        bench_log("faults: %s", err);
        return -1;
    }
    view[0] = full[0];
    view[1] = full[1];
    view[0].n = SHORT_SAMPLES < full[0].n ? SHORT_SAMPLES : full[0].n;
    view[1].n = 256;
    snprintf(dir, sizeof dir, "%s/ckpt-bench", home);
    rt_trainer *t[2] = {NULL, NULL}; /* without, with */
    for (int i = 0; i < 2 && rc == 0; i++) {
        rt_train_opts to = {.batch = 128,
                            .optim = {.kind = RT_OPT_SGD, .lr = 0.05f, .momentum = 0.9f},
                            .seed = 1,
                            .world = 1,
                            .train_set = &view[0],
                            .test_set = &view[1],
                            .ckpt_dir = i ? dir : NULL,
                            .ckpt_model = "mlp"};
        if ((rc = rt_trainer_create(m, dev, &to, &t[i], err, sizeof err)))
            bench_log("faults: cannot create the trainer: %s", err);
    }
    int rounds = quick ? QUICK_CKPT_ROUNDS : CKPT_ROUNDS;
    double ms[2][CKPT_ROUNDS], cost[CKPT_ROUNDS];
    for (int i = 0; i < 2 && rc == 0; i++)
        if (epoch_ms(t[i]) < 0) /* warm: pages, caches, BLAS buffers */
            rc = -1;
    for (int r = 0; r < rounds && rc == 0; r++) {
        for (int k = 0; k < 2 && rc == 0; k++) {
            int i = (r + k) % 2;
            if ((ms[i][r] = epoch_ms(t[i])) < 0)
                rc = -1;
        }
        if (rc == 0)
            cost[r] = ms[1][r] - ms[0][r];
    }
    int missed = -1;
    if (rc == 0) {
        size_t steps = rt_trainer_steps(t[0]);
        size_t full_steps = (full[0].n + 127) / 128;
        bench_summary c = bench_summarize(cost, (size_t)rounds);
        bench_summary w = bench_summarize(ms[0], (size_t)rounds);
        double step = w.median / (double)steps;
        bench_emit("checkpoint_write_ms", c.median, "ms", &c,
                   "\"model\":\"mlp\",\"of\":\"epoch with one less epoch without\"");
        bench_emit("step_ms_without_checkpoints", step, "ms", NULL,
                   "\"model\":\"mlp\",\"batch\":128,\"steps\":%zu", steps);
        double each_epoch = c.median / (step * (double)full_steps);
        double every = c.median / (step * 100);
        missed = each_epoch > TARGET_CKPT_SHARE;
        bench_emit("checkpoint_share_each_epoch", each_epoch, "fraction", NULL,
                   "\"of\":\"step time\",\"steps_between\":%zu,\"target_max\":%.2f,"
                   "\"met\":%s,\"model\":\"mlp\"",
                   full_steps, TARGET_CKPT_SHARE, missed ? "false" : "true");
        bench_emit("checkpoint_share_every_100_steps", every, "fraction", NULL,
                   "\"of\":\"step time\",\"steps_between\":100,\"model\":\"mlp\"");
    }
    for (int i = 0; i < 2; i++)
        rt_trainer_destroy(t[i]);
    rt_dataset_free(&full[0]);
    rt_dataset_free(&full[1]);
    return missed;
}

static int bench_ckpt(bool quick)
{
    char err[512] = "";
    rt_module mod;
    if (rt_module_open(&mod, mlp_so, mlp_so, err, sizeof err)) {
        bench_log("faults: %s (build it first)", err);
        return -1;
    }
    ferry_device_t *dev = NULL;
    int rc = -1;
    if (rt_device_open("cpu", &dev, err, sizeof err))
        bench_log("faults: %s", err);
    else
        rc = ckpt_rounds(mod.task->model, dev, quick);
    rt_device_close(dev);
    rt_module_close(&mod);
    return rc;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(path);
}

int main(int argc, char **argv)
{
    bool quick = bench_quick_option(argc, argv, usage);
    bench_set_name("faults");
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        bench_die("cannot find this program: %s", strerror(errno));
    self[n] = '\0';
    const char *dir = dirname(self);
    snprintf(ferry_bin, sizeof ferry_bin, "%.4000s/../ferry", dir);
    snprintf(linreg_so, sizeof linreg_so, "%.4000s/../tasks/linreg.so", dir);
    snprintf(mlp_so, sizeof mlp_so, "%.4000s/../tasks/mlp.so", dir);
    snprintf(home, sizeof home, "/tmp/ferry-bench-faults.XXXXXX");
    if (!mkdtemp(home))
        bench_die("mkdtemp: %s", strerror(errno));
    setenv("FERRY_HOME", home, 1);
    int a = bench_recovery(quick);
    int b = bench_ckpt(quick);
    nftw(home, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return a < 0 || b < 0 ? 1 : 0;
}

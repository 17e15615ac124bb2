/* bench/faults — what surviving faults costs:
 *
 *   recovery   a 3-worker sync run of tasks/linreg under `ferry submit`
 *              (checkpoints every 100 steps) whose worker 1 is killed with
 *              SIGKILL: the time from the kill to the run's next epoch
 *              line, and that time less the steps it recomputed (from the
 *              checkpoint it went back to, at the step time measured
 *              before the kill), the part the target bounds
 *   checkpoint two trainers of tasks/mlp in this process, the same options
 *              but one writing a checkpoint at each epoch's end, in
 *              alternating rounds (faults_ckpt.c): the cost of one write,
 *              and its share of the step time when written each epoch of
 *              Fashion-MNIST (469 steps) and every 100 steps, as medians
 *              with their spread, on the wall clock and in CPU time
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

#include "faults_ckpt.h"
#include "stats.h"

#define TARGET_RECOVERY_S 2.0
#define CKPT_EVERY        "100"
#define WORKERS           "3"
#define RECOVERY_REPS     5
#define QUICK_REPS        2
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
    int b = bench_ckpt(mlp_so, home, quick);
    nftw(home, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return a < 0 || b < 0 ? 1 : 0;
}

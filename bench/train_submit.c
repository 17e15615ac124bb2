/* bench/train — `ferry submit MODULE.so --json` end to end, on one local
 * worker under a private FERRY_HOME. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stats.h"
#include "train_child.h"
#include "train_run.h"

/* Runs `ferry args...` and waits: the exit status. With `last`, its stdout
 * comes through a pipe and its last line is kept there; without, its stdout
 * is our stderr (stdout is for JSON lines), and no pipe is left for the
 * worker processes `ferry start` leaves behind to hold open. */
int bench_run_ferry(const char *ferry, const char *home, const char *const *args,
                    char *last, size_t len)
{
    char *argv[24] = {(char *)ferry};
    int n = 1;
    for (; args[n - 1] && n < 23; n++)
        argv[n] = (char *)args[n - 1];
    argv[n] = NULL;
    char env_home[4200];
    snprintf(env_home, sizeof env_home, "FERRY_HOME=%s", home);
    const char *env[] = {env_home, NULL};
    if (!last) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0)
            return 127;
        if (pid == 0) {
            putenv(env_home);
            dup2(2, 1);
            execv(ferry, argv);
            _exit(127);
        }
        int status;
        while (waitpid(pid, &status, 0) < 0)
            if (errno != EINTR)
                return 127;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    bench_proc p;
    if (bench_proc_start(&p, argv, env) != 0)
        return 127;
    char line[8192];
    while (fgets(line, sizeof line, p.out))
        snprintf(last, len, "%s", line);
    return bench_proc_wait(&p);
}

int bench_submit_train(const char *ferry, const char *so, const bench_run_opts *o,
                       bench_submit *out)
{
    memset(out, 0, sizeof *out);
    if (access(ferry, X_OK) != 0) {
        snprintf(out->skipped, sizeof out->skipped, "no %s: %s", ferry, strerror(errno));
        return 0;
    }
    char home[] = "/tmp/ferry-bench-train-XXXXXX";
    if (!mkdtemp(home)) {
        snprintf(out->skipped, sizeof out->skipped, "mkdtemp: %s", strerror(errno));
        return 0;
    }
    const char *start[] = {"start", "1", "--base-port", "0", NULL};
    int code = bench_run_ferry(ferry, home, start, NULL, 0);
    if (code != 0) {
        snprintf(out->skipped, sizeof out->skipped, "ferry start 1 exited %d", code);
        goto out;
    }
    char epochs[16], batch[16], lr[32], momentum[32], seed[32];
    snprintf(epochs, sizeof epochs, "%d", o->epochs);
    snprintf(batch, sizeof batch, "%d", o->batch);
    snprintf(lr, sizeof lr, "%g", (double)o->lr);
    snprintf(momentum, sizeof momentum, "%g", (double)o->momentum);
    snprintf(seed, sizeof seed, "%llu", o->seed);
    const char *submit[] = {"submit", so,     "--epochs", epochs,       "--batch",
                            batch,    "--lr", lr,         "--momentum", momentum,
                            "--seed", seed,   "--json",   NULL};
    char json[8192] = "";
    uint64_t t0 = bench_now_ns();
    code = bench_run_ferry(ferry, home, submit, json, sizeof json);
    out->command_s = (double)(bench_now_ns() - t0) / 1e9;
    out->samples_per_s = bench_json_number(json, "samples_per_s");
    out->train_s = bench_json_number(json, "train_s");
    out->wall_s = bench_json_number(json, "wall_s");
    out->test_accuracy = bench_json_number(json, "test_accuracy");
    bench_json_string(json, "device", out->device, sizeof out->device);
    if (code != 0 || !(out->samples_per_s > 0))
        snprintf(out->skipped, sizeof out->skipped, "ferry submit exited %d%s", code,
                 code == 0 ? " without samples_per_s in its JSON" : "");
    const char *shutdown[] = {"shutdown", "--grace-ms", "2000", NULL};
    bench_run_ferry(ferry, home, shutdown, NULL, 0);
out:
    bench_remove_tree(home);
    return 0;
}

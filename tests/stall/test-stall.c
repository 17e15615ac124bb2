/* tests/stall — the stall inspector on a real cluster: a worker stopped
 * with SIGSTOP in the middle of sync or async training is named, with what
 * every other rank is doing, within the warning threshold (set low here);
 * SIGCONT lets the run finish; past --stall-abort the run ends with the
 * report as its error and the workers are free for the next run; a cluster
 * file whose threshold is not a number is refused with its line. */
#include "e2e.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cluster/train/train_int.h"
#include "runtime/where.h"

/* The warning threshold of these runs, and how much later than it the
 * report may come on two loaded cores: a poll period and a Stats timeout
 * after it, then the time the stopped worker's silence takes to be seen. */
#define WARN_MS 500
#define LATE_MS 4000
#define WORKERS 3
#define RUN_MS  180000

TestSuite(stall, .init = e2e_setup, .fini = e2e_teardown, .timeout = 240);

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The submit under test: its pid and output files; stopped by the
 * teardown of each test when it still runs. */
static pid_t submit_pid;
static char out_path[600], err_path[600];
static pid_t stopped; /* a worker this test stopped: continued at the end */
static pid_t stopped_sup; /* a supervisor this test stopped: likewise */

static void spawn_submit(const char *const *extra)
{
    snprintf(out_path, sizeof out_path, "%s", e2e_write_file("submit.out", ""));
    snprintf(err_path, sizeof err_path, "%s", e2e_write_file("submit.err", ""));
    const char *argv[40] = {getenv("FERRY_TEST_BIN"), "submit", e2e_task("linreg")};
    int argc = 3;
    for (; *extra && argc < 38; extra++)
        argv[argc++] = *extra;
    argv[argc] = NULL;
    cr_assert(argv[0], "FERRY_TEST_BIN is not set");
    fflush(NULL);
    submit_pid = fork();
    cr_assert(submit_pid >= 0, "fork: %s", strerror(errno));
    if (submit_pid == 0) {
        int o = open(out_path, O_WRONLY | O_TRUNC);
        int e = open(err_path, O_WRONLY | O_TRUNC);
        if (o < 0 || e < 0)
            _exit(127);
        dup2(o, 1);
        dup2(e, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
}

/* Waits up to ms for `what` in the file at `path`; the time it took, or
 * -1. */
static double wait_text(const char *path, const char *what, int ms)
{
    double t0 = now_ms();
    while (now_ms() - t0 < ms) {
        char *text = e2e_slurp(path);
        bool found = text && strstr(text, what);
        free(text);
        if (found)
            return now_ms() - t0;
        usleep(20000);
    }
    return -1;
}

/* The submit's exit status once it ended (at most ms); -1: still running. */
static int wait_submit(int ms)
{
    double t0 = now_ms();
    int status;
    while (now_ms() - t0 < ms) {
        if (waitpid(submit_pid, &status, WNOHANG) == submit_pid) {
            submit_pid = 0;
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        }
        usleep(20000);
    }
    return -1;
}

static void stall_teardown(void)
{
    if (stopped > 0)
        kill(stopped, SIGCONT);
    stopped = 0;
    if (stopped_sup > 0)
        kill(stopped_sup, SIGCONT);
    stopped_sup = 0;
    if (submit_pid > 0) {
        kill(submit_pid, SIGKILL);
        waitpid(submit_pid, NULL, 0);
        submit_pid = 0;
    }
    e2e_teardown();
}

TestSuite(stall_run, .init = e2e_setup, .fini = stall_teardown, .timeout = 300);

/* A cluster whose heartbeat waits long enough for the inspector to speak
 * first: a worker stopped for a few seconds is not declared dead. */
static void start_cluster(void)
{
    const char *conf =
        e2e_write_file("stall.ini", "[cluster]\nping_timeout_ms = 20000\n");
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "3", "--base-port", "0", "--config", conf, NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
}

static char *submit_text(const char *path)
{
    char *t = e2e_slurp(path);
    return t ? t : strdup("");
}

/* Stops worker `rank` once the submit has printed `when`; returns the
 * time it was stopped. */
static double stop_at(int rank, const char *when)
{
    cr_assert(wait_text(out_path, when, RUN_MS) >= 0,
              "the run never got going:\n%s\n%s", submit_text(out_path),
              submit_text(err_path));
    stopped = e2e_worker_pid_file(rank);
    cr_assert(stopped > 0);
    cr_assert(kill(stopped, SIGSTOP) == 0);
    return now_ms();
}

/* The report came within the threshold and its lateness, and says what it
 * must: `also` is the phase text expected of a rank that waits. */
static void expect_report(double stopped_at, const char *also)
{
    double took = wait_text(err_path, "stalled:", WARN_MS + LATE_MS + 10000);
    char *err = submit_text(err_path);
    cr_assert(took >= 0, "no stall report:\n%s\n%s", submit_text(out_path), err);
    double since = now_ms() - stopped_at;
    cr_log_info("stall named %.0f ms after the SIGSTOP (threshold %d ms):\n%s", since,
                WARN_MS, err);
    cr_expect(since < WARN_MS + LATE_MS, "named %.0f ms after the stop", since);
    cr_expect(strstr(err, "not arrived: rank 1"), "%s", err);
    cr_expect(strstr(err, "rank 1 (127.0.0.1:"), "%s", err);
    cr_expect(strstr(err, "is stopped (SIGSTOP)"), "%s", err);
    cr_expect(strstr(err, "ferry.train.epoch"), "%s", err);
    cr_expect(strstr(err, also), "%s", err);
    cr_expect(strstr(err, "waiting for rank"), "%s", err);
    cr_expect(strstr(err, "since its last progress"), "%s", err);
    free(err);
}

/* A run of `mode` with worker 1 stopped once `when` is printed: named
 * with what the others wait in (`phase`), and finished once continued. */
static void stopped_then_continued(const char *mode, const char *when, const char *phase)
{
    start_cluster();
    const char *extra[] = {"--mode", mode, "--epochs", "40", "--stall-warn", "500ms", NULL};
    spawn_submit(extra);
    double at = stop_at(1, when);
    expect_report(at, phase);
    kill(stopped, SIGCONT);
    stopped = 0;
    int st = wait_submit(RUN_MS);
    char *out = submit_text(out_path), *err = submit_text(err_path);
    cr_assert(st == 0, "exit %d after SIGCONT\n%s\n%s\n%s", st, out, err, e2e_logs());
    cr_expect(strstr(out, "done:"), "%s", out);
    free(out);
    free(err);
}

Test(stall_run, sync_stopped_worker_named_then_continued)
{
    stopped_then_continued("sync", "epoch 1", "all-reduce");
}

Test(stall_run, async_stopped_shard_holder_named_then_continued)
{
    /* As the epochs begin: an async rank that has ended its epoch waits
     * for the others at the master, out of any push; one in its epoch stays
     * in its push to the stopped shard. */
    stopped_then_continued("async", " parameters, ", "push to shard 1, waiting for rank 1");
}

/* A run that began without worker 1 has its rank 1 on worker 2: the
 * inspector asks, and names, worker 2 for it, not the absent worker 1. */
Test(stall_run, a_rank_on_another_worker_than_its_number_is_asked_as_its_own)
{
    start_cluster();
    stopped_sup = e2e_supervisor_pid();
    cr_assert(stopped_sup > 0 && kill(stopped_sup, SIGSTOP) == 0);
    pid_t gone = e2e_worker_pid_file(1);
    cr_assert(gone > 0 && kill(gone, SIGKILL) == 0);
    char dir[700];
    snprintf(dir, sizeof dir, "%s.d", e2e_write_file("ckpt", ""));
    const char *extra[] = {"--mode",       "sync",  "--epochs",      "40",
                           "--stall-warn", "500ms", "--min-workers", "2",
                           "--checkpoint-dir", dir, NULL};
    spawn_submit(extra);
    stop_at(2, "epoch 1");
    cr_assert(wait_text(err_path, "stalled:", WARN_MS + LATE_MS + 10000) >= 0,
              "no stall report:\n%s", submit_text(err_path));
    char *out = submit_text(out_path), *err = submit_text(err_path);
    char absent[64] = "";
    const char *w1 = strstr(out, "worker 1 (");
    cr_assert(w1 && sscanf(w1, "worker 1 (%63[^)])", absent) == 1, "%s", out);
    char named[96];
    snprintf(named, sizeof named, "rank 1 (%s)", absent);
    cr_expect(strstr(err, "not arrived: rank 1"), "%s", err);
    cr_expect(strstr(err, "is stopped (SIGSTOP)"), "%s", err);
    cr_expect(!strstr(err, named), "rank 1 named by absent worker 1's address:\n%s", err);
    free(out);
    free(err);
    kill(stopped, SIGCONT);
    stopped = 0;
    int st = wait_submit(RUN_MS);
    cr_assert(st == 0, "exit %d after SIGCONT\n%s", st, submit_text(err_path));
}

Test(stall_run, abort_ends_the_run_with_the_report)
{
    start_cluster();
    const char *extra[] = {"--mode", "sync",          "--epochs", "40", "--stall-warn",
                           "500ms",  "--stall-abort", "2s",       NULL};
    spawn_submit(extra);
    double at = stop_at(1, "epoch 1");
    int st = wait_submit(2000 + LATE_MS + 10000);
    double took = now_ms() - at;
    char *out = submit_text(out_path), *err = submit_text(err_path);
    cr_assert(st > 0, "exit %d: the run did not end with an error\n%s\n%s", st, out, err);
    cr_log_info("run ended %.0f ms after the SIGSTOP (abort threshold 2000 ms):\n%s",
                took, err);
    cr_expect(took < 2000 + LATE_MS, "ended %.0f ms after the stop", took);
    /* The error is the report, not a cancellation. */
    cr_expect(strstr(err, "ferry submit: stalled past the abort threshold of 2.0 s, the "
                          "run is ended: no progress for"),
              "%s", err);
    cr_expect(strstr(err, "not arrived: rank 1"), "%s", err);
    cr_expect(strstr(err, "is stopped (SIGSTOP)"), "%s", err);
    cr_expect(!strstr(err, "Sanitizer"), "%s", err); /* the ended run leaks nothing */
    free(out);
    free(err);
    /* Continued, the stopped worker drops the ended run; every worker takes
     * the next one, which a worker still holding a session would refuse. */
    kill(stopped, SIGCONT);
    stopped = 0;
    e2e_run r;
    e2e_ferry(&r, RUN_MS, "submit", e2e_task("linreg"), "--epochs", "1", NULL);
    E2E_EXPECT(&r, 0);
    cr_expect(e2e_has(r.out, "on 3 workers"), "%s", r.out);
    e2e_run_fini(&r);
    pid_t sup = e2e_supervisor_pid();
    e2e_ferry(&r, E2E_CMD_MS, "shutdown", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    e2e_expect_nothing_left(sup, NULL, 0, 10000);
}

Test(stall, bad_threshold_in_the_cluster_file_refused_with_its_line)
{
    const char *conf = e2e_write_file("bad.ini", "[cluster]\nstall_warn_ms = abc\n");
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "1", "--base-port", "0", "--config", conf, NULL);
    cr_expect(r.status != 0, "accepted:\n%s\n%s", r.out, r.err);
    cr_expect(strstr(r.err, "bad.ini:2:"), "%s", r.err);
    cr_expect(strstr(r.err, "stall_warn_ms"), "%s", r.err);
    cr_expect(strstr(r.err, "'abc'"), "%s", r.err);
    e2e_run_fini(&r);
}

Test(stall, durations_parsed_and_refused)
{
    int64_t ms = -1;
    cr_expect(ct_stall_parse("500ms", &ms) == 0 && ms == 500);
    cr_expect(ct_stall_parse("30s", &ms) == 0 && ms == 30000);
    cr_expect(ct_stall_parse("2m", &ms) == 0 && ms == 120000);
    cr_expect(ct_stall_parse("1.5", &ms) == 0 && ms == 1500);
    cr_expect(ct_stall_parse("0", &ms) == 0 && ms == 0);
    cr_expect(ct_stall_parse("abc", &ms) == FERRY_EINVAL);
    cr_expect(ct_stall_parse("5 parsecs", &ms) == FERRY_EINVAL);
    cr_expect(ct_stall_parse("-1s", &ms) == FERRY_EINVAL);
    cr_expect(ct_stall_parse("2d", &ms) == FERRY_EINVAL);
}

Test(stall_run, bad_flag_refused_before_training)
{
    start_cluster();
    e2e_run r;
    e2e_ferry(&r, RUN_MS, "submit", e2e_task("linreg"), "--epochs", "1", "--stall-warn",
              "soon", NULL);
    cr_expect(r.status != 0, "accepted:\n%s\n%s", r.out, r.err);
    cr_expect(strstr(r.err, "--stall-warn soon: expected a duration"), "%s", r.err);
    e2e_run_fini(&r);
}

/* A thread's record: entered, moved through a step, listed, left. */
static size_t seen_by_other;

static void *other_thread(void *arg)
{
    (void)arg;
    rt_where_phase("not in any call", 3); /* no record: nothing happens */
    rt_where_enter("b.so", "g");
    rt_where_step(1, 1, "forward and backward");
    rt_where_info w[RT_WHERE_MAX];
    seen_by_other = rt_where_list(w, RT_WHERE_MAX);
    rt_where_leave();
    return NULL;
}

Test(stall, where_records_follow_their_thread)
{
    rt_where_info w[RT_WHERE_MAX];
    size_t base = rt_where_list(w, RT_WHERE_MAX);
    rt_where_enter("a.so", "ferry.train.epoch");
    rt_where_step(2, 7, "forward and backward");
    rt_where_waiting("all-reduce", 1);
    usleep(30000);
    rt_where_waiting("all-reduce", 1); /* the same wait: no progress */
    pthread_t th;
    cr_assert(pthread_create(&th, NULL, other_thread, NULL) == 0);
    pthread_join(th, NULL);
    cr_expect_eq(seen_by_other, base + 2);
    size_t n = rt_where_list(w, RT_WHERE_MAX);
    cr_assert_eq(n, base + 1);
    const rt_where_info *a = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(w[i].module, "a.so") == 0)
            a = &w[i];
    cr_assert(a);
    cr_expect_str_eq(a->function, "ferry.train.epoch");
    cr_expect_str_eq(a->phase, "all-reduce");
    cr_expect_eq(a->epoch, 2);
    cr_expect_eq(a->step, 7);
    cr_expect_eq(a->waits_for, 1);
    cr_expect(a->idle_s >= 0.025, "idle %.3f s", a->idle_s);
    rt_where_waiting("all-reduce", 2); /* another peer: progress */
    n = rt_where_list(w, RT_WHERE_MAX);
    for (size_t i = 0; i < n; i++)
        if (strcmp(w[i].module, "a.so") == 0)
            cr_expect(w[i].idle_s < 0.025 && w[i].waits_for == 2, "idle %.3f s",
                      w[i].idle_s);
    rt_where_leave();
    cr_expect_eq(rt_where_list(w, RT_WHERE_MAX), base);
}

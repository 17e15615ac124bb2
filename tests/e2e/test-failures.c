/* tests/e2e — workers that crash, die, hang or get the wrong token, on a
 * real cluster: the master gets an error naming the worker, never a hang,
 * and the cluster serves the next call. */
#include "e2e.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "runtime/runtime.h"

TestSuite(e2e_fail, .init = e2e_setup, .fini = e2e_teardown, .timeout = 120);

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void *slurp_module(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    void *buf = malloc(*len);
    cr_assert(buf && fread(buf, 1, *len, f) == *len);
    fclose(f);
    return buf;
}

static void load(cluster *cl, const char *path, const char *name, cluster_module *m)
{
    size_t len;
    void *bytes = slurp_module(path, &len);
    int rc = cluster_load_module(cl, name, bytes, len, m);
    free(bytes);
    cr_assert(rc == 0, "load %s: %s", name, cluster_error(cl));
}

static void expect_echo(cluster *cl, const cluster_module *m, int rank)
{
    ferry_bytes_t in = {.data = "ping?", .len = 5}, out = {0};
    int rc = cluster_call(cl, m, rank, "echo", &in, &out);
    cr_assert(rc == 0, "echo on worker %d after the failure: %s", rank,
              cluster_error(cl));
    cr_assert(out.len == 5 && memcmp(out.data, "ping?", 5) == 0);
    cluster_free_bytes(&out);
}

static void crash_through_the_cli(const char *fn, const char *signame)
{
    e2e_start(2);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_local_module("crashdrv.so"), "--", fn, NULL);
    E2E_EXPECT(&r, 1);
    const char *says[] = {"worker 0", "crashdrv.so", fn, signame};
    for (size_t i = 0; i < 4; i++)
        cr_assert(e2e_has(r.out, says[i]) || e2e_has(r.err, says[i]),
                  "no '%s' in\nstdout:\n%s\nstderr:\n%s", says[i], r.out, r.err);
    char ok[64];
    snprintf(ok, sizeof ok, "echo after %s: ok", fn);
    cr_assert(e2e_has(r.out, ok), "the cluster did not serve the next call:\n%s\n%s",
              r.out, r.err);
    e2e_run_fini(&r);
    e2e_ferry(&r, E2E_CMD_MS, "status", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "restarted 1x") && e2e_has(r.out, signame), "%s", r.out);
    e2e_run_fini(&r);
}

Test(e2e_fail, a_segfaulting_function_is_named_and_its_worker_restarted)
{
    crash_through_the_cli("segv", "SIGSEGV");
}

Test(e2e_fail, an_aborting_function_is_named_and_its_worker_restarted)
{
    crash_through_the_cli("abort", "SIGABRT");
}

Test(e2e_fail, a_crash_through_the_library_names_worker_module_function_signal)
{
    e2e_start(2);
    cluster *cl = e2e_cluster(NULL, 20000);
    cr_assert(cluster_wait_ready(cl, 5000) == 0, "%s", cluster_error(cl));
    cluster_module m = {0};
    load(cl, e2e_module("faulty.so"), "faulty.so", &m);
    pid_t before = e2e_worker_pid(cl, 1);
    ferry_bytes_t out = {0};
    int rc = cluster_call(cl, &m, 1, "segv", NULL, &out);
    cr_assert(rc != 0, "a segfault succeeded");
    const char *e = cluster_error(cl);
    cr_assert(e2e_has(e, "worker 1") && e2e_has(e, "faulty.so") && e2e_has(e, "segv") &&
                  e2e_has(e, "SIGSEGV"),
              "%s", e);
    expect_echo(cl, &m, 1);
    cr_assert(e2e_worker_pid(cl, 1) != before, "worker 1 was not restarted");
    /* Every worker takes part again. */
    ferry_bytes_t all[2] = {0};
    rc = cluster_call_all(cl, &m, "echo", NULL, all);
    cr_assert(rc == 0, "%s", cluster_error(cl));
    cluster_free_bytes(&all[0]);
    cluster_free_bytes(&all[1]);
    cluster_module_fini(&m);
}

Test(e2e_fail, a_worker_killed_mid_call_fails_the_call_by_name_within_the_timeout)
{
    e2e_start(2);
    const int64_t timeout_ms = 15000;
    cluster *cl = e2e_cluster(NULL, timeout_ms);
    cr_assert(cluster_wait_ready(cl, 5000) == 0, "%s", cluster_error(cl));
    cluster_module m = {0};
    load(cl, e2e_module("faulty.so"), "faulty.so", &m);
    pid_t victim = e2e_worker_pid(cl, 1);
    pid_t killer = fork();
    cr_assert(killer >= 0);
    if (killer == 0) {
        usleep(300 * 1000);
        kill(victim, SIGKILL);
        _exit(0);
    }
    ferry_bytes_t in = {.data = "10000", .len = 5}, out = {0};
    double t0 = now_ms();
    int rc = cluster_call(cl, &m, 1, "sleep", &in, &out);
    double took = now_ms() - t0;
    waitpid(killer, NULL, 0);
    cr_assert(rc != 0, "the call survived its worker");
    const char *e = cluster_error(cl);
    cr_assert(e2e_has(e, "worker 1") && e2e_has(e, cluster_target(cl, 1)), "%s", e);
    cr_assert(took < (double)timeout_ms, "took %.0f ms", took);
    /* Its supervisor brings it back. */
    expect_echo(cl, &m, 1);
    cluster_module_fini(&m);
}

/* Not waited for: the heartbeat gives up on the worker (two Pings missed,
 * 1 s each) and fails its call with that reason, before the call's own 3 s
 * deadline would have. */
Test(e2e_fail, a_hung_worker_is_named_not_waited_for)
{
    e2e_start(2);
    cluster *cl = e2e_cluster(NULL, 3000);
    cr_assert(cluster_wait_ready(cl, 5000) == 0, "%s", cluster_error(cl));
    cluster_module m = {0};
    load(cl, e2e_module("faulty.so"), "faulty.so", &m);
    pid_t frozen = e2e_worker_pid(cl, 0);
    cr_assert(kill(frozen, SIGSTOP) == 0);
    double t0 = now_ms();
    ferry_bytes_t in = {.data = "x", .len = 1}, out = {0};
    int rc = cluster_call(cl, &m, 0, "echo", &in, &out);
    double took = now_ms() - t0;
    kill(frozen, SIGCONT);
    cr_assert(rc != 0, "a stopped worker answered");
    const char *e = cluster_error(cl);
    cr_assert(e2e_has(e, "worker 0") && e2e_has(e, cluster_target(cl, 0)), "%s", e);
    cr_assert(e2e_has(e, "stopped answering pings"), "not the heartbeat's failure: %s", e);
    /* Liveness, with a wide margin for a loaded machine. */
    cr_assert(took < 10000, "took %.0f ms: %s", took, e);
    expect_echo(cl, &m, 1);
    cluster_module_fini(&m);
}

Test(e2e_fail, a_wrong_token_is_refused_through_the_library)
{
    e2e_start(1);
    cluster *cl = e2e_cluster(
        "0000000000000000000000000000000000000000000000000000000000000000", 5000);
    /* Ping needs no token: the worker is there. */
    cr_assert(cluster_wait_ready(cl, 5000) == 0, "%s", cluster_error(cl));
    size_t len;
    void *bytes = slurp_module(e2e_module("faulty.so"), &len);
    cluster_module m = {0};
    int rc = cluster_load_module(cl, "faulty.so", bytes, len, &m);
    free(bytes);
    cr_assert(rc == FERRY_EUNAUTH, "rc %s: %s", ferry_err_name(rc), cluster_error(cl));
    cr_assert(e2e_has(cluster_error(cl), "worker 0"), "%s", cluster_error(cl));
    cluster_module_fini(&m);
    /* The worker logged the refusal; the line reaches the log through its
     * supervisor, a moment later. */
    bool logged = false;
    for (int i = 0; i < 200 && !logged; i++) {
        char *text = e2e_slurp_log("worker-0.log");
        logged = text && e2e_has(text, "refused " PROTO_METHOD_LOAD_MODULE " from ") &&
                 e2e_has(text, "wrong cluster token");
        free(text);
        if (!logged)
            usleep(10000);
    }
    cr_assert(logged, "the worker did not log the refused call");
}

Test(e2e_fail, a_wrong_token_is_refused_through_the_cli)
{
    e2e_start(1);
    char token[600];
    snprintf(token, sizeof token, "%s/token", e2e_home);
    cr_assert(conf_token_create(token) == 0, "cannot replace the token");
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("hello"), NULL);
    E2E_EXPECT(&r, 1);
    /* The README: a wrong token is refused UNAUTHENTICATED, and says so. */
    cr_assert(e2e_has(r.err, "UNAUTHENTICATED") && e2e_has(r.err, "wrong cluster token"),
              "%s", r.err);
    e2e_run_fini(&r);
}

Test(e2e_fail, a_functions_own_error_text_reaches_the_driver)
{
    e2e_start(1);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_local_module("crashdrv.so"), "--", "fail",
              NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.out, "refused on purpose by rank 0"), "%s\n%s", r.out, r.err);
    cr_assert(e2e_has(r.out, "echo after fail: ok"), "%s", r.out);
    e2e_run_fini(&r);
}

Test(e2e_fail, an_unknown_function_is_named_with_what_the_module_has)
{
    e2e_start(1);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_local_module("crashdrv.so"), "--", "nosuch",
              NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.out, "no function 'nosuch'") && e2e_has(r.out, "echo"), "%s\n%s",
              r.out, r.err);
    cr_assert(e2e_has(r.out, "echo after nosuch: ok"), "%s", r.out);
    e2e_run_fini(&r);
}

Test(e2e_fail, a_worker_killed_during_submit_fails_it_by_name)
{
    e2e_start(2);
    cluster *cl = e2e_cluster(NULL, 20000);
    pid_t victim = e2e_worker_pid(cl, 1);
    pid_t killer = fork();
    cr_assert(killer >= 0);
    if (killer == 0) {
        usleep(500 * 1000);
        kill(victim, SIGKILL);
        _exit(0);
    }
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("sleep"), "--", "10000", "1", NULL);
    waitpid(killer, NULL, 0);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, "worker 1") && e2e_has(r.err, cluster_target(cl, 1)), "%s",
              r.err);
    cr_assert(r.ms < 9000, "took %.0f ms: the call waited for the sleep", r.ms);
    e2e_run_fini(&r);
    /* The supervisor brought it back; the cluster serves. */
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("hello"), NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
}

Test(e2e_fail, a_worker_that_exits_mid_call_is_restarted)
{
    e2e_start(1);
    pid_t before = e2e_worker_pid_file(0);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_local_module("crashdrv.so"), "--", "exit",
              NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.out, "exit failed: worker 0"), "%s\n%s", r.out, r.err);
    cr_assert(e2e_has(r.out, "echo after exit: ok"), "%s\n%s", r.out, r.err);
    e2e_run_fini(&r);
    cr_assert(e2e_worker_pid_file(0) != before, "the worker was not restarted");
}

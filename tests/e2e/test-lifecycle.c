/* tests/e2e — start, status, submit, shutdown through the `ferry` command,
 * and what each says when it cannot do its job. */
#include "e2e.h"
#include "tcommon.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/config.h"

TestSuite(e2e_cli, .init = e2e_setup, .fini = e2e_teardown, .timeout = 120);

/* Every pid named in `ferry status --json` output. */
static size_t json_pids(const char *json, pid_t *pids, size_t max)
{
    size_t n = 0;
    for (const char *p = json; n < max && (p = strstr(p, "\"pid\":")); p += 6)
        pids[n++] = (pid_t)atoi(p + 6);
    return n;
}

Test(e2e_cli, every_command_has_help_and_version)
{
    const char *cmds[] = {"start", "status", "submit", "shutdown", "worker"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        e2e_run r;
        e2e_ferry(&r, E2E_CMD_MS, cmds[i], "--help", NULL);
        E2E_EXPECT(&r, 0);
        cr_assert(e2e_has(r.out, "usage: ferry") || e2e_has(r.out, "usage:"),
                  "%s --help printed:\n%s", cmds[i], r.out);
        e2e_run_fini(&r);
        e2e_ferry(&r, E2E_CMD_MS, cmds[i], "--version", NULL);
        E2E_EXPECT(&r, 0);
        cr_assert(e2e_has(r.out, "ferry "), "%s --version printed:\n%s", cmds[i], r.out);
        e2e_run_fini(&r);
    }
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "--help", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "start N"));
    e2e_run_fini(&r);
    e2e_ferry(&r, E2E_CMD_MS, "frobnicate", NULL);
    E2E_EXPECT(&r, 2);
    cr_assert(e2e_has(r.err, "unknown command 'frobnicate'"), "%s", r.err);
    e2e_run_fini(&r);
}

Test(e2e_cli, start_status_submit_hello_shutdown_leaves_nothing_running)
{
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "3", "--base-port", "0", NULL);
    E2E_EXPECT(&r, 0);
    for (int i = 0; i < 3; i++) {
        char line[32];
        snprintf(line, sizeof line, "worker %d  127.0.0.1:", i);
        cr_assert(e2e_has(r.out, line), "no '%s' in:\n%s", line, r.out);
    }
    e2e_run_fini(&r);
    pid_t sup = e2e_supervisor_pid();
    cr_assert(sup > 0 && e2e_alive(sup), "no supervisor after start");

    e2e_ferry(&r, E2E_CMD_MS, "status", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "RANK") && e2e_has(r.out, "HEALTH"), "%s", r.out);
    cr_assert(e2e_has(r.out, "cpu"), "no device in:\n%s", r.out);
    e2e_run_fini(&r);

    e2e_ferry(&r, E2E_CMD_MS, "status", "--json", NULL);
    E2E_EXPECT(&r, 0);
    pid_t pids[8];
    size_t n = json_pids(r.out, pids, 8);
    cr_assert(n == 3, "%zu pids in:\n%s", n, r.out);
    cr_assert(!e2e_has(r.out, "\"alive\":false"), "%s", r.out);
    e2e_run_fini(&r);

    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("hello"), NULL);
    E2E_EXPECT(&r, 0);
    for (size_t i = 0; i < n; i++) {
        char pid[32];
        snprintf(pid, sizeof pid, "%d", (int)pids[i]);
        cr_assert(e2e_has(r.out, pid), "worker pid %s not in hello's output:\n%s", pid,
                  r.out);
    }
    e2e_run_fini(&r);

    e2e_ferry(&r, E2E_CMD_MS, "status", "--json", NULL);
    cr_assert(e2e_has(r.out, "\"calls_served\":1"), "hello served no call:\n%s", r.out);
    e2e_run_fini(&r);

    e2e_ferry(&r, E2E_CMD_MS, "shutdown", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "3 worker(s) stopped"), "%s", r.out);
    e2e_run_fini(&r);
    for (size_t i = 0; i < n; i++)
        cr_assert(e2e_wait_gone(pids[i], 5000), "worker pid %d still runs", (int)pids[i]);
    cr_assert(e2e_wait_gone(sup, 5000), "supervisor %d still runs", (int)sup);
    char state[600];
    snprintf(state, sizeof state, "%s/cluster.ini", e2e_home);
    cr_assert(access(state, F_OK) != 0, "cluster.ini left behind");
    snprintf(state, sizeof state, "%s/token", e2e_home);
    cr_assert(access(state, F_OK) != 0, "token left behind");

    e2e_ferry(&r, E2E_CMD_MS, "shutdown", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.err, "no cluster is running"), "%s", r.err);
    e2e_run_fini(&r);
    e2e_ferry(&r, E2E_CMD_MS, "status", NULL);
    E2E_EXPECT(&r, 1);
    e2e_run_fini(&r);
}

Test(e2e_cli, a_second_start_under_the_same_home_is_refused)
{
    e2e_start(1);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "2", "--base-port", "0", NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, "already running"), "%s", r.err);
    e2e_run_fini(&r);
    /* The first cluster is untouched. */
    e2e_ferry(&r, E2E_CMD_MS, "status", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
}

Test(e2e_cli, submit_with_no_cluster_says_how_to_start_one)
{
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("hello"), NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, "no cluster is running") && e2e_has(r.err, "ferry start"),
              "%s", r.err);
    e2e_run_fini(&r);
}

Test(e2e_cli, a_taken_port_is_named_and_nothing_starts)
{
    /* A taken port whose neighbour below is free: tests beside this one
     * take ephemeral ports too, so the neighbour is checked, and let go
     * only just before the start. */
    int fd = -1, taken = 0;
    for (int tries = 0; tries < 50 && fd < 0; tries++) {
        taken = tcom_listen(0, &fd);
        cr_assert(taken > 0);
        int below;
        if (taken > 1024 && tcom_listen(taken - 1, &below) > 0) {
            close(below);
        } else {
            close(fd);
            fd = -1;
        }
    }
    cr_assert(fd >= 0, "no free port with a free port below it");
    char base[16], want[64];
    /* Worker 1 of 2 lands on the taken port. */
    snprintf(base, sizeof base, "%d", taken - 1);
    snprintf(want, sizeof want, "port %d (worker 1", taken);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "2", "--base-port", base, NULL);
    close(fd);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, want) && e2e_has(r.err, "in use"), "%s", r.err);
    e2e_run_fini(&r);
    cr_assert(e2e_supervisor_pid() == 0, "a supervisor was left for a failed start");
    e2e_ferry(&r, E2E_CMD_MS, "status", NULL);
    E2E_EXPECT(&r, 1);
    e2e_run_fini(&r);
}

Test(e2e_cli, a_config_file_mistake_names_file_and_line)
{
    char path[600];
    snprintf(path, sizeof path, "%s-bad.ini", e2e_home);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("[cluster]\ncall_timeout_ms = 5000\nping_timeout_ms = soon\n", f);
    fclose(f);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "--config", path, NULL);
    unlink(path);
    E2E_EXPECT(&r, 2);
    char want[640];
    snprintf(want, sizeof want, "%s:3:", path);
    cr_assert(e2e_has(r.err, want) && e2e_has(r.err, "ping_timeout_ms"), "%s", r.err);
    e2e_run_fini(&r);
}

Test(e2e_cli, a_config_file_lists_the_workers)
{
    int ports[2] = {tcom_free_port(), tcom_free_port()};
    char path[600];
    snprintf(path, sizeof path, "%s-ok.ini", e2e_home);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f,
            "# two local workers\n[cluster]\ncall_timeout_ms = 20000\n\n[workers]\n"
            "worker = 127.0.0.1:%d\nworker = 127.0.0.1:%d\n",
            ports[0], ports[1]);
    fclose(f);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "--config", path, NULL);
    unlink(path);
    E2E_EXPECT(&r, 0);
    char want[64];
    snprintf(want, sizeof want, "worker 1  127.0.0.1:%d", ports[1]);
    cr_assert(e2e_has(r.out, want), "%s", r.out);
    e2e_run_fini(&r);
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("hello"), NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
}

Test(e2e_cli, matmul_checksums_verify_and_json_is_one_object)
{
    e2e_start(2);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("matmul"), "--json", "--", "64", "8",
              NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "\"task\":\"matmul\""), "%s", r.out);
    cr_assert(e2e_has(r.out, "\"verified\":8"), "%s", r.out);
    e2e_run_fini(&r);
}

Test(e2e_cli, a_module_with_no_driver_lists_what_it_exports)
{
    e2e_start(1);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_module("faulty.so"), NULL);
    E2E_EXPECT(&r, 2);
    cr_assert(e2e_has(r.err, "no driver") && e2e_has(r.err, "echo") &&
                  e2e_has(r.err, "segv"),
              "%s", r.err);
    e2e_run_fini(&r);
}

Test(e2e_cli, bad_modules_get_clear_errors_and_the_cluster_keeps_working)
{
    e2e_start(1);
    static const struct {
        const char *module, *says;
    } bad[] = {
        {"notelf.so", "not an ELF"},           {"truncated.so", "truncated ELF"},
        {"nodesc.so", "no ferry_task symbol"}, {"badabi.so", "ABI version 99"},
        {"missing.so", "cannot read"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e2e_run r;
        e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_module(bad[i].module), NULL);
        cr_assert(r.status == 1, "%s: exit %d\n%s", bad[i].module, r.status, r.err);
        cr_assert(e2e_has(r.err, bad[i].says), "%s: no '%s' in:\n%s", bad[i].module,
                  bad[i].says, r.err);
        e2e_run_fini(&r);
    }
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("hello"), NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
}

Test(e2e_cli, a_plugin_built_with_pkg_config_alone_runs)
{
    const char *pcdir = getenv("FERRY_TEST_PKGCONFIG");
    const char *src = getenv("FERRY_TEST_HELLO_SRC");
    cr_assert(pcdir && src, "FERRY_TEST_PKGCONFIG / FERRY_TEST_HELLO_SRC not set");
    char so[600], cmd[2048];
    snprintf(so, sizeof so, "%s-user.so", e2e_home);
    snprintf(cmd, sizeof cmd,
             "PKG_CONFIG_PATH='%s' cc -shared -fPIC -fvisibility=hidden -o '%s' '%s' "
             "$(PKG_CONFIG_PATH='%s' pkg-config --cflags --libs ferry-uninstalled) 2>&1",
             pcdir, so, src, pcdir);
    cr_assert(system(cmd) == 0, "the user's build failed: %s", cmd);
    e2e_start(2);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", so, NULL);
    unlink(so);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "rank 1"), "%s", r.out);
    e2e_run_fini(&r);
}

Test(e2e_cli, attached_workers_are_waited_for_served_and_stopped)
{
    /* A worker someone else runs, as on another host or in a container. */
    char token[600], port_file[600], state[600];
    snprintf(token, sizeof token, "%s-token", e2e_home);
    snprintf(port_file, sizeof port_file, "%s-port", e2e_home);
    snprintf(state, sizeof state, "%s-attached", e2e_home);
    cr_assert(conf_token_create(token) == 0);
    pid_t attached = e2e_spawn("worker", "--listen", "127.0.0.1:0", "--token-file", token,
                               "--port-file", port_file, "--state-dir", state, NULL);
    char *port = NULL;
    for (int i = 0; i < 1000 && !(port = e2e_slurp(port_file)); i++)
        usleep(10000);
    cr_assert(port, "the attached worker never wrote its port");

    int local_port = tcom_free_port();
    char path[600];
    snprintf(path, sizeof path, "%s-attach.ini", e2e_home);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f,
            "[cluster]\ntoken_file = %s\n\n[workers]\nworker = 127.0.0.1:%d\nattach = "
            "127.0.0.1:%d\n",
            token, local_port, atoi(port));
    fclose(f);
    free(port);

    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "--config", path, NULL);
    E2E_EXPECT(&r, 0);
    char want[64];
    snprintf(want, sizeof want, "pid %d", (int)attached);
    cr_assert(e2e_has(r.out, want), "the attached worker is not rank 1:\n%s", r.out);
    e2e_run_fini(&r);

    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("hello"), NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "rank 1") && e2e_has(r.out, want + 4), "%s", r.out);
    e2e_run_fini(&r);

    e2e_ferry(&r, E2E_CMD_MS, "shutdown", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    cr_assert(e2e_wait_gone(attached, 5000), "the attached worker still runs");
    cr_assert(access(token, F_OK) == 0, "shutdown removed the user's own token file");
    unlink(token);
    unlink(path);
}

Test(e2e_cli, submit_takes_a_bare_file_name_in_the_current_directory)
{
    e2e_start(1);
    cr_assert(chdir(getenv("FERRY_TEST_TASKS")) == 0);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", "hello.so", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "rank 0"), "%s", r.out);
    e2e_run_fini(&r);
}

Test(e2e_cli, workers_listen_on_ipv6_loopback)
{
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "2", "--listen", "::1", "--base-port", "0", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "worker 1  [::1]:"), "%s", r.out);
    e2e_run_fini(&r);
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("hello"), NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "rank 1"), "%s", r.out);
    e2e_run_fini(&r);
}

Test(e2e_cli, shutdown_cancels_calls_in_flight_and_leaves_nothing)
{
    e2e_start(1);
    pid_t worker = e2e_worker_pid_file(0);
    pid_t submit = e2e_spawn("submit", e2e_task("sleep"), "--", "60000", "1", NULL);
    /* Until the long call runs on the worker. */
    bool running = false;
    for (int i = 0; i < 500 && !running; i++) {
        e2e_run r;
        e2e_ferry(&r, E2E_CMD_MS, "status", "--json", NULL);
        running = e2e_has(r.out, "\"in_flight\":1");
        e2e_run_fini(&r);
        if (!running)
            usleep(20000);
    }
    cr_assert(running, "the sleep never started");
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "shutdown", "--grace-ms", "200", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(r.ms < 20000, "shutdown took %.0f ms: it waited for the call", r.ms);
    e2e_run_fini(&r);
    int status;
    cr_assert(waitpid(submit, &status, 0) == submit);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1,
              "submit should fail once its call is cancelled (status %d)", status);
    cr_assert(e2e_wait_gone(worker, 5000), "the worker still runs");
}

Test(e2e_cli, two_clusters_with_different_homes_run_side_by_side)
{
    e2e_start(2);
    e2e_use_home(1);
    e2e_start(1);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "status", "--json", NULL);
    E2E_EXPECT(&r, 0);
    pid_t pids[4];
    cr_assert(json_pids(r.out, pids, 4) == 1, "the second home sees:\n%s", r.out);
    e2e_run_fini(&r);
    e2e_ferry(&r, E2E_CMD_MS, "shutdown", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);

    e2e_use_home(0);
    e2e_ferry(&r, E2E_CMD_MS, "status", "--json", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(json_pids(r.out, pids, 4) == 2, "the first cluster changed:\n%s", r.out);
    e2e_run_fini(&r);
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_task("hello"), NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
}

Test(e2e_cli, workers_follow_a_killed_supervisor_and_shutdown_cleans_up)
{
    e2e_start(2);
    pid_t sup = e2e_supervisor_pid(), w0 = e2e_worker_pid_file(0),
          w1 = e2e_worker_pid_file(1);
    cr_assert(sup > 0 && w0 > 0 && w1 > 0);
    kill(sup, SIGKILL);
    cr_assert(e2e_wait_gone(sup, 5000));
    cr_assert(e2e_wait_gone(w0, 10000) && e2e_wait_gone(w1, 10000),
              "orphaned workers still run");
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "shutdown", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    char state[600];
    snprintf(state, sizeof state, "%s/cluster.ini", e2e_home);
    cr_assert(access(state, F_OK) != 0, "cluster.ini left behind");
}

Test(e2e_cli, shutdown_stops_a_cluster_whose_start_was_interrupted)
{
    e2e_start(1);
    pid_t sup = e2e_supervisor_pid(), worker = e2e_worker_pid_file(0);
    /* As if `ferry start` had died before it wrote the cluster's state. */
    char state[600];
    snprintf(state, sizeof state, "%s/cluster.ini", e2e_home);
    cr_assert(unlink(state) == 0);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "1", "--base-port", "0", NULL);
    E2E_EXPECT(&r, 1);
    char want[64];
    snprintf(want, sizeof want, "supervisor pid %d", (int)sup);
    cr_assert(e2e_has(r.err, "already running") && e2e_has(r.err, want), "%s", r.err);
    e2e_run_fini(&r);
    e2e_ferry(&r, E2E_CMD_MS, "shutdown", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.err, "state was missing"), "%s", r.err);
    e2e_run_fini(&r);
    cr_assert(e2e_wait_gone(sup, 5000) && e2e_wait_gone(worker, 5000), "left running");
    e2e_start(1);
}

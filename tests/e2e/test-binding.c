/* tests/e2e — `ferry start --bind-to core` binds each local worker, every
 * thread of it, to its share of the CPUs start may use (what this test
 * process may use: the supervisor inherits it); by default, or with
 * --bind-to none, the workers may run anywhere; a bad policy or CPU list
 * is a usage error. */
#include "e2e.h"

#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

TestSuite(e2e_bind, .init = e2e_setup, .fini = e2e_teardown, .timeout = 120);

/* The Cpus_allowed_list of every thread of `pid` must be `want`. */
static void expect_threads_on(pid_t pid, const char *want, const char *what)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    cr_assert(d, "%s: no %s", what, dir);
    int threads = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[400];
        snprintf(path, sizeof path, "%s/%s/status", dir, e->d_name);
        char *status = e2e_slurp(path);
        if (!status) /* a thread that has just ended */
            continue;
        const char *at = strstr(status, "Cpus_allowed_list:");
        cr_assert(at, "%s: no Cpus_allowed_list in %s", what, path);
        char list[256] = "";
        sscanf(at + strlen("Cpus_allowed_list:"), " %255s", list);
        free(status);
        cr_assert_str_eq(list, want, "%s: thread %s runs on %s, want %s", what, e->d_name,
                         list, want);
        threads++;
    }
    closedir(d);
    cr_assert(threads > 1, "%s: %d thread(s): the worker should have started some", what,
              threads);
}

static void own_cpus(cpu_set_t *avail, char *list, size_t len)
{
    cr_assert(sched_getaffinity(0, sizeof *avail, avail) == 0);
    conf_cpus_format(list, len, avail);
}

Test(e2e_bind, each_local_worker_runs_on_its_own_share_of_the_cpus)
{
    cpu_set_t avail;
    char all[256];
    own_cpus(&avail, all, sizeof all);
    if (CPU_COUNT(&avail) < 2)
        cr_log_warn("only CPU %s here: both workers share it, as bound as can be", all);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "2", "--base-port", "0", "--bind-to", "core", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    for (int i = 0; i < 2; i++) {
        cpu_set_t mine;
        char want[256], what[32];
        conf_cpus_share(&avail, (size_t)i, 2, &mine);
        conf_cpus_format(want, sizeof want, &mine);
        snprintf(what, sizeof what, "worker %d", i);
        expect_threads_on(e2e_worker_pid_file(i), want, what);
    }
}

Test(e2e_bind, by_default_and_with_bind_to_none_the_workers_run_on_every_cpu)
{
    cpu_set_t avail;
    char all[256];
    own_cpus(&avail, all, sizeof all);
    e2e_start(2);
    expect_threads_on(e2e_worker_pid_file(0), all, "worker 0, by default");
    expect_threads_on(e2e_worker_pid_file(1), all, "worker 1, by default");
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "shutdown", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    e2e_ferry(&r, E2E_CMD_MS, "start", "2", "--base-port", "0", "--bind-to", "none", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    expect_threads_on(e2e_worker_pid_file(0), all, "worker 0, --bind-to none");
    expect_threads_on(e2e_worker_pid_file(1), all, "worker 1, --bind-to none");
}

Test(e2e_bind, a_bad_policy_or_cpu_list_is_a_usage_error)
{
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "2", "--bind-to", "socket", NULL);
    E2E_EXPECT(&r, 2);
    cr_assert(e2e_has(r.err, "--bind-to: expected core or none, got 'socket'"), "%s",
              r.err);
    e2e_run_fini(&r);
    e2e_ferry(&r, E2E_CMD_MS, "worker", "--listen", "127.0.0.1:0", "--cpus", "3-1", NULL);
    E2E_EXPECT(&r, 2);
    cr_assert(e2e_has(r.err, "--cpus: expected a CPU list"), "%s", r.err);
    e2e_run_fini(&r);
}

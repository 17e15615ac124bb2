/* A cluster that grows while it trains: `ferry start --add 1` starts a
 * worker under the running cluster's supervisor, and a sync run with
 * --min-workers and --checkpoint-dir takes it in at its next checkpoint,
 * every rank beginning anew from there on the larger count; the run ends
 * well with the same parameters on every rank, and `ferry shutdown`
 * leaves nothing running. Also what `start --add` refuses. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "../e2e/e2e.h"
#include "faults.h"

static pid_t stopped_submit, stopped_worker;

/* A submitter or worker the test stopped goes on before the cluster is
 * shut down. */
static void teardown(void)
{
    if (stopped_submit > 0)
        kill(stopped_submit, SIGCONT);
    if (stopped_worker > 0)
        kill(stopped_worker, SIGCONT);
    stopped_submit = stopped_worker = 0;
    e2e_teardown();
}

TestSuite(faults_grow, .init = e2e_setup, .fini = teardown, .timeout = 400);

#define EPOCHS "600"
#define RUN_MS 240000

/* The number after `key` in a --json output; -1 when absent. */
static double json_number(const char *json, const char *key)
{
    const char *at = json ? strstr(json, key) : NULL;
    return at ? strtod(at + strlen(key), NULL) : -1;
}

Test(faults_grow, a_worker_added_while_training_is_taken_in_at_a_checkpoint)
{
    e2e_start(2);
    char dir[600];
    snprintf(dir, sizeof dir, "%s/ck-grow", e2e_home);
    pid_t sub = faults_submit("grow", dir, EPOCHS, "--min-workers", "2", NULL);
    cr_assert(faults_wait_checkpoint(dir, 60000), "no checkpoint");
    /* Held while the worker is added, so that checkpoints are left to take
     * it in at, however slow this machine is today. */
    cr_assert(e2e_alive(sub) && kill(sub, SIGSTOP) == 0, "the run ended too soon");
    stopped_submit = sub;
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "--add", "1", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "worker 2  127.0.0.1:") &&
                  e2e_has(r.out, "1 worker(s) added: the cluster has 3"),
              "%s", r.out);
    e2e_run_fini(&r);
    kill(sub, SIGCONT);
    stopped_submit = 0;

    int st = faults_wait(sub, RUN_MS);
    char *out = faults_output("grow", "out"), *err = faults_output("grow", "err");
    cr_assert(st == 0, "the run failed (%d):\n%s", st, err);
    cr_assert(e2e_has(err, "worker 2 (127.0.0.1:") &&
                  e2e_has(err, ") joined: taken in after epoch") &&
                  e2e_has(err, "on 3 workers"),
              "the added worker was not taken in:\n%s", err);
    cr_assert(e2e_has(out, "\"params_identical\":true"), "%s", out);
    /* The run ended on the workers it grew to, and says what it began on. */
    cr_assert(json_number(out, "\"workers\":") == 3 &&
                  json_number(out, "\"workers_at_start\":") == 2,
              "%s", out);
    /* linreg learns its line: the fit is as good as a run that did not grow. */
    double loss = json_number(out, "\"test_loss\":");
    double werr = json_number(out, "\"weight_error\":");
    cr_assert(loss >= 0 && loss < 0.02 && werr >= 0 && werr < 0.02, "%s", out);
    free(out);
    free(err);

    e2e_ferry(&r, E2E_CMD_MS, "status", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "\n2 "), "status does not show worker 2:\n%s", r.out);
    e2e_run_fini(&r);
    pid_t added = e2e_worker_pid_file(2), sup = e2e_supervisor_pid();
    cr_assert(added > 0 && e2e_alive(added));
    e2e_ferry(&r, E2E_CMD_MS, "shutdown", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "3 worker(s) stopped"), "%s", r.out);
    e2e_run_fini(&r);
    e2e_expect_nothing_left(sup, &added, 1, 10000);
}

/* `ferry start ARGS...` fails with `status`, its error saying `why`. */
static void refused(int status, const char *why, const char *a1, const char *a2,
                    const char *a3)
{
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", a1, a2, a3, NULL);
    E2E_EXPECT(&r, status);
    cr_assert(e2e_has(r.err, why), "expected '%s' in:\n%s", why, r.err);
    e2e_run_fini(&r);
}

Test(faults_grow, start_add_refuses_what_it_cannot_do)
{
    refused(1, "--add: no cluster is running under FERRY_HOME=", "--add", "1", NULL);
    refused(2, "--add: expected a number of workers 1..256, got '0'", "--add", "0", NULL);
    refused(2, "--add: expected a number of workers 1..256, got 'x'", "--add", "x", NULL);
    refused(2, "--add K takes only --timeout-ms", "2", "--add", "1");
    e2e_start(2);
    refused(1, "--add 255: the cluster has 2 workers and takes at most 256", "--add",
            "255", NULL);
    /* Another add under way holds the lock: this one does not wait. */
    char lock[700];
    snprintf(lock, sizeof lock, "%s/grow.lock", e2e_home);
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    cr_assert(fd >= 0 && flock(fd, LOCK_EX) == 0);
    refused(1, "--add: another `ferry start --add` is adding workers", "--add", "1",
            NULL);
    close(fd);
    /* Nothing was added by any of them. */
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "status", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "\n1 ") && !e2e_has(r.out, "\n2 "), "%s", r.out);
    e2e_run_fini(&r);
}

/* An add answers for the workers it adds: an older worker that does not
 * answer (stopped here) is `status`'s to show, not a failed add. */
Test(faults_grow, an_add_succeeds_while_an_older_worker_does_not_answer)
{
    e2e_start(2);
    pid_t w = e2e_worker_pid_file(1);
    cr_assert(w > 0 && kill(w, SIGSTOP) == 0);
    stopped_worker = w;
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "--add", "1", "--timeout-ms", "20000", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "worker 2  127.0.0.1:") &&
                  e2e_has(r.out, "1 worker(s) added: the cluster has 3") &&
                  !e2e_has(r.out, "worker 1  "),
              "%s\n%s", r.out, r.err);
    e2e_run_fini(&r);
    kill(w, SIGCONT);
    stopped_worker = 0;
}

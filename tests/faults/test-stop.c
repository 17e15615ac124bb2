/* `ferry shutdown` and Ctrl-C of `ferry submit` in the middle of training
 * that writes checkpoints: nothing of the cluster is left running after
 * the shutdown, the submit is gone after its SIGINT, and every checkpoint
 * left reads back whole. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../e2e/e2e.h"
#include "../e2e/e2e_ckpt.h"
#include "faults.h"

TestSuite(faults_stop, .init = e2e_setup, .fini = e2e_teardown, .timeout = 300);

/* An endless run on 2 workers (`tag` its outputs' and directory's name),
 * once it wrote its first checkpoint into dir. */
static pid_t training(const char *tag, char dir[600])
{
    e2e_start(2);
    snprintf(dir, 600, "%s/ck-%s", e2e_home, tag);
    pid_t sub = faults_submit(tag, dir, "100000", NULL);
    cr_assert(faults_wait_checkpoint(dir, 60000), "no checkpoint");
    return sub;
}

Test(faults_stop, shutdown_during_training_leaves_nothing_and_whole_checkpoints)
{
    char dir[600];
    pid_t sub = training("shutdown", dir);
    pid_t sup = e2e_supervisor_pid();
    cr_assert(sup > 0);
    e2e_run r;
    e2e_ferry(&r, 60000, "shutdown", NULL);
    cr_assert_eq(r.status, 0, "%s\n%s", r.out, r.err);
    e2e_run_fini(&r);
    /* Within the wait a lost worker would get: a shutdown is not waited out. */
    int st = faults_wait(sub, 15000);
    char *err = faults_output("shutdown", "err");
    cr_assert(st > 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0,
              "the submit did not fail with its cluster (%d):\n%s", st, err);
    cr_assert(e2e_has(err, "the last checkpoint is "), "%s", err);
    free(err);
    e2e_expect_nothing_left(sup, &sub, 1, 10000);
    e2e_ckpt_expect_whole(dir, "after ferry shutdown");
}

Test(faults_stop, sigint_of_submit_during_training_leaves_whole_checkpoints)
{
    char dir[600];
    pid_t sub = training("sigint", dir);
    cr_assert_eq(kill(sub, SIGINT), 0);
    int st = faults_wait(sub, 30000);
    cr_assert(st > 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGINT, "status %d", st);
    char *err = faults_output("sigint", "err");
    cr_assert(e2e_has(err, dir) && e2e_has(err, "--resume"), "%s", err);
    free(err);
    cr_assert(!e2e_alive(sub));
    e2e_ckpt_expect_resumes(dir, e2e_ckpt_expect_whole(dir, "after SIGINT"));
}

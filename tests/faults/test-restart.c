/* A worker lost in the middle of sync training does not end the run: a
 * SIGKILL of a random worker at a random moment is named, with the step and
 * phase the run was in, every rank goes
 * back to the last checkpoint, and the run ends with the parameters of its
 * twin that lost nothing (resuming is bit-identical on the cpu); a worker
 * that cannot come back is left out with --min-workers (and taken back in
 * at a checkpoint once it answers again), as is one down when the run
 * begins; --max-restarts 0
 * lets a lost worker end the run as before. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../e2e/e2e.h"
#include "faults.h"

static pid_t stopped_sup;

/* A supervisor stopped by a test goes on before the cluster is shut down. */
static void teardown(void)
{
    if (stopped_sup > 0)
        kill(stopped_sup, SIGCONT);
    stopped_sup = 0;
    e2e_teardown();
}

TestSuite(faults_restart, .init = e2e_setup, .fini = teardown, .timeout = 400);

#define EPOCHS  "150"
/* The elastic run's: enough left, once the run goes on without the worker,
 * for its supervisor to restart it (after a pause, as for a crash loop)
 * and for a checkpoint after that to take it back in. */
#define ELASTIC_EPOCHS "600"
#define RUN_MS  240000
#define WORKERS 3
/* The random SIGKILL's: four workers, as a run users make. */
#define KILL_WORKERS 4

static void dir_for(const char *tag, char *buf, size_t len)
{
    snprintf(buf, len, "%s/ck-%s", e2e_home, tag);
}

/* Whether `err` says worker `rank` was lost in a step and phase: "lost in
 * epoch E, step S, phase P (...)" with S > 0 and P a phase's name. */
static bool says_step_and_phase(const char *err, int rank)
{
    char mark[64];
    snprintf(mark, sizeof mark, "worker %d (", rank);
    const char *at = err ? strstr(err, mark) : NULL;
    const char *lost = at ? strstr(at, ") lost in epoch ") : NULL;
    int epoch = 0;
    unsigned long long step = 0;
    char phase[64] = "";
    return lost &&
           sscanf(lost, ") lost in epoch %d, step %llu, phase %63[^(:\n]", &epoch, &step,
                  phase) == 3 &&
           epoch > 0 && step > 0 && strlen(phase) > 2 &&
           strncmp(phase, "not recorded", 12) != 0;
}

/* The run without a fault: its parameters' digest. */
static void twin(char *sha, size_t len)
{
    char dir[600];
    dir_for("twin", dir, sizeof dir);
    int st = faults_wait(faults_submit("twin", dir, EPOCHS, NULL), RUN_MS);
    char *out = faults_output("twin", "out");
    cr_assert(st == 0 && faults_sha(out, sha, len), "the twin failed (%d): %s", st, out);
    free(out);
}

Test(faults_restart, sigkill_of_a_random_worker_is_undone_by_a_rollback)
{
    e2e_start(KILL_WORKERS);
    char want[80];
    twin(want, sizeof want);
    for (unsigned seed = 1; seed <= 2; seed++) {
        srand(20261128 + seed);
        char tag[32], dir[600];
        snprintf(tag, sizeof tag, "kill%u", seed);
        dir_for(tag, dir, sizeof dir);
        pid_t sub = faults_submit(tag, dir, EPOCHS, NULL);
        cr_assert(faults_wait_checkpoint(dir, 60000), "seed %u: no checkpoint", seed);
        usleep((useconds_t)(rand() % 400) * 1000);
        int rank = rand() % KILL_WORKERS;
        pid_t victim = e2e_worker_pid_file(rank);
        cr_assert(victim > 0 && e2e_alive(sub), "seed %u: the run ended too soon", seed);
        cr_assert_eq(kill(victim, SIGKILL), 0);
        int st = faults_wait(sub, RUN_MS);
        char *out = faults_output(tag, "out"), *err = faults_output(tag, "err");
        cr_assert(st == 0, "seed %u: the run failed (%d):\n%s", seed, st, err);
        char said[96];
        snprintf(said, sizeof said, "worker %d (", rank);
        cr_assert(e2e_has(err, said) && e2e_has(err, "killed by SIGKILL") &&
                      e2e_has(err, "restarted by its supervisor") &&
                      e2e_has(err, "every rank continues from"),
                  "seed %u: the restart of worker %d is not named:\n%s", seed, rank, err);
        cr_assert(says_step_and_phase(err, rank),
                  "seed %u: the step and phase worker %d was lost in are not said:\n%s",
                  seed, rank, err);
        char got[80];
        cr_assert(faults_sha(out, got, sizeof got), "%s", out);
        cr_assert_str_eq(got, want, "seed %u: the parameters differ from the twin's",
                         seed);
        free(out);
        free(err);
        cr_assert(e2e_wait_new_worker(rank, victim, 10000) > 0);
    }
}

/* Whether the run `tag` (process `sub`) says `text` within a minute. */
static bool said_while_running(const char *tag, pid_t sub, const char *text)
{
    bool said = false;
    for (int i = 0; i < 600 && !said && e2e_alive(sub); i++) {
        char *err = faults_output(tag, "err");
        said = e2e_has(err, text);
        free(err);
        if (!said)
            usleep(100000);
    }
    return said;
}

/* Worker 2's host comes back (its stopped supervisor goes on and starts
 * it): the run `tag` ends well, having said `without` (seen while it ran)
 * and then `taken` of worker 2, on 3 workers again. */
static void host_back_then_taken_in(const char *tag, pid_t sub, bool without,
                                    const char *taken)
{
    kill(stopped_sup, SIGCONT);
    stopped_sup = 0;
    int st = faults_wait(sub, RUN_MS);
    char *out = faults_output(tag, "out"), *err = faults_output(tag, "err");
    cr_assert(st == 0, "the run failed (%d):\n%s", st, err);
    cr_assert(without && e2e_has(err, "worker 2 ("),
              "the run did not go on without worker 2:\n%s", err);
    cr_assert(e2e_has(err, taken) && e2e_has(err, "on 3 workers"),
              "worker 2 was not taken in:\n%s", err);
    cr_assert(e2e_has(out, "\"params_sha256\""), "%s", out);
    free(out);
    free(err);
}

Test(faults_restart, a_worker_that_cannot_come_back_is_left_out_then_taken_back)
{
    e2e_start(WORKERS);
    char dir[600];
    dir_for("elastic", dir, sizeof dir);
    pid_t sub = faults_submit("elastic", dir, ELASTIC_EPOCHS, "--min-workers", "2", NULL);
    cr_assert(faults_wait_checkpoint(dir, 60000), "no checkpoint");
    /* Its host gone: nothing restarts the worker. */
    stopped_sup = e2e_supervisor_pid();
    cr_assert(stopped_sup > 0 && kill(stopped_sup, SIGSTOP) == 0);
    pid_t victim = e2e_worker_pid_file(2);
    cr_assert(victim > 0 && e2e_alive(sub), "the run ended too soon");
    cr_assert_eq(kill(victim, SIGKILL), 0);
    /* Once the run goes on without it, its host comes back: the worker is
     * restarted and taken in again at the next checkpoint. */
    bool without = said_while_running("elastic", sub, "goes on without it on 2 workers");
    char *err = faults_output("elastic", "err");
    bool named = e2e_has(err, "did not come back");
    free(err);
    host_back_then_taken_in("elastic", sub, without && named,
                            "answers again: taken back in");
}

Test(faults_restart, a_worker_down_as_the_run_begins_is_taken_in_when_it_comes_up)
{
    e2e_start(WORKERS);
    /* Worker 2's host is down as the run begins: nothing restarts it. */
    stopped_sup = e2e_supervisor_pid();
    cr_assert(stopped_sup > 0 && kill(stopped_sup, SIGSTOP) == 0);
    pid_t victim = e2e_worker_pid_file(2);
    cr_assert(victim > 0 && kill(victim, SIGKILL) == 0);
    char dir[600];
    dir_for("join", dir, sizeof dir);
    pid_t sub = faults_submit("join", dir, ELASTIC_EPOCHS, "--min-workers", "2", NULL);
    bool without = said_while_running(
        "join", sub, "does not answer: the run begins without it on 2 workers");
    /* Its host comes up: the worker starts and joins at a checkpoint. */
    host_back_then_taken_in("join", sub, without, ") answers: taken in after epoch");
}

/* A run on 2 workers with --max-restarts `max` (outputs and directory
 * named `tag`) whose worker 1 is killed once it wrote a checkpoint; the
 * pid killed into *victim. */
static pid_t kill_worker_1(const char *tag, const char *max, pid_t *victim)
{
    e2e_start(2);
    char dir[600];
    dir_for(tag, dir, sizeof dir);
    pid_t sub = faults_submit(tag, dir, EPOCHS, "--max-restarts", max, NULL);
    cr_assert(faults_wait_checkpoint(dir, 60000), "no checkpoint");
    *victim = e2e_worker_pid_file(1);
    cr_assert(*victim > 0 && e2e_alive(sub), "the run ended too soon");
    cr_assert_eq(kill(*victim, SIGKILL), 0);
    return sub;
}

Test(faults_restart, without_restarts_a_lost_worker_ends_the_run)
{
    pid_t victim, sub = kill_worker_1("norestart", "0", &victim);
    int st = faults_wait(sub, RUN_MS);
    char *err = faults_output("norestart", "err");
    cr_assert(st > 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0, "status %d:\n%s", st, err);
    cr_assert(e2e_has(err, "worker 1") && e2e_has(err, "SIGKILL") &&
                  !e2e_has(err, "every rank continues from"),
              "%s", err);
    free(err);
}

/* Whether the run's stderr shows an epoch finished after `mark`. */
static bool epoch_after(const char *tag, const char *mark)
{
    char *err = faults_output(tag, "err");
    const char *at = err ? strstr(err, mark) : NULL;
    bool yes = at && strstr(at, "\nepoch ");
    free(err);
    return yes;
}

Test(faults_restart, a_worker_lost_once_more_than_max_restarts_ends_the_run)
{
    pid_t victim, sub = kill_worker_1("bound", "1", &victim);
    /* Once the run goes on after its one restart, the new worker 1 dies. */
    bool again = false;
    for (int i = 0; i < 600 && !again && e2e_alive(sub); i++)
        if (!(again = epoch_after("bound", "(restart 1 of at most 1)")))
            usleep(50000);
    pid_t second = e2e_worker_pid_file(1);
    cr_assert(again && second > 0 && second != victim, "the run did not go on");
    cr_assert_eq(kill(second, SIGKILL), 0);
    int st = faults_wait(sub, RUN_MS);
    char *err = faults_output("bound", "err");
    cr_assert(st > 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0, "status %d:\n%s", st, err);
    cr_assert(e2e_has(err, "a worker was lost again after 1 restart (--max-restarts 1)"),
              "%s", err);
    free(err);
}

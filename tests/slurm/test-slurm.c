/* `ferry start --slurm` inside sbatch jobs of a local Slurm cluster of 4
 * nodes: start, a sync and an async training, status and shutdown as on
 * one machine; workers that end with the job; a worker that cannot start. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tslurm.h"

TestSuite(slurm, .fini = ts_down, .timeout = 300);

/* The steps of this job still known to slurmctld but its batch step. */
#define STEPS_LEFT                                                                       \
    "echo \"steps left: [$(squeue -h -s -j $SLURM_JOB_ID -o %i | grep -v batch | tr "    \
    "'\\n' ' ')]\""

Test(slurm, a_batch_job_starts_trains_sync_and_async_and_shuts_down)
{
    ts_up();
    char *out = ts_batch(4,
                         "$FERRY start --slurm --timeout-ms 120000 || exit 1\n"
                         "$FERRY status\n"
                         "$FERRY submit $TASKS/linreg.so --epochs 1 --json > sync.json"
                         " || echo 'sync failed'\n"
                         "$FERRY submit $TASKS/linreg.so --epochs 1 --mode async --json"
                         " > async.json || echo 'async failed'\n"
                         "cat sync.json async.json\n"
                         "$FERRY shutdown\n" STEPS_LEFT "\n"
                         "$FERRY status; echo \"status after: $?\"\n",
                         240);
    cr_assert(ts_has(out, "4 worker(s) ready"), "%s", out);
    /* One worker a node, each on its node's address. */
    for (int i = 1; i <= 4; i++) {
        char addr[32];
        snprintf(addr, sizeof addr, "  127.0.1.%d:", i);
        cr_expect(ts_has(out, addr), "no worker on 127.0.1.%d:\n%s", i, out);
    }
    cr_expect(ts_has(out, "\"mode\":\"sync\""), "%s", out);
    cr_expect(ts_has(out, "\"mode\":\"async\""), "%s", out);
    cr_expect(!ts_has(out, "failed"), "%s", out);
    cr_expect(ts_has(out, "4 worker(s) stopped"), "%s", out);
    cr_expect(ts_has(out, "steps left: []"), "shutdown left the step:\n%s", out);
    cr_expect(ts_has(out, "status after: 1") || ts_has(out, "status after: 2"), "%s",
              out);
    char log[400];
    snprintf(log, sizeof log, "cat %s/home/logs/worker-3.log", TS_DIR);
    char *w3 = ts_sh(log);
    cr_expect(ts_has(w3, "rank 3 of 4 from Slurm"), "%s", w3);
    cr_expect(ts_has(w3, "listening on 127.0.1."), "%s", w3);
    free(w3);
    free(out);
}

Test(slurm, workers_end_with_the_job)
{
    ts_up();
    char *out = ts_batch(4, "$FERRY start --slurm --timeout-ms 120000\n", 120);
    cr_assert(ts_has(out, "4 worker(s) ready"), "%s", out);
    /* "worker 0  127.0.1.1:41041  pid 4253  cpu ..." */
    int n = 0;
    for (const char *p = out; (p = strstr(p, "  pid ")); p++) {
        pid_t pid = (pid_t)atoi(p + 6);
        cr_assert(pid > 0);
        bool gone = false;
        for (int i = 0; i < 200 && !gone; i++) {
            gone = kill(pid, 0) != 0;
            if (!gone)
                usleep(50000);
        }
        cr_expect(gone, "worker pid %d outlived its job", (int)pid);
        n++;
    }
    cr_expect(n == 4, "%s", out);
    free(out);
}

Test(slurm, a_worker_that_cannot_start_fails_start_and_ends_the_step)
{
    ts_up();
    char *out = ts_batch(4,
                         "$FERRY start --slurm --device cuda:9 --timeout-ms 60000\n"
                         "echo \"start: $?\"\n" STEPS_LEFT "\n",
                         120);
    cr_expect(ts_has(out, "start: 1"), "%s", out);
    cr_expect(ts_has(out, "before every worker"), "%s", out);
    cr_expect(ts_has(out, "steps left: []"), "%s", out);
    free(out);
}

Test(slurm, shutdown_cancels_a_step_whose_workers_do_not_stop)
{
    ts_up();
    /* Stopped workers answer no Shutdown: the step is cancelled instead. */
    char *out =
        ts_batch(4,
                 "$FERRY start --slurm --timeout-ms 120000 > start.out\n"
                 "cat start.out\n"
                 "kill -STOP $(sed -n 's/.*  pid \\([0-9]*\\) .*/\\1/p' start.out)\n"
                 "$FERRY shutdown --grace-ms 0; echo \"shutdown: $?\"\n" STEPS_LEFT
                 "\ncat $FERRY_HOME/logs/slurm.log\n",
                 240);
    cr_assert(ts_has(out, "4 worker(s) ready"), "%s", out);
    cr_expect(ts_has(out, "shutdown: 0"), "%s", out);
    cr_expect(ts_has(out, "cancelling step"), "%s", out);
    cr_expect(ts_has(out, "steps left: []"), "%s", out);
    free(out);
}

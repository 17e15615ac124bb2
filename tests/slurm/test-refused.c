/* `ferry start --slurm` where it cannot run, and options it refuses: no
 * Slurm needed. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "tslurm.h"

static char *start(const char *env, const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "env -u SLURM_JOB_ID -u SLURM_JOB_NODELIST FERRY_HOME=$(mktemp -d) %s "
             "%s start %s; echo \"status $?\"",
             env, getenv("FERRY_TEST_BIN"), args);
    return ts_sh(cmd);
}

Test(slurm_refused, outside_an_allocation)
{
    char *out = start("", "--slurm");
    cr_expect(ts_has(out, "not inside a Slurm allocation"), "%s", out);
    cr_expect(ts_has(out, "status 2"), "%s", out);
    free(out);
}

Test(slurm_refused, inside_a_task_of_a_step)
{
    char *out = start(
        "SLURM_JOB_ID=7 SLURM_JOB_NODELIST=n1 SLURM_STEP_ID=0 SLURM_PROCID=0", "--slurm");
    cr_expect(ts_has(out, "a task of a step already"), "%s", out);
    cr_expect(ts_has(out, "status 2"), "%s", out);
    free(out);
}

Test(slurm_refused, options_that_do_not_apply)
{
    const char *cases[] = {"--slurm --listen 0.0.0.0", "--slurm --base-port 7100",
                           "--attach 2 --config x.ini", "--slurm --attach 2"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *out = start("", cases[i]);
        cr_expect(ts_has(out, "take no --config"), "%s: %s", cases[i], out);
        cr_expect(ts_has(out, "status 2"), "%s: %s", cases[i], out);
        free(out);
    }
    char *out = start("", "--attach 0");
    cr_expect(ts_has(out, "--attach: expected a number of workers"), "%s", out);
    free(out);
}

Test(slurm_refused, a_task_not_started_by_start)
{
    char *out = start("", "--slurm-task 0 auto");
    cr_expect(ts_has(out, "runs only as a task of the step"), "%s", out);
    cr_expect(ts_has(out, "status 2"), "%s", out);
    free(out);
}

Test(slurm_refused, attached_workers_that_never_come)
{
    char *out = start("", "--attach 2 --timeout-ms 300");
    cr_expect(ts_has(out, "0 of 2 workers recorded where they listen"), "%s", out);
    cr_expect(ts_has(out, "status 1"), "%s", out);
    free(out);
}

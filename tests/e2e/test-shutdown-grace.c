/* tests/e2e — `ferry shutdown --grace-ms` gives the calls running their
 * grace: the workers keep answering pings meanwhile (a submit's heartbeat
 * would otherwise take them for dead and fail its calls at once), cancel
 * what still runs when the grace is over, and the submit cut off says why
 * first, then what its calls saw. */
#include "e2e.h"
#include "e2e_train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(e2e_grace, .init = e2e_setup, .fini = e2e_teardown, .timeout = 120);

/* Until `ferry status` shows a call running on a worker (its busy line
 * appears once a call has run for a second). */
static bool wait_busy(int ms)
{
    for (double end = e2e_now_ms() + ms; e2e_now_ms() < end; e2e_sleep_ms(200)) {
        e2e_run r;
        e2e_ferry(&r, E2E_CMD_MS, "status", NULL);
        bool busy = r.status == 0 && e2e_has(r.out, "busy");
        e2e_run_fini(&r);
        if (busy)
            return true;
    }
    return false;
}

Test(e2e_grace, a_call_runs_for_its_grace_and_the_submit_says_shutdown_first)
{
    e2e_start(2);
    char out[600], err[600];
    e2e_next_outputs(out, err);
    /* A minute: far longer than the grace, so only the grace can end it. */
    pid_t submit = e2e_spawn("submit", e2e_task("sleep"), "--", "60000", NULL);
    cr_assert(wait_busy(20000), "the call never showed as running");

    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "shutdown", "--grace-ms", "3000", NULL);
    E2E_EXPECT(&r, 0);
    double took = r.ms;
    e2e_run_fini(&r);
    cr_log_info("shutdown --grace-ms 3000 with a call running took %.0f ms", took);
    /* Less would mean the call was failed before its grace was over. */
    cr_assert(took >= 2900, "shutdown returned after %.0f ms, within the grace", took);

    int status = e2e_wait_exit(submit, 30000);
    char *said = e2e_slurp(err);
    cr_assert(status == 1, "submit: status %d\n%s", status, said ? said : "");
    cr_assert(!e2e_has(said, "stopped answering pings"),
              "the heartbeat gave up on a worker in its grace:\n%s", said);
    static const char why[] = "ferry submit: the cluster was shut down (`ferry shutdown` at ";
    const char *first = strstr(said, "ferry submit: ");
    cr_assert(first && strncmp(first, why, strlen(why)) == 0,
              "the shutdown is not said first:\n%s", said);
    cr_assert(e2e_has(first, "that is why its calls failed; what they saw:\n"), "%s", said);
    free(said);
}

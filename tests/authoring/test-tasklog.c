/* tests/authoring — what a task logs on the workers reaches `ferry submit`'s
 * stderr with the worker's rank, a chatty task is cut to a burst and a count
 * of what was dropped, --quiet shows none of it, and a line cannot carry a
 * terminal escape, pass for two, or break the reply with bytes that are not
 * UTF-8. */
#include "e2e.h"

#include <stdio.h>

TestSuite(author_tasklog, .init = e2e_setup, .fini = e2e_teardown, .timeout = 120);

Test(author_tasklog, a_chatty_task_shows_its_first_lines_and_a_count_of_the_rest)
{
    e2e_start(2);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_local_module("chatty.so"), NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "chatted"), "%s", r.out);
    for (int rank = 0; rank < 2; rank++) {
        char first[128], last[128], past[128], count[128];
        snprintf(first, sizeof first, "[rank %d] chat: info: chat line 0 of rank %d\n",
                 rank, rank);
        snprintf(last, sizeof last, "[rank %d] chat: info: chat line 49 of rank %d\n",
                 rank, rank);
        snprintf(past, sizeof past, "chat line 50 of rank %d\n", rank);
        /* 5000 logged: the worker sends 200 and their count, the submitter
         * shows a burst of 50 of them. */
        snprintf(count, sizeof count, "[rank %d] ... 4950 lines dropped\n", rank);
        cr_assert(e2e_has(r.err, first) && e2e_has(r.err, last), "rank %d:\n%.3000s",
                  rank, r.err);
        cr_assert(!e2e_has(r.err, past), "rank %d:\n%.3000s", rank, r.err);
        cr_assert(e2e_has(r.err, count), "rank %d:\n%.6000s", rank, r.err);
    }
    e2e_run_fini(&r);
}

Test(author_tasklog, a_few_lines_are_all_shown_and_nothing_is_said_dropped)
{
    e2e_start(1);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_local_module("chatty.so"), "--", "3", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.err, "[rank 0] chat: info: chat line 2 of rank 0\n"), "%s",
              r.err);
    cr_assert(!e2e_has(r.err, "dropped"), "%s", r.err);
    e2e_run_fini(&r);
}

Test(author_tasklog, quiet_shows_none_of_it)
{
    e2e_start(2);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_local_module("chatty.so"), "--quiet", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.out, "chatted"), "%s", r.out);
    cr_assert(!e2e_has(r.err, "[rank") && !e2e_has(r.err, "chat line"), "%s", r.err);
    e2e_run_fini(&r);
}

Test(author_tasklog, a_line_cannot_carry_an_escape_or_pass_for_two)
{
    e2e_start(1);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_local_module("chatty.so"), "--", "evil",
              NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.err, "[rank 0] evil: warn: red [31mtext second ? caf\xc3\xa9\n"),
              "%s", r.err);
    cr_assert(!e2e_has(r.err, "\x1b"), "%s", r.err);
    e2e_run_fini(&r);
}

Test(author_tasklog, what_a_model_logs_in_training_is_shown_rate_limited_or_muted)
{
    e2e_start(1);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_local_module("chattymodel.so"), "--epochs",
              "1", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(e2e_has(r.err, "[rank 0] model: info: step 0 of a batch of ") &&
                  e2e_has(r.err, "[rank 0] model: info: step 49 of a batch of "),
              "%.4000s", r.err);
    cr_assert(!e2e_has(r.err, "step 50 of") && e2e_has(r.err, " lines dropped\n"),
              "%.4000s", r.err);
    e2e_run_fini(&r);

    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_local_module("chattymodel.so"), "--epochs",
              "1", "-q", NULL);
    E2E_EXPECT(&r, 0);
    cr_assert(!e2e_has(r.err, "[rank") && !e2e_has(r.err, "step 0 of"), "%s", r.err);
    e2e_run_fini(&r);
}

Test(author_tasklog, a_failed_call_brings_its_last_lines_with_its_error)
{
    e2e_start(1);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_local_module("chatty.so"), "--", "fail",
              NULL);
    cr_assert_neq(r.status, 0, "%s", r.err);
    /* The last lines it logged come first, then the failure itself. */
    const char *why =
        strstr(r.err, "[rank 0] fail: error: settings.ini: no key 'lr' in [train]\n");
    const char *err = strstr(r.err, "function fail: ");
    cr_assert(why && err && why < err, "%.6000s", r.err);
    cr_assert(e2e_has(r.err, "[rank 0] fail: debug: reading line 299 of settings.ini\n"),
              "%.6000s", r.err);
    /* The earliest do not fit beside an error: they are counted. */
    cr_assert(!e2e_has(r.err, "reading line 0 of ") && e2e_has(r.err, " lines dropped\n"),
              "%.6000s", r.err);
    e2e_run_fini(&r);

    e2e_ferry(&r, E2E_CMD_MS, "submit", e2e_local_module("chatty.so"), "-q", "--", "fail",
              NULL);
    cr_assert_neq(r.status, 0, "%s", r.err);
    cr_assert(!e2e_has(r.err, "[rank 0]") && e2e_has(r.err, "function fail: "), "%s",
              r.err);
    e2e_run_fini(&r);
}

/* tests/e2e — `ferry status` shows each worker's executor (issue 11, finding
 * 8: "until then `status` shows its busy slots and oldest call"): how many
 * slots are busy, how many hold a call cancelled that never returned, and
 * the oldest call with its age, in the table and in --json. Each test runs
 * a 1-worker cluster of its own with two executor slots. */
#include "e2e.h"
#include "e2e_plugin.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(e2e_status_slots, .init = e2e_setup, .fini = e2e_teardown, .timeout = 120);

/* One worker with two slots: the figures below are exact. */
static void start_one_worker(void)
{
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "start", "1", "--base-port", "0", "--threads", "2", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
}

/* `ferry status [--json]`, asserted to succeed; the caller finis it. */
static void status(e2e_run *r, bool json)
{
    if (json)
        e2e_ferry(r, E2E_CMD_MS, "status", "--json", NULL);
    else
        e2e_ferry(r, E2E_CMD_MS, "status", NULL);
    E2E_EXPECT(r, 0);
}

/* The number after `"key":` in a JSON text; -1 if there is none. */
static double json_num(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    return p ? strtod(p + strlen(pat), NULL) : -1;
}

/* Polls `status --json` until its output holds every one of `want`
 * (NULL-terminated) and its oldest call is at least `oldest_s` old, for at
 * most ms; returns the last table and JSON so a failure shows what status
 * said. */
static bool wait_status(int ms, double oldest_s, e2e_run *table, e2e_run *json,
                        const char *const *want)
{
    for (int waited = 0;; waited += 200) {
        status(json, true);
        bool all = json_num(json->out, "oldest_call_s") >= oldest_s;
        for (const char *const *w = want; *w; w++)
            all = all && e2e_has(json->out, *w);
        if (all || waited >= ms) {
            status(table, false);
            return all;
        }
        e2e_run_fini(json);
        usleep(200 * 1000);
    }
}

Test(e2e_status_slots, a_long_call_shows_as_a_busy_slot_with_its_name_and_age)
{
    start_one_worker();
    e2e_run t, j;

    /* Idle: the figures, and no line about calls. */
    status(&j, true);
    cr_assert(e2e_has(j.out, "\"slots\":2,\"busy_slots\":0,\"stuck_calls\":0"), "%s",
              j.out);
    e2e_run_fini(&j);
    status(&t, false);
    cr_assert(e2e_has(t.out, "SLOTS") && e2e_has(t.out, " 0/2 "), "%s", t.out);
    cr_assert(!e2e_has(t.out, "oldest:"), "an idle worker shows a call:\n%s", t.out);
    e2e_run_fini(&t);

    /* A 60 s call, polled for cancellation every 10 ms; older than a
     * second, it is named with its age. */
    pid_t submit = e2e_spawn("submit", e2e_task("sleep"), "--", "60000", NULL);
    const char *busy[] = {"\"busy_slots\":1,\"stuck_calls\":0",
                          "\"oldest_call\":\"Call sleep.so sleep\"", NULL};
    bool seen = wait_status(15000, 1.0, &t, &j, busy);
    cr_assert(seen, "status --json never showed the call:\n%s", j.out);
    const char *line = strstr(t.out, "slots 1/2 busy (oldest: Call sleep.so sleep, ");
    cr_assert(e2e_has(t.out, " 1/2 ") && line, "%s", t.out);
    int age = atoi(line + strlen("slots 1/2 busy (oldest: Call sleep.so sleep, "));
    cr_assert(age >= 1 && age < 30, "age %d s:\n%s", age, t.out);
    cr_assert(!e2e_has(t.out, "stuck"), "%s", t.out);
    e2e_run_fini(&t);
    e2e_run_fini(&j);

    /* The submitter gone, the call notices its cancellation and returns:
     * the slot is free again and the line goes. */
    cr_assert(kill(submit, SIGKILL) == 0);
    cr_assert(e2e_wait_gone(submit, 5000));
    const char *idle[] = {"\"busy_slots\":0,\"stuck_calls\":0", "\"oldest_call\":\"\"",
                          NULL};
    seen = wait_status(10000, 0, &t, &j, idle);
    cr_assert(seen, "the slot stayed busy:\n%s", j.out);
    cr_assert(!e2e_has(t.out, "oldest:"), "%s", t.out);
    e2e_run_fini(&t);
    e2e_run_fini(&j);
    e2e_shutdown_leaves_nothing();
}

/* Starts a 1-worker cluster and leaves on it a call to `spin`, loaded as
 * `name`, that its caller gave up on after 300 ms and that ignores the
 * cancellation. */
/* The spinning call would wait out the default 5 s grace for nothing;
 * the worker ends it with itself either way. */
static void shut_down_past_the_stuck_call(void)
{
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS, "shutdown", "--grace-ms", "0", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    e2e_expect_no_descendants(5000);
}

static void leave_a_stuck_call(const char *name)
{
    char *so = e2e_build_module(
        "spin",
        "#include <unistd.h>\n#include <ferry/task.h>\n"
        "static int spin(ferry_ctx_t *c, const ferry_bytes_t *in, ferry_bytes_t *o)\n"
        "{ (void)c, (void)in, (void)o; for (;;) usleep(20000); }\n"
        "FERRY_TASK(.name = \"spin\", .functions = FERRY_FUNCTIONS({\"spin\", "
        "spin}));\n");
    start_one_worker();

    /* Its caller gives up after 300 ms; the call spins on, cancelled. */
    cluster *cl = e2e_cluster(NULL, 300);
    size_t len = 0;
    char *bytes = NULL;
    FILE *f = fopen(so, "rb");
    cr_assert(f && fseek(f, 0, SEEK_END) == 0, "%s", so);
    len = (size_t)ftell(f);
    rewind(f);
    cr_assert((bytes = malloc(len)) && fread(bytes, 1, len, f) == len, "%s", so);
    fclose(f);
    free(so);
    cluster_module m;
    cr_assert(cluster_load_module(cl, name, bytes, len, &m) == 0, "%s",
              cluster_error(cl));
    free(bytes);
    ferry_bytes_t out = {0};
    cr_assert(cluster_call(cl, &m, 0, "spin", NULL, &out) != 0, "spin returned");
    cluster_module_fini(&m);
}

Test(e2e_status_slots, a_call_that_ignores_cancellation_shows_as_stuck)
{
    leave_a_stuck_call("spin.so");

    /* A cancelled call counts as stuck once it has ignored that for a
     * second. */
    e2e_run t, j;
    const char *stuck[] = {"\"busy_slots\":1,\"stuck_calls\":1",
                           "\"oldest_call\":\"Call spin.so spin\"", NULL};
    bool seen = wait_status(15000, 0, &t, &j, stuck);
    cr_assert(seen, "status --json never showed the stuck call:\n%s", j.out);
    cr_assert(e2e_has(t.out, "slots 1/2 busy, 1 stuck (oldest: Call spin.so spin, "),
              "%s", t.out);
    cr_assert(e2e_has(t.out, "held by: Call spin.so spin for ") &&
                  e2e_has(t.out, ", cancelled "),
              "%s", t.out);
    e2e_run_fini(&t);
    e2e_run_fini(&j);

    shut_down_past_the_stuck_call();
}

/* A module's name comes from the wire: status shows it escaped, as the log
 * does, so a name cannot rewrite the operator's terminal (issue 11,
 * finding 3). */
Test(e2e_status_slots, a_hostile_module_name_is_shown_escaped)
{
    leave_a_stuck_call("spin\x1b[2J\n.so");
    e2e_run t, j;
    const char *stuck[] = {"\"stuck_calls\":1", NULL};
    bool seen = wait_status(15000, 0, &t, &j, stuck);
    cr_assert(seen, "status --json never showed the stuck call:\n%s", j.out);
    cr_assert(e2e_has(t.out, "held by: Call spin\\x1b[2J\\x0a.so spin for "), "%s",
              t.out);
    cr_assert(!strchr(t.out, '\x1b') && !strchr(j.out, '\x1b'),
              "a raw escape reached status:\n%s\n%s", t.out, j.out);
    e2e_run_fini(&t);
    e2e_run_fini(&j);
    shut_down_past_the_stuck_call();
}

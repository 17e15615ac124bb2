/* tests/e2e — plugin code never runs unguarded in `ferry submit`, and a
 * descriptor that would crash a worker is refused before it is shipped
 * (issue 11, findings 5 and 6). Every module is built here from its source;
 * every scenario ends with `ferry shutdown` and nothing of the test left
 * running (checked through /proc). */
#include "e2e.h"
#include "e2e_plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ferry.pb-c.h"

TestSuite(e2e_plugin, .init = e2e_setup, .fini = e2e_teardown, .timeout = 120);

#define HEAD                                                                             \
    "#include <stdint.h>\n#include <stdlib.h>\n#include <unistd.h>\n"                   \
    "#include <ferry/task.h>\n"                                                          \
    "static int echo(ferry_ctx_t *c, const ferry_bytes_t *in, ferry_bytes_t *out)\n"     \
    "{ (void)c; *out = *in; return 0; }\n"                                               \
    "static int drive(ferry_driver_t *d)\n"                                              \
    "{ ferry_bytes_t o = {0}; int rc = d->ops->call(d, 0, \"echo\", NULL, &o);\n"        \
    "  d->ops->free_bytes(d, &o); return rc; }\n"

/* `ferry submit` of `so` with extra arguments; the run is the caller's. */
static void submit(e2e_run *r, int ms, const char *so, const char *a1, const char *a2)
{
    e2e_ferry(r, ms, "submit", so, a1, a2, NULL);
}

static void expect_refused(const char *name, const char *source, const char *says)
{
    char *so = e2e_build_module(name, source);
    e2e_run r;
    submit(&r, E2E_CMD_MS, so, NULL, NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, says), "expected '%s' in:\n%s", says, r.err);
    e2e_run_fini(&r);
    free(so);
}

Test(e2e_plugin, a_constructor_that_aborts_is_named_and_submit_survives)
{
    expect_refused("ctorabort",
                   HEAD "__attribute__((constructor)) static void boom(void) { abort(); }\n"
                        "FERRY_TASK(.name = \"demo\", .driver = drive,\n"
                        "           .functions = FERRY_FUNCTIONS({\"echo\", echo}));\n",
                   "ctorabort.so: constructor aborted (SIGABRT) while loading");
    e2e_expect_no_descendants(5000);
}

Test(e2e_plugin, a_constructor_that_calls_exit_0_is_no_success)
{
    expect_refused("ctorexit",
                   HEAD "__attribute__((constructor)) static void bye(void) { exit(0); }\n"
                        "FERRY_TASK(.name = \"demo\", .driver = drive,\n"
                        "           .functions = FERRY_FUNCTIONS({\"echo\", echo}));\n",
                   "ctorexit.so: constructor called exit(0)");
    e2e_expect_no_descendants(5000);
}

Test(e2e_plugin, a_constructor_that_hangs_runs_out_of_time_with_what_it_forked)
{
    /* It forks a helper first: the time limit takes that one too. */
    char *so = e2e_build_module(
        "ctorloop",
        HEAD "__attribute__((constructor)) static void spin(void)\n"
             "{ if (fork() == 0) for (;;) pause(); for (;;) sleep(1); }\n"
             "FERRY_TASK(.name = \"demo\", .driver = drive,\n"
             "           .functions = FERRY_FUNCTIONS({\"echo\", echo}));\n");
    e2e_run r;
    submit(&r, 15000, so, "--load-timeout-ms", "1000");
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, "ctorloop.so: loading did not finish within 1 s"), "%s", r.err);
    cr_assert(r.ms < 8000, "took %.0f ms", r.ms);
    e2e_run_fini(&r);
    free(so);
    e2e_expect_no_descendants(5000);
}

Test(e2e_plugin, garbage_function_and_driver_pointers_are_refused_by_name)
{
    e2e_start(1);
    cluster *cl = e2e_cluster(NULL, 10000);
    pid_t worker = e2e_worker_pid(cl, 0);
    expect_refused(
        "badfn",
        HEAD "static const ferry_function_t fns[] = {\n"
             "    {\"echo\", echo}, {\"bad\", (ferry_fn_t)(uintptr_t)0x1234}, {NULL, NULL}};\n"
             "static int drive_bad(ferry_driver_t *d)\n"
             "{ ferry_bytes_t o = {0}; int rc = d->ops->call(d, 0, \"bad\", NULL, &o);\n"
             "  d->ops->free_bytes(d, &o); return rc; }\n"
             "FERRY_TASK(.name = \"demo\", .driver = drive_bad, .functions = fns);\n"
             "int unused_drive(ferry_driver_t *d);\n"
             "int unused_drive(ferry_driver_t *d) { return drive(d); }\n",
        "badfn.so: function 'bad' points outside the module's code (0x1234)");
    expect_refused(
        "baddrv",
        HEAD "FERRY_TASK(.name = \"demo\", .driver = (ferry_driver_fn_t)(uintptr_t)0x1234,\n"
             "           .functions = FERRY_FUNCTIONS({\"echo\", echo}));\n"
             "int unused_drive(ferry_driver_t *d);\n"
             "int unused_drive(ferry_driver_t *d) { return drive(d); }\n",
        "baddrv.so: the driver points outside the module's code (0x1234)");
    cr_assert(e2e_worker_pid(cl, 0) == worker, "the worker was restarted");
    e2e_shutdown_leaves_nothing();
}

Test(e2e_plugin, a_driver_that_crashes_is_reported_like_a_worker_death)
{
    e2e_start(1);
    char *so = e2e_build_module(
        "drvsegv",
        HEAD "static int crash(ferry_driver_t *d)\n"
             "{ d->ops->print(d, \"about to crash\");\n"
             "  *(volatile int *)(uintptr_t)16 = 1; return 0; }\n"
             "FERRY_TASK(.name = \"demo\", .driver = crash,\n"
             "           .functions = FERRY_FUNCTIONS({\"echo\", echo}));\n"
             "int unused_drive(ferry_driver_t *d);\n"
             "int unused_drive(ferry_driver_t *d) { return drive(d); }\n");
    /* A sanitizer build's own SEGV handler would make the crash an abort
     * and print its report last: the fault itself is what is checked. */
    char asan[512];
    const char *was = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof asan, "%s%shandle_segv=0", was ? was : "", was ? ":" : "");
    cr_assert(setenv("ASAN_OPTIONS", asan, 1) == 0);
    e2e_run r;
    submit(&r, E2E_CMD_MS, so, NULL, NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, "drvsegv.so: the driver's process died: signal 11 (SIGSEGV)"),
              "%s", r.err);
    cr_assert(e2e_has(r.err, "| about to crash"), "no last lines:\n%s", r.err);
    cr_assert(e2e_has(r.out, "about to crash"), "the driver's output was lost:\n%s", r.out);
    e2e_run_fini(&r);
    free(so);
    e2e_shutdown_leaves_nothing();
}

Test(e2e_plugin, a_driver_that_calls_exit_0_does_not_succeed)
{
    e2e_start(1);
    char *so = e2e_build_module(
        "drvexit",
        HEAD "static int leave(ferry_driver_t *d)\n"
             "{ drive(d); d->ops->log(d, FERRY_LOG_INFO, \"leaving early\"); exit(0); }\n"
             "FERRY_TASK(.name = \"demo\", .driver = leave,\n"
             "           .functions = FERRY_FUNCTIONS({\"echo\", echo}));\n");
    e2e_run r;
    submit(&r, E2E_CMD_MS, so, NULL, NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, "drvexit.so: the driver called exit(0) instead of returning"),
              "%s", r.err);
    cr_assert(e2e_has(r.err, "leaving early"), "%s", r.err);
    e2e_run_fini(&r);
    free(so);
    e2e_shutdown_leaves_nothing();
}

/* The table's last entry is followed by two words that are no pointers: a
 * worker walking it for its terminator reads them as a name and a function. */
#define NO_TERMINATOR                                                                    \
    HEAD "static const struct { ferry_function_t f[1]; uintptr_t junk[2]; } t = {\n"     \
         "    {{\"echo\", echo}}, {0x10, 0x20}};\n"                                       \
         "FERRY_TASK(.name = \"demo\", .driver = drive, .functions = t.f);\n"

Test(e2e_plugin, a_function_table_without_terminator_is_refused_before_shipping)
{
    e2e_start(2);
    cluster *cl = e2e_cluster(NULL, 10000);
    pid_t before[2] = {e2e_worker_pid(cl, 0), e2e_worker_pid(cl, 1)};
    char *so = e2e_build_module("noterm", NO_TERMINATOR);
    e2e_run r;
    submit(&r, E2E_CMD_MS, so, NULL, NULL);
    E2E_EXPECT(&r, 1);
    cr_assert(e2e_has(r.err, "noterm.so: function table entry 1: its name (0x10) is not a "
                             "string in the module"),
              "%s", r.err);
    e2e_run_fini(&r);

    /* Shipped anyway, through the library: each worker refuses it alike. */
    char *bytes = e2e_slurp(so);
    FILE *f = fopen(so, "rb");
    cr_assert(bytes && f);
    fseek(f, 0, SEEK_END);
    size_t len = (size_t)ftell(f);
    fclose(f);
    cluster_module m;
    int rc = cluster_load_module(cl, "noterm.so", bytes, len, &m);
    cr_assert(rc != 0, "the workers loaded it");
    cr_assert(e2e_has(cluster_error(cl), "is not a string in the module"), "%s",
              cluster_error(cl));
    free(bytes);
    free(so);
    for (int i = 0; i < 2; i++)
        cr_assert(e2e_worker_pid(cl, i) == before[i], "worker %d crashed", i);
    e2e_shutdown_leaves_nothing();
}

Test(e2e_plugin, a_worker_that_dies_loading_a_module_names_it_in_its_crash_record)
{
    e2e_start(1);
    cluster *cl = e2e_cluster(NULL, 10000);
    pid_t before = e2e_worker_pid(cl, 0);
    /* What `submit` would refuse to ship; the library ships what it is
     * given. */
    char *so = e2e_build_module(
        "ctorsegv", HEAD "__attribute__((constructor)) static void boom(void)\n"
                         "{ *(volatile int *)(uintptr_t)16 = 1; }\n"
                         "FERRY_TASK(.name = \"demo\", .driver = drive,\n"
                         "           .functions = FERRY_FUNCTIONS({\"echo\", echo}));\n");
    char *bytes = e2e_slurp(so);
    FILE *f = fopen(so, "rb");
    cr_assert(bytes && f);
    fseek(f, 0, SEEK_END);
    size_t len = (size_t)ftell(f);
    fclose(f);
    cluster_module m;
    cr_assert(cluster_load_module(cl, "ctorsegv.so", bytes, len, &m) != 0);
    free(bytes);
    free(so);

    /* Until the supervisor's restart answers with the record. */
    const cluster_worker *w = NULL;
    bool restarted = false;
    for (int i = 0; i < 200 && !restarted; i++) {
        cluster_survey(cl, false, &w);
        restarted = w[0].ping && w[0].ping->pid != before;
        if (!restarted)
            usleep(50000);
    }
    cr_assert(restarted, "the worker was not restarted");
    cr_assert(e2e_has(w[0].ping->last_crash,
                      "module ctorsegv.so while loading: signal 11 (SIGSEGV)"),
              "the record: '%s'", w[0].ping->last_crash);
    e2e_shutdown_leaves_nothing();
}

/* tests/runtime — the crash record: written by a child that really crashes
 * inside a module function, read back by rt_crash_read. */
#include "rth.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

TestSuite(rt_crash, .init = rth_setup_dir, .fini = rth_teardown, .timeout = 60);

static char record[512];

static void write_record(const char *text)
{
    snprintf(record, sizeof record, "%s/crash", R.dir);
    FILE *f = fopen(record, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
}

RTH_TEST(rt_crash, a_record_is_read_into_the_identity)
{
    write_record("1234 module x.so function f: signal 11 (SIGSEGV)\n");
    rt_identity id = {.crash_id = 99};
    rt_crash_read(record, &id);
    cr_assert(id.crash_id == 1234);
    cr_assert_str_eq(id.last_crash, "module x.so function f: signal 11 (SIGSEGV)");
}

RTH_TEST(rt_crash, no_record_or_a_garbled_one_is_no_crash)
{
    rt_identity id = {.crash_id = 5, .last_crash = "old"};
    snprintf(record, sizeof record, "%s/absent", R.dir);
    rt_crash_read(record, &id);
    cr_assert(id.crash_id == 0);
    cr_assert_str_eq(id.last_crash, "");
    const char *bad[] = {"", "garbage\n", "12x module m function f\n", "0 module m\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_record(bad[i]);
        rt_identity id2 = {.crash_id = 5, .last_crash = "old"};
        rt_crash_read(record, &id2);
        cr_assert(id2.crash_id == 0, "'%s' gave id %llu", bad[i],
                  (unsigned long long)id2.crash_id);
        cr_assert_str_eq(id2.last_crash, "");
    }
}

typedef struct crash_job {
    const char *function; /* a faulty.so function, or NULL: crash outside any call */
} crash_job;

/* Runs in the forked child: installs the recorder, then crashes. */
static int crash_child(void *arg)
{
    const crash_job *job = arg;
    if (rt_crash_install(record) != 0)
        return 10;
    if (!job->function) {
        raise(SIGSEGV);
        return 11;
    }
    rt_module m;
    char err[512];
    if (rt_module_open(&m, rth_module("faulty.so"), "faulty.so", err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 12;
    }
    ferry_fn_t fn = rt_module_function(&m, job->function);
    if (!fn)
        return 13;
    ferry_bytes_t in = {0}, out = {0};
    rt_crash_mark(m.name, job->function);
    fn(NULL, &in, &out); /* segv and abort never touch the context */
    return 14;
}

/* The child dies by `sig`, and its record reads `want`. */
static void crashes_with(const char *function, int sig, const char *want)
{
    snprintf(record, sizeof record, "%s/crash", R.dir);
    crash_job job = {function};
    char *err = NULL;
    int status = rth_fork(crash_child, &job, NULL, &err);
    cr_assert(WIFSIGNALED(status), "the child did not die by a signal (status %d): %s",
              WIFEXITED(status) ? WEXITSTATUS(status) : -1, err ? err : "");
    cr_assert(WTERMSIG(status) == sig, "killed by signal %d, expected %d",
              WTERMSIG(status), sig);
    rt_identity id = {0};
    rt_crash_read(record, &id);
    /* `want` begins the record: frames follow what a test can predict. */
    cr_assert(strncmp(id.last_crash, want, strlen(want)) == 0, "'%s' does not begin '%s'",
              id.last_crash, want);
    cr_assert(id.crash_id != 0);
    char line[300];
    snprintf(line, sizeof line, "ferry worker: crashed: %s", want);
    cr_assert(err && strstr(err, line), "the child's stderr lacks '%s': %s", line,
              err ? err : "");
    free(err);
}

RTH_TEST(rt_crash, a_segfault_in_a_function_is_recorded_with_module_and_function)
{
    crashes_with("segv", SIGSEGV,
                 "module faulty.so function segv: signal 11 (SIGSEGV) at address 0x10 in "
                 "function segv; frames: segv+0x");
}

RTH_TEST(rt_crash, an_abort_in_a_function_is_recorded)
{
    crashes_with("abort", SIGABRT, "module faulty.so function abort: signal 6 (SIGABRT)");
}

RTH_TEST(rt_crash, a_stack_overflow_in_a_function_is_recorded)
{
    crashes_with("overflow", SIGSEGV,
                 "module faulty.so function overflow: signal 11 (SIGSEGV) at address 0x");
}

RTH_TEST(rt_crash, a_crash_outside_any_call_says_so)
{
    crashes_with(NULL, SIGSEGV, "outside any call: signal 11 (SIGSEGV) at address 0x");
}

RTH_TEST(rt_crash, each_crash_gets_a_new_id)
{
    crashes_with("segv", SIGSEGV, "module faulty.so function segv: signal 11 (SIGSEGV)");
    rt_identity first = {0}, second = {0};
    rt_crash_read(record, &first);
    crashes_with("abort", SIGABRT, "module faulty.so function abort: signal 6 (SIGABRT)");
    rt_crash_read(record, &second);
    cr_assert(second.crash_id != first.crash_id, "both crashes got id %llu",
              (unsigned long long)first.crash_id);
}

/* tests/e2e — helpers for the plugin-hardening tests (issue 11): modules
 * built inside the test from a source text, and the check that nothing of
 * a cluster outlives `ferry shutdown`. */
#ifndef FERRY_TESTS_E2E_PLUGIN_H
#define FERRY_TESTS_E2E_PLUGIN_H

#include <stdbool.h>
#include <sys/types.h>

/* Compiles `source` as the task module <name>.so with the flags a user gets
 * from `pkg-config ferry`; returns its path beside the test's FERRY_HOME
 * (removed with it), in a buffer the caller frees. */
char *e2e_build_module(const char *name, const char *source);

/* Asserts that within `ms` no process descending from this test process is
 * left running (zombies are reaped), listing those left. Read from /proc:
 * the fixture makes the test a subreaper, so everything a cluster started
 * stays below it, however it detached itself. */
void e2e_expect_no_descendants(int ms);

/* Runs `ferry shutdown` and then e2e_expect_no_descendants(). */
void e2e_shutdown_leaves_nothing(void);

/* Whether /proc/<pid> exists and is not a zombie. */
bool e2e_proc_alive(pid_t pid);

#endif

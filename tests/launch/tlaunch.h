/* tests/launch — the shared fixture: tests/config's private temp directory
 * per test (T_DIR, T_TEST, t_write), host lists as one line, and programs
 * run with an environment of the test's making. */
#ifndef FERRY_TESTS_LAUNCH_TLAUNCH_H
#define FERRY_TESTS_LAUNCH_TLAUNCH_H

#include <stddef.h>

#include "launch/launch.h"
#include "tconf.h"

/* conf_hostlist_expand(list) joined by single spaces, into buf; on a
 * refusal, "ERROR: " and the message. Returns buf. */
char *t_expand(const char *list, char *buf, size_t len);

/* Runs `ferry ARGS...` (FERRY_TEST_BIN) with exactly the environment envp,
 * stdin from /dev/null, stdout and stderr into out/err (NUL-terminated,
 * cut to their size), and waits at most 30 s. Returns the exit status, or
 * 128 + the signal. */
int t_run(char *const argv[], char *const envp[], char *out, size_t outlen, char *err,
          size_t errlen);

/* t_run() of another program: `prog` is looked up on the test's PATH. */
int t_run_program(const char *prog, char *const argv[], char *const envp[], char *out,
                  size_t outlen, char *err, size_t errlen);

#endif

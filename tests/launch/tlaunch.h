/* tests/launch — the shared fixture: a private temp directory per test,
 * host lists as one line, and the real `ferry` run with an environment of
 * the test's making.
 *
 * Criterion 2.4.1 reports a test whose .fini fails an assertion as passed,
 * so the leak check runs in the body, through T_TEST. */
#ifndef FERRY_TESTS_LAUNCH_TLAUNCH_H
#define FERRY_TESTS_LAUNCH_TLAUNCH_H

#include <stddef.h>

#include <criterion/criterion.h>

#include "config/config.h"
#include "launch/launch.h"

/* The test's own directory (mkdtemp), absolute. */
extern char T_DIR[256];

void t_setup(void);
void t_teardown(void);
void t_finish(void);

#define T_TEST(suite, name, ...)                                                         \
    static void t_body_##suite##_##name(void);                                           \
    Test(suite, name, .init = t_setup, .fini = t_teardown, ##__VA_ARGS__)                \
    {                                                                                    \
        t_body_##suite##_##name();                                                       \
        t_finish();                                                                      \
    }                                                                                    \
    static void t_body_##suite##_##name(void)

/* Writes `text` to T_DIR/name (mode 0600); returns the path (static
 * storage, valid until the next call). */
const char *t_write(const char *name, const char *text);

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

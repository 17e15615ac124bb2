/* tests/config — the shared fixture: a private temp directory per test.
 *
 * Criterion 2.4.1 reports a test whose .fini fails an assertion as passed,
 * so the checks that end a test (no leak, in sanitizer builds) run in the
 * body, through T_TEST; .fini only removes the directory. */
#ifndef FERRY_TESTS_CONFIG_TCONF_H
#define FERRY_TESTS_CONFIG_TCONF_H

#include <stddef.h>

#include <criterion/criterion.h>

#include "config/config.h"

/* The test's own directory (mkdtemp), absolute. */
extern char T_DIR[256];

void t_setup(void);
void t_teardown(void);

/* Fails the test on a leak (sanitizer builds). */
void t_finish(void);

/* Test() in the fixture whose body ends with t_finish(). */
#define T_TEST(suite, name, ...)                                                         \
    static void t_body_##suite##_##name(void);                                           \
    Test(suite, name, .init = t_setup, .fini = t_teardown, ##__VA_ARGS__)                \
    {                                                                                    \
        t_body_##suite##_##name();                                                       \
        t_finish();                                                                      \
    }                                                                                    \
    static void t_body_##suite##_##name(void)

/* T_DIR/name into a static buffer of the caller's choosing. */
const char *t_path(char *buf, size_t len, const char *name);

/* Writes `text` to T_DIR/name with `mode`; returns the path (static storage,
 * valid until the next call). */
const char *t_write(const char *name, const char *text, unsigned mode);

/* The whole file at `path` (malloc'ed, NUL-terminated), or NULL. */
char *t_read(const char *path);

/* The permission bits of `path`, or -1. */
int t_mode(const char *path);

#endif

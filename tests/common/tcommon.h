/* tests/common — what every test folder's fixture needs: a free loopback
 * port, removing a test's directory, the leak check that ends a test, and
 * (tmain.c) the runner's main. Linked into each test executable. */
#ifndef FERRY_TESTS_COMMON_H
#define FERRY_TESTS_COMMON_H

/* A TCP port on 127.0.0.1 that was free a moment ago and has nothing
 * listening on it now. */
int tcom_free_port(void);

/* Listens on 127.0.0.1:port (0: any free port). Returns the port, with the
 * socket in *fd_out, or -1 when the port is taken. */
int tcom_listen(int port, int *fd_out);

/* Removes `dir` and everything below it; quiet about what is not there. */
void tcom_rm_tree(const char *dir);

/* The resident set of process `pid` (0: this one) in KiB, from
 * /proc/PID/status; -1 when it cannot be read. */
long tcom_rss_kib(int pid);
/* Any "Name: N kB" field of /proc/PID/status ("RssAnon"), as tcom_rss_kib. */
long tcom_status_kib(int pid, const char *field);

/* In sanitizer builds, fails the current test if LeakSanitizer finds a
 * leak in this process (report on stderr); elsewhere does nothing. Called
 * from a test's body: Criterion 2.4.1 ignores failures in .fini. */
void tcom_assert_no_leaks(void);

/* How many descriptors process `pid` has open (/proc/PID/fd), or -1. */
int tcom_open_fds(int pid);

/* Waits up to ms for `pid` to hold at least n descriptors (a server that
 * accepted until it ran out); returns the last count seen. */
int tcom_wait_open_fds(int pid, int n, int ms);

/* Skips the current test because `package` (a Debian package) is missing,
 * saying so; under CI=true, where .ci/install-deps installs every package,
 * fails it instead: a missing package there is a broken CI, not a reason. */
_Noreturn void tcom_skip_missing(const char *package, const char *what);

#endif

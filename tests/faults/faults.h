/* What the fault tests share: a `ferry submit` of linreg in the
 * background with its output in files, and waiting for it. */
#ifndef FERRY_TESTS_FAULTS_H
#define FERRY_TESTS_FAULTS_H

#include <stdbool.h>
#include <sys/types.h>

/* `ferry submit linreg --json --checkpoint-dir dir --checkpoint-every 20
 * --epochs epochs` and the extra arguments (NULL-terminated, at most 6),
 * stdout and stderr into `tag`.out / `tag`.err beside FERRY_HOME. */
pid_t faults_submit(const char *tag, const char *dir, const char *epochs, ...)
    __attribute__((sentinel));

/* Waits up to ms for `pid` (killed with SIGKILL past it); its wait status,
 * or -1 when it had to be killed. */
int faults_wait(pid_t pid, int ms);

/* Waits up to ms until `dir` holds a checkpoint. */
bool faults_wait_checkpoint(const char *dir, int ms);

/* The file `tag`.out or `tag`.err (malloc'd). */
char *faults_output(const char *tag, const char *which);

/* The "params_sha256" of a --json output, into buf; false when none. */
bool faults_sha(const char *json, char *buf, size_t len);

#endif

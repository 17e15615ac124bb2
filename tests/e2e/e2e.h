/* tests/e2e — real clusters started through the `ferry` command.
 *
 * Every test gets its own FERRY_HOME (a fresh temporary directory) and
 * starts its workers with `--base-port 0`, so each binds a free port on
 * 127.0.0.1. The fixture makes the test process a child subreaper, so the
 * supervisor `ferry start` leaves behind stays its descendant; teardown runs
 * `ferry shutdown`, then kills whatever of the cluster is still alive (by
 * the supervisor's process group) and removes the directory, even when the
 * test failed.
 *
 * Paths come from the environment meson sets: FERRY_TEST_BIN (the ferry
 * executable), FERRY_TEST_TASKS (build/tasks), FERRY_TEST_MODULES
 * (tests/modules' build dir), FERRY_TEST_E2E (this folder's build dir). */
#ifndef FERRY_TESTS_E2E_H
#define FERRY_TESTS_E2E_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <criterion/criterion.h>

#include "cluster/cluster.h"

/* Bounds that keep a broken implementation from hanging the suite. */
#define E2E_CMD_MS 30000

typedef struct e2e_run {
    int status; /* exit status; 128+N when killed by signal N; -1: timed out */
    char *out;  /* everything it printed, NUL-terminated */
    char *err;
    double ms; /* wall time */
} e2e_run;

extern char e2e_home[];

void e2e_setup(void);
void e2e_teardown(void);

/* Runs `ferry <args...>` (NULL-terminated) under this test's FERRY_HOME and
 * waits for it (at most timeout_ms, then SIGKILL). */
void e2e_ferry(e2e_run *r, int timeout_ms, const char *arg, ...)
    __attribute__((sentinel));
void e2e_run_fini(e2e_run *r);

/* Runs ferry and asserts its exit status; prints both outputs on failure,
 * and the end of each of the cluster's logs (a worker's side of a failure
 * seen only in CI is otherwise lost with its FERRY_HOME). */
#define E2E_EXPECT(r, want)                                                              \
    cr_assert((r)->status == (want),                                                     \
              "exit %d, expected %d\nstdout:\n%s\nstderr:\n%s\n%s", (r)->status, (want),   \
              (r)->out, (r)->err, e2e_logs())

/* The last few KiB of every log under FERRY_HOME/logs, each headed by its
 * name; a static buffer, rewritten by each call. */
const char *e2e_logs(void);

/* `ferry start N --base-port 0`, asserted to succeed. */
void e2e_start(int n);

/* Absolute path of build/tasks/<name>.so, tests/modules/<name>, or this
 * folder's built module <name>; static buffer per call site is not needed:
 * returns a malloc'd string the harness frees at teardown. */
const char *e2e_task(const char *name);
const char *e2e_module(const char *name);
const char *e2e_local_module(const char *name);

/* The running cluster through the library API: addresses and token from
 * FERRY_HOME's cluster.ini. `token` NULL: the cluster's own. Destroyed at
 * teardown if the test did not. */
cluster *e2e_cluster(const char *token, int64_t call_timeout_ms);
/* Another, with the cluster's token, for calls from a second thread (a
 * cluster is used from one thread at a time): the test destroys it. */
cluster *e2e_cluster_another(int64_t call_timeout_ms);

/* Starts `ferry <args...>` in the background (output to files under the
 * test's directory); teardown kills it if it still runs. */
pid_t e2e_spawn(const char *arg, ...) __attribute__((sentinel));

/* The pid of worker `rank`, from a Ping. */
pid_t e2e_worker_pid(cluster *cl, int rank);

/* The supervisor's pid, from the file it writes first; 0 if none. */
pid_t e2e_supervisor_pid(void);

/* The pid the supervisor recorded for worker `rank`; 0 if none. */
pid_t e2e_worker_pid_file(int rank);

/* Switches FERRY_HOME (and e2e_home) to this test's first (0) or second
 * (1) home; teardown stops and removes what runs under either. */
void e2e_use_home(int which);

/* True while `pid` runs (reaps it first if it is our exited child). */
bool e2e_alive(pid_t pid);

/* Waits up to ms for `pid` to be gone. */
bool e2e_wait_gone(pid_t pid, int ms);

/* Whether `haystack` contains `needle`. */
bool e2e_has(const char *haystack, const char *needle);

/* Whether a failed `ferry start --device cuda` failed only because no GPU
 * is there: its error says the CUDA runtime counted none (or could not
 * count, as without a driver), or that this ferry has no cuda backend.
 * Anything else, a crash included, is a failure to report, not a skip. */
bool e2e_no_gpu(const char *err);

/* Writes `text` to a file beside this test's homes; returns its path
 * (freed at teardown). */
const char *e2e_write_file(const char *name, const char *text);

/* The processes of the session `sid` leads (a supervisor calls setsid, and
 * its workers stay in its session), read from /proc: up to max pids. */
size_t e2e_session_procs(pid_t sid, pid_t *pids, size_t max);

/* Asserts that within ms no process of the cluster that supervisor `sup`
 * ran is left, by /proc (its session, and every pid in `also`). */
void e2e_expect_nothing_left(pid_t sup, const pid_t *also, size_t n_also, int ms);

/* Waits up to ms for worker `rank`'s pid file to name a live pid other than
 * `old`; returns it, or 0. */
pid_t e2e_wait_new_worker(int rank, pid_t old, int ms);

/* Reads a whole file (malloc'd, NUL-terminated); NULL if it cannot. */
char *e2e_slurp(const char *path);
/* The same for FERRY_HOME/logs/<name> ("supervisor.log", "worker-0.log"). */
char *e2e_slurp_log(const char *name);

#endif

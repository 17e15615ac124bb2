/* tests/multihost — a ferry cluster whose workers are hosts of their own:
 * hosts 0..MHC_WORKERS-1 (network namespaces, mhnet.h) each run one
 * `ferry worker --listen ADDR:PORT --token-file ...` in the foreground, as
 * a user runs it on a remote machine, and host MHC_SUBMITTER runs the
 * commands: `ferry start --config` with a cluster file that lists the
 * workers, then submit, status and shutdown, under a FERRY_HOME of its own.
 * Every host has its own FERRY_HOME and state directory under one temporary
 * directory; the token file is shared as a file an administrator copied.
 *
 * The suite's .init is mhc_setup (skips with the reason where namespaces
 * cannot be made) and its .fini mhc_teardown, which stops and removes
 * everything even when the test failed. Paths come from meson:
 * FERRY_TEST_BIN (the ferry executable), FERRY_TEST_TASKS (build/tasks). */
#ifndef FERRY_TESTS_MULTIHOST_MHCLUSTER_H
#define FERRY_TESTS_MULTIHOST_MHCLUSTER_H

#include <stdbool.h>

#include "mhnet.h"

#define MHC_WORKERS   3
#define MHC_SUBMITTER MHC_WORKERS
/* Each worker listens on this port of its own host's address. */
#define MHC_PORT 7100

/* What every worker's command line and `ferry start`'s carry beyond the
 * addresses and the token: the one place where a variant of the cluster
 * (TLS's certificates) puts its flags. NULL-terminated. */
typedef struct mhc_flags {
    const char *worker[12];
    const char *start[12];
} mhc_flags;

/* Plain text between the hosts. */
extern const mhc_flags mhc_plain;

extern mh_net mhc_net;

void mhc_setup(void);
void mhc_teardown(void);

/* Skips the current test, saying why, where namespaces cannot be made;
 * under CI=true a missing package fails it instead (tcom_skip_missing). */
void mhc_skip_unless_able(void);

/* The directory of this test's files (homes, token, logs). */
const char *mhc_dir(void);

/* Starts one worker a host with `flags`, then `ferry start --config` on
 * the submitter's host; asserts that it reports every worker ready. */
void mhc_start(const mhc_flags *flags);

typedef struct mhc_run {
    int status; /* exit status; 128+N for signal N; -1: timed out */
    char *out, *err;
} mhc_run;

/* Runs `ferry <args...>` (NULL-terminated) on the submitter's host and
 * waits at most timeout_ms. */
void mhc_ferry(mhc_run *r, int timeout_ms, const char *arg, ...)
    __attribute__((sentinel));
void mhc_run_fini(mhc_run *r);

/* Asserts an exit status, printing both outputs and every worker's log. */
#define MHC_EXPECT(r, want)                                                              \
    cr_assert((r)->status == (want),                                                     \
              "exit %d, expected %d\nstdout:\n%s\nstderr:\n%s\n%s", (r)->status, (want), \
              (r)->out, (r)->err, mhc_logs())

/* The end of every worker's output, each headed by its host (a static
 * buffer, rewritten by each call). */
const char *mhc_logs(void);

/* Waits up to ms for worker `rank`'s process to end; its exit status,
 * 128 + a signal, or -1 while it still runs. */
int mhc_worker_exit(int rank, int ms);

/* `ferry shutdown` stops the three workers, and each exits 0. */
void mhc_expect_shutdown(void);

/* build/tasks/<name>.so (a static buffer per call). */
const char *mhc_task(const char *name);

/* The number after "\"key\":" in a JSON text; NAN if absent. */
double mhc_json_number(const char *json, const char *key);

/* Whether `text` contains `needle`. */
bool mhc_has(const char *text, const char *needle);

#endif

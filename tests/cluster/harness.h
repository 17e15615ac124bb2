/* tests/cluster — the shared fixture: real workers (rt_worker) on
 * 127.0.0.1:0 in this process or in forked children, each with a private
 * state directory under one mkdtemp folder, and a cluster over them.
 *
 * Test modules come from tests/modules (FERRY_TEST_MODULES names the
 * folder): faulty.so (echo, fail, segv, abort, overflow, sleep, info), notelf.so,
 * nodesc.so, badabi.so, truncated.so. */
#ifndef FERRY_TESTS_CLUSTER_HARNESS_H
#define FERRY_TESTS_CLUSTER_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <criterion/criterion.h>

#include "cluster/cluster.h"
#include "proxyworker/proxyworker.h"
#include "runtime/runtime.h"

#define TC_TOKEN "cluster-test-token"
#define TC_MAX   8
/* Bounds that keep a broken implementation from hanging the suite. */
#define TC_WAIT_MS 10000

typedef struct tc {
    char dir[256];
    rt_worker *w[TC_MAX]; /* in-process workers */
    pid_t child[TC_MAX];  /* worker slots run by a forked child */
    char target[TC_MAX][64];
    char state[TC_MAX][300];
    int port[TC_MAX];
    size_t n; /* slots used */
    cluster *cl;
    cluster_module mod;
    void *bytes; /* the last module read by tc_read_module */
    size_t len;
    bool finished;
} tc;

extern tc T;

/* Fixtures: tc_setup makes the temp folder; tc_teardown (.fini) releases what
 * a failed test left behind. TC_TEST's body ends with tc_finish(), which
 * stops everything, removes the folder and checks for leaks (sanitizer
 * builds), inside the test where a failed check still counts. */
void tc_setup(void);
void tc_teardown(void);
void tc_finish(void);

#define TC_TEST(suite, name, ...)                                                        \
    static void tc_body_##suite##_##name(void);                                          \
    Test(suite, name, .init = tc_setup, .fini = tc_teardown, ##__VA_ARGS__)              \
    {                                                                                    \
        tc_body_##suite##_##name();                                                      \
        tc_finish();                                                                     \
    }                                                                                    \
    static void tc_body_##suite##_##name(void)

/* Starts a worker in this process in the next slot, listening on
 * `port` (0: a free one), with `token`; returns the slot. */
size_t tc_worker(const char *token);
size_t tc_worker_at(size_t slot, int port, const char *token, uint32_t restarts);
/* Starts `n` in-process workers with TC_TOKEN. */
void tc_workers(size_t n);

/* Starts a worker in a forked child (with the crash recorder installed, as
 * `ferry worker` has), in the next slot; returns the slot. Fork children
 * before anything in this process starts gRPC (tc_worker, tc_cluster). */
size_t tc_child_worker(void);
/* Sends `sig` to the slot's child; with reap, waits for it to end. */
void tc_child_signal(size_t slot, int sig, bool reap);

/* Makes T.cl over every slot; heartbeat/ping/call timeouts in ms (0: the
 * defaults). Waits until all answer. */
void tc_cluster(int64_t call_timeout_ms, int64_t ping_timeout_ms, int64_t heartbeat_ms);
void tc_cluster_token(const char *token, int64_t call_timeout_ms);
/* Like tc_cluster, but never waits for the workers (nor pings them): the
 * cluster knows nothing of them, as a library user's who calls at once. */
void tc_cluster_unready(int64_t call_timeout_ms, int64_t heartbeat_ms);

/* Leaves a crash record `what` in the next slot's state directory, as a
 * worker that crashed there before would have. */
void tc_old_crash(const char *what);

/* Reads tests/modules' `name` into T.bytes/T.len (replacing the last). */
void tc_read_module(const char *name);
/* The same for the bundled task `name` (tasks/, FERRY_TEST_TASKS). */
void tc_read_task(const char *name);
/* Loads faulty.so on every worker into T.mod; asserts success. */
void tc_load_faulty(void);

/* Bytes of a NUL-free string, for arguments. */
ferry_bytes_t tc_str(const char *s);
/* Asserts that `b` holds exactly the string `s`. */
void tc_assert_bytes(const ferry_bytes_t *b, const char *s);

/* A port on 127.0.0.1 where a TCP listener accepts connections and never
 * says a word (a hung peer); its thread ends at tc_finish. */
int tc_silent_server(void);

double tc_now_ms(void);

/* A proxyworker to slot 0's worker on a loop and rpc client of its own. */
typedef struct tc_pw {
    uv_loop_t loop;
    rpc_client *client;
    pw *p;
} tc_pw;

void tc_pw_open(tc_pw *t, const char *token, int rank);
/* Destroys it and asserts that its loop closed clean. */
void tc_pw_close(tc_pw *t);

#endif

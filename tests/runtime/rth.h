/* tests/runtime — the shared fixture: an in-process rt_worker on
 * 127.0.0.1:0 with a private state directory, and a libuv loop with an
 * rpc_client and three channels to it: one carrying the token, one with no
 * token and one with a wrong token. Calls are plain rpc futures.
 *
 * The modules come from tests/modules (FERRY_TEST_MODULES). */
#ifndef FERRY_TESTS_RUNTIME_RTH_H
#define FERRY_TESTS_RUNTIME_RTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <criterion/criterion.h>

#include "proto/proto.h"
#include "proto/raw.h"
#include "rpc/rpc.h"
#include "runtime/runtime.h"
#include "runtime/worker_main/worker_main.h"

#define RTH_TOKEN         "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define RTH_CALL_TIMEOUT  20000 /* bounds a broken implementation, never a result */
#define RTH_POLL_LIMIT_MS 20000

typedef struct rth {
    char dir[256];   /* private temp dir, removed at the end */
    char state[300]; /* the worker's state dir, inside dir */
    uv_loop_t loop;
    rpc_client *client;
    rt_worker *worker;
    int port;
    char target[64];
    rpc_channel *ch;       /* with the token */
    rpc_channel *ch_none;  /* without a token */
    rpc_channel *ch_wrong; /* with a wrong token */
    bool loop_open, finished;
} rth;

extern rth R;

/* Fixtures. rth_setup: temp dir + loop + client + worker + channels.
 * rth_setup_dir: the temp dir only (tests of files and forked children).
 * The end-of-test checks (loop closes clean, no leaks) run in rth_finish(),
 * from the test body through RTH_TEST: Criterion 2.4.1 ignores failures in
 * .fini. rth_teardown (.fini) only releases what a failed test left. */
void rth_setup(void);
void rth_setup_dir(void);
void rth_teardown(void);
void rth_finish(void);

#define RTH_TEST(suite, name)                                                            \
    static void rth_body_##suite##_##name(void);                                         \
    Test(suite, name)                                                                    \
    {                                                                                    \
        rth_body_##suite##_##name();                                                     \
        rth_finish();                                                                    \
    }                                                                                    \
    static void rth_body_##suite##_##name(void)

/* Starts a worker with `opts` filled in from R (listen, state dir, token)
 * where left zero, and opens the channels to it. */
void rth_start_worker(rt_worker_opts *opts);

/* Opens R.loop and R.client (rth_setup does; tests that fork a worker
 * first call it after the fork). */
void rth_open_client(void);

/* Opens the three channels to 127.0.0.1:port (and the client if needed). */
void rth_connect(int port);

/* Destroys the three channels (their calls complete, cancelled). */
void rth_disconnect(void);

/* Path of module `name` in the modules build folder; the buffer is one of a
 * ring of 8. */
const char *rth_module(const char *name);

/* Reads a whole file; returns malloc'd bytes (NUL-terminated) or NULL. */
char *rth_read_file(const char *path, size_t *len);

/* Starts `method` with `head` and a payload on `ch` and waits for it.
 * Returns call->result; the caller rpc_call_fini()s `call`. */
int rth_call(rpc_channel *ch, rpc_call *call, const char *method,
             const ProtobufCMessage *head, const void *payload, size_t len);

/* rth_call with a head packed by proto (freed here, whatever happens). */
int rth_call_head(rpc_channel *ch, rpc_call *call, const char *method, proto_bytes *head,
                  const void *payload, size_t len);

/* LoadModule of the file `name` from the modules folder. sha: NULL computes
 * it; send_bytes false sends none. On success *reply (may be NULL) gets the
 * unpacked reply to free with proto_free(). The error
 * text, if any, is copied into err. */
int rth_load(rpc_channel *ch, const char *name, const char *sha, bool send_bytes,
             proto_load_module_reply **reply, char *err, size_t errlen);

/* Loads faulty.so with the token and returns its digest. */
void rth_load_faulty(char sha[RT_SHA256_HEX]);

/* Call of `fn` with `arg` (NUL-terminated text, or NULL). On success *out
 * holds the result bytes as a NUL-terminated malloc'd string (may be NULL).
 * The error text, if any, goes to err. */
int rth_invoke(rpc_channel *ch, const char *sha, const char *fn, const char *arg,
               char **out, char *err, size_t errlen);

/* Stats over `ch`; asserts it succeeds. Free with proto_free(). */
proto_stats_reply *rth_stats(rpc_channel *ch);

/* Ping over `ch`; returns the result; *reply as above. */
int rth_ping(rpc_channel *ch, proto_ping_reply **reply);

/* Polls Stats until pred holds or RTH_POLL_LIMIT_MS pass; returns whether it
 * held. */
bool rth_stats_until(bool (*pred)(const proto_stats_reply *s, const void *arg),
                     const void *arg);

/* Redirects this process's stderr into a file until rth_capture_end(),
 * which returns what was written (malloc'd). */
void rth_capture_start(void);
char *rth_capture_end(void);
/* What was captured so far (malloc'd), the capture going on. */
char *rth_capture_peek(void);

/* Where a forked child's stdout and stderr go. */
typedef struct rth_child_out {
    char out[512], err[512];
} rth_child_out;

/* Runs fn(arg) in a forked child whose exit status is fn's result (23 when
 * a sanitizer build finds a leak in it). Fork before any gRPC or thread
 * exists in the test process. */
pid_t rth_spawn(int (*fn)(void *arg), void *arg, rth_child_out *paths);
/* Waits for the child; returns its wait status. */
int rth_reap(pid_t pid);

/* Runs fn(arg) in a forked child, with its stdout and stderr in files, and
 * waits. Returns the wait status; *out and *errtext (may be NULL) get what
 * the child printed (malloc'd). */
int rth_fork(int (*fn)(void *arg), void *arg, char **out, char **errtext);

/* Writes a token file with mode 0600 into R.dir; returns its path. */
const char *rth_token_file(void);

#endif

/* tests/rpc — the shared fixture: a fresh libuv loop, rpc_client and channel
 * per test, and a server on 127.0.0.1:0 serving the test methods below.
 *
 * Test methods (requests and replies are Ferry__CallRequest unless noted):
 *   H_ECHO       replies with the request's head and payload, same codec
 *                (inline on the completion-queue thread)
 *   H_ECHO_POOL  the same, on the handler pool; records each peer it sees
 *   H_FAIL       fails with FERRY_ENOENT, "no module <function>"
 *   H_SLOW       replies (echo) from another thread H_SLOW_MS later; with
 *                function "fail" it fails there with FERRY_EINVAL instead
 *   H_BLOCK      polls rpc_srv_cancelled() until it is true, then fails with
 *                FERRY_ECANCELED (gives up after 10 s)
 *   H_SIZED      replies with a payload of N bytes, N = atoi(function)
 *   H_INFO       replies Ferry__LoadModuleReply: task_name = the method,
 *                functions = {peer, token or "(none)"}
 *   H_FORWARD    replies with the request's head bytes as they came
 *                (rpc_msg_out.head_bytes) and its payload
 *   PROTO_METHOD_PING  the worker's real Ping handler */
#ifndef FERRY_TESTS_RPC_HARNESS_H
#define FERRY_TESTS_RPC_HARNESS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <criterion/criterion.h>

#include "proto/raw.h"
#include "rpc/rpc.h"
#include "runtime/runtime.h"

#define H_ECHO      "/test.Echo/Echo"
#define H_ECHO_POOL "/test.Echo/EchoPool"
#define H_FAIL      "/test.Echo/Fail"
#define H_SLOW      "/test.Echo/Slow"
#define H_BLOCK     "/test.Echo/Block"
#define H_SIZED     "/test.Echo/Sized"
#define H_INFO      "/test.Echo/Info"
#define H_FORWARD   "/test.Echo/Forward"
#define H_SLOW_MS   50

/* Bounds that keep a broken implementation from hanging the suite. */
#define H_CALL_TIMEOUT_MS 10000
#define H_WAIT_MS         10000

typedef struct harness {
    uv_loop_t loop;
    rpc_client *client;
    rpc_server *server;
    rpc_channel *ch;
    rpc_channel *extra[4];    /* more channels a test opened; released at the end */
    rpc_server *extra_server; /* another server a test started; released at the end */
    rpc_poller *poller;       /* a poller a test made; released after the servers */
    int port;
    char target[64];
    bool loop_open;   /* H.loop is initialised and not yet closed */
    bool grpc_inited; /* h_setup_grpc() ran grpc_init() */
    bool finished;    /* h_finish() ran */
} harness;

extern harness H;

/* What the server's handlers observed; reset by h_setup(). */
typedef struct h_stats {
    atomic_int block_started;   /* H_BLOCK handlers entered */
    atomic_int block_cancelled; /* H_BLOCK handlers that saw rpc_srv_cancelled */
    atomic_int sized_reply_rc;  /* last rpc_srv_reply() result in H_SIZED */
    atomic_int handled;         /* calls that reached any test handler */
    atomic_int slow_running;    /* H_SLOW replies being prepared now */
    atomic_int slow_peak;       /* the most of them at once */
} h_stats;

extern h_stats HS;

/* Fixtures. h_setup: loop + client + server (default opts, every test
 * method) + channel to it. h_setup_bare: loop + client only; the test starts
 * its own server and channel. h_setup_grpc: grpc_init() only (codec tests).
 *
 * The checks at the end of a test (uv_loop_close() returns 0: no handle left
 * open; LeakSanitizer finds nothing, in sanitizer builds) run in h_finish(),
 * called from the test body by H_TEST: Criterion 2.4.1 reports a test whose
 * .fini fails an assertion, crashes or exits as passed, so checks there would
 * never fail anything. h_teardown (.fini) only releases what a failed test
 * left behind. */
void h_setup(void);
void h_setup_bare(void);
void h_setup_grpc(void);
void h_teardown(void);

/* Destroys the channels, closes the client, runs the loop to completion,
 * destroys the servers, asserts uv_loop_close() == 0 and no leaks. */
void h_finish(void);

/* Test() whose body ends with h_finish(). */
#define H_TEST(suite, name)                                                              \
    static void h_body_##suite##_##name(void);                                           \
    Test(suite, name)                                                                    \
    {                                                                                    \
        h_body_##suite##_##name();                                                       \
        h_finish();                                                                      \
    }                                                                                    \
    static void h_body_##suite##_##name(void)

/* The data the next h_server_start() gives rt_ping_handler (NULL or an
 * rt_identity). */
extern void *h_ping_data;

/* Creates H.server with `max_payload` (0: default) serving the test methods
 * and PROTO_METHOD_PING; sets H.port and H.target. */
void h_server_start(size_t max_payload);
/* Opens H.ch to H.target with these options (NULL: defaults). */
void h_channel_open(const rpc_channel_opts *opts);

/* Copies the methods table the harness serves; returns its length. */
size_t h_methods(const rpc_method **out);

/* Runs the loop until *flag is true or ms pass; returns *flag. */
bool h_run_until_flag(const bool *flag, int ms);
/* Runs the loop until *counter >= n or ms pass; returns whether it got there. */
bool h_run_until_count(const int *counter, int n, int ms);
/* Runs the loop until the atomic reaches n or ms pass. */
bool h_run_until_atomic(atomic_int *a, int n, int ms);
/* Runs the loop for about ms milliseconds. */
void h_run_for(int ms);

/* A call completed by callback: the callback stores its count here. */
typedef struct h_done {
    int completions; /* how often the callback ran */
    bool done;
} h_done;

/* rpc_call_cb that records into (h_done *)call->data. */
void h_done_cb(rpc_call *call);

/* Starts `method` with a CallRequest {sha256, function} and a payload, waits
 * for it with the loop (bounded) and asserts the callback ran exactly once.
 * Returns call->result; the caller rpc_call_fini()s `call`. */
int h_call(rpc_channel *ch, rpc_call *call, const char *method, const char *sha256,
           const char *function, const void *payload, size_t len, rpc_codec codec,
           int64_t timeout_ms);

/* Fills a rpc_msg_out with a CallRequest head (storage in *req). */
void h_msg_out(rpc_msg_out *out, Ferry__CallRequest *req, proto_raw *head,
               const char *sha256, const char *function, const void *payload, size_t len,
               rpc_codec codec);

/* Unpacks call->reply as a CallRequest; asserts it unpacks. */
Ferry__CallRequest *h_reply_callreq(const rpc_msg *m);

/* Deterministic bytes: random-looking (incompressible) or highly compressible. */
void h_fill_random(void *buf, size_t len, uint64_t seed);
void h_fill_sparse(void *buf, size_t len, uint64_t seed);

/* Distinct peers seen by H_ECHO_POOL. */
size_t h_distinct_peers(void);

/* A TCP port on 127.0.0.1 that was free a moment ago and has nothing
 * listening on it now. */
int h_dead_port(void);

/* Milliseconds since an arbitrary point (uv_hrtime). */
double h_now_ms(void);

#endif

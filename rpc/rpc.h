/* rpc — the gRPC C core wrapped for ferry's other folders.
 *
 * Where things are:
 *   codec.c, wire.c   payload framing on the wire (raw or lz4), limits
 *   bufpool.c         reused large receive buffers
 *   bridge.c          completion-queue thread -> libuv loop hand-off
 *   poller.c          one queue and thread shared by a server and clients
 *   client.c          a client: per libuv loop (CQ + bridge), or on a poller
 *   channel.c         one HTTP/2 channel per endpoint
 *   call.c            a unary call, completed on the loop or poller thread
 *   future.c          wait for one call / for all (gather), driving the loop
 *   server.c          listening, method table, request posting, shutdown
 *   server_call.c     one incoming call: dispatch, reply from any thread
 *   status.c          gRPC status <-> ferry error codes
 *
 * Threads. Client calls are started and completed on the libuv loop thread
 * of their rpc_client, or, for a client on a poller, on the poller's thread
 * under the owner's guard. A server runs a poller (its own, or one it
 * shares) and a pool of handler threads; it needs no loop. This header
 * exposes neither grpc.h types nor device pointers. */
#ifndef FERRY_RPC_H
#define FERRY_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include <ferry/error.h>

#include "base/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- messages --------------------------------------------------------- */

/* How a payload travels. AUTO compresses a sample and sends lz4 only when it
 * pays (sparse tensors), raw otherwise (dense float32 does not compress). */
typedef enum { RPC_CODEC_RAW = 0, RPC_CODEC_LZ4 = 1, RPC_CODEC_AUTO = 2 } rpc_codec;

/* Default and largest per-message payload limits (max_message_bytes): every
 * declared payload size is checked against the limit before anything is
 * allocated, and an lz4 payload must decode to exactly its declared size. */
#define RPC_DEFAULT_MAX_PAYLOAD ((size_t)1 << 30)
#define RPC_MAX_PAYLOAD_LIMIT   ((size_t)2047 << 20)
/* Largest request payload of a method that is served without the token
 * (RPC_METHOD_PUBLIC): anyone can send one, so it stays small. */
#define RPC_PUBLIC_MAX_PAYLOAD ((size_t)64 << 10)
/* Most bytes of a request (on the wire, and its payload once decoded) that
 * the completion-queue thread decodes itself; see RPC_METHOD_INLINE. */
#define RPC_INLINE_DECODE_MAX ((size_t)64 << 10)

/* Payloads sent. No slice handed to gRPC points at memory whose lifetime
 * gRPC does not control: gRPC can hold a message's slices after its call
 * has completed, failed or been cancelled (a transport's unsent bytes), so
 * a call's completion says nothing about its payload. A payload is either
 *   - copied (payload_free NULL): into a pooled buffer that gRPC's last
 *     unref hands back to the pool; the caller may reuse its bytes as soon
 *     as the start (or reply) returns; or
 *   - lent (payload_free set): sent without a copy, and the caller's until
 *     rpc calls payload_free, which it does when gRPC drops its last
 *     reference to the bytes, before or after the call's completion.
 * Lending, rather than rpc owning every payload, because the large senders
 * send bytes that live in someone's tensor: a collective's chunks and a
 * parameter-server push are spans of the caller's gradient buffer. Owned
 * bytes would mean copying each span into an rpc buffer first, at memcpy
 * speed (~9 GB/s here) for a link that carries 1-3 GB/s, and twice the
 * memory traffic; a release callback keeps them zero-copy. Small and
 * occasional payloads (a master's call arguments and module images, server
 * replies) are copied. */

/* Called when gRPC no longer holds a lent payload. May run on any thread,
 * inside or outside the lender's callbacks: keep it short, and do not call
 * back into rpc from it. */
typedef void (*rpc_free_fn)(void *payload, void *arg);

/* A message to send: the method's message packed without its payload
 * fields (proto/'s views pack it; a received rpc_msg's head is forwarded as
 * it is) and optional bulk bytes sent as the payload. */
typedef struct rpc_msg_out {
    const void *head_bytes; /* copied; head_len 0: an empty message */
    size_t head_len;
    const void *payload; /* NULL with payload_len 0: no payload */
    size_t payload_len;
    rpc_codec codec;
    /* NULL: `payload` is copied before the start (or reply) returns.
     * Non-NULL: it is lent when the start (or reply) succeeds, sent
     * without a copy, and released by payload_free(payload, free_arg),
     * called once when gRPC has let go of it (an lz4-compressed or small
     * payload is released at once, its copy sent instead). Until then the
     * caller must neither write nor free it, whatever became of the call.
     * A failed start leaves it with the caller, except FERRY_EINTERNAL
     * from a client call that gRPC refused after it was encoded (never
     * seen), where payload_free has already run. */
    rpc_free_fn payload_free;
    void *free_arg;
} rpc_msg_out;

/* A received message. `head` holds the protobuf bytes of every field except
 * the payload ones (unpack it with proto/'s views); `payload` the decoded
 * payload, from rpc's buffer pool, 64-byte aligned. Owned by the receiver;
 * freed by rpc_msg_fini(). */
typedef struct rpc_msg {
    uint8_t *head;
    size_t head_len;
    void *payload; /* NULL when the message carried none */
    size_t payload_len;
    rpc_codec codec; /* how the payload arrived: RAW or LZ4 */
    size_t wire_len; /* payload bytes on the wire */
    /* RPC_METHOD_PAYLOAD_RUNS only: a raw payload left where gRPC received
     * it (payload is then NULL): its bytes in order, in n_runs runs of any
     * length and alignment inside `bb`, the message's buffer, which `m`
     * owns. Take them with rpc_msg_take_runs(). */
    struct rpc_run *runs;
    size_t n_runs;
    void *bb;
} rpc_msg;

/* A run of payload bytes. */
typedef struct rpc_run {
    const uint8_t *p;
    size_t len;
} rpc_run;

/* A received payload as runs of bytes, whether it was copied out into one
 * buffer or left in gRPC's. Owned by whoever took it; rpc_payload_fini()
 * frees it, from any thread. */
typedef struct rpc_payload {
    const rpc_run *runs;
    size_t n_runs;
    size_t len; /* bytes, all runs together */
    /* private */
    rpc_run one;
    rpc_run *own_runs;
    void *buf, *bb;
} rpc_payload;

/* Takes the payload out of `m` as runs, whichever form it arrived in (an
 * empty payload gives no runs). Never fails. */
void rpc_msg_take_runs(rpc_msg *m, rpc_payload *out);
void rpc_payload_fini(rpc_payload *p);

/* Takes the payload out of `m`: the caller now owns it and frees it with
 * rpc_buf_free(). Returns NULL if there was none. */
void *rpc_msg_take_payload(rpc_msg *m, size_t *len);

/* Frees what `m` holds and zeroes it. Safe on a zeroed or finished msg. */
void rpc_msg_fini(rpc_msg *m);

/* Tunes glibc's malloc for a process that moves large messages: otherwise
 * it trims and re-faults the pages of gRPC's read buffers on every message
 * (measured: 15% of a 16 MiB receive). Call once at the start of a daemon's
 * main; a library never changes its host's allocator on its own. */
void rpc_tune_malloc(void);

/* Large buffers are recycled through a process-wide pool: freshly mapped
 * pages cost more than a loopback link carries (see STACK-NOTES). Returns
 * 64-byte-aligned memory or NULL; thread-safe. */
void *rpc_buf_alloc(size_t len);
void rpc_buf_free(void *buf);
/* Returns every cached buffer to the system (tests use it to check leaks). */
void rpc_buf_trim(void);

/* ---- pollers ---------------------------------------------------------- */

/* One completion queue and the thread that drains it. A server and the
 * clients on the same poller are served by that one thread, so that no
 * message read for one of them costs a hand-off between threads. */
typedef struct rpc_poller rpc_poller;

int rpc_poller_create(rpc_poller **out);
/* Every server and client on `p` must be gone first. NULL is a no-op. */
void rpc_poller_destroy(rpc_poller *p);

/* ---- TLS --------------------------------------------------------------- */

/* PEM files; NULL: not given. */
typedef struct rpc_tls_files {
    const char *cert; /* this process's certificate (chain) ... */
    const char *key;  /* ... and its private key: both or neither */
    const char *ca;   /* the CA that signs the peers' certificates */
} rpc_tls_files;

/* Sets what every channel and server this process makes from now on
 * speaks: TLS when `f` gives a certificate or a CA, plain text otherwise
 * (f NULL too). A channel checks the server's certificate against the CA
 * (none given: the system's roots) and the host of its target, and shows
 * the certificate when it has one; a server shows its certificate (needed:
 * rpc_server_create() fails with FERRY_EINVAL without one) and, given the
 * CA, takes only clients that show one it signed (mutual TLS). The files
 * are read now. Channels and servers made before keep what they had.
 * Returns 0, or FERRY_EINVAL with `err` set when a file cannot be read, is
 * not PEM, a certificate comes without its key (or a key without its
 * certificate), or the certificate is one no peer would take: expired, not
 * valid yet, or not signed by the CA given ("certificate F: this
 * certificate has expired (valid until ...)"); then nothing changes.
 * Thread-safe. */
int rpc_tls_use(const rpc_tls_files *f, char *err, size_t errlen);

/* Whether rpc_tls_use() turned TLS on. */
bool rpc_tls_enabled(void);

/* ---- client ----------------------------------------------------------- */

typedef struct rpc_client rpc_client;
typedef struct rpc_channel rpc_channel;
typedef struct rpc_call rpc_call;
typedef struct rpc_op rpc_op;

/* Creates the client side of rpc for `loop`: one completion queue and one
 * thread that hands completions to the loop. Call on the loop thread. */
int rpc_client_create(uv_loop_t *loop, rpc_client **out);

/* What excludes every other use of a client on a poller while one of its
 * callbacks runs: enter(arg) before, leave(arg) after (a mutex, say, that
 * its owner also holds around each rpc call it makes on the client). */
typedef struct rpc_guard {
    void (*enter)(void *arg);
    void (*leave)(void *arg);
    void *arg;
} rpc_guard;

/* Creates a client whose calls complete on the thread of poller `p`, each
 * callback between guard->enter and guard->leave (copied). Its owner
 * starts, cancels and closes, and creates and destroys its channels, from
 * any thread, inside the same exclusion. rpc_call_wait refuses its calls
 * (FERRY_EINVAL): they are completed by callbacks. Once closed, it frees
 * itself with its last call's completion, or at once: the guard's arg
 * must outlive its last leave(). */
int rpc_client_create_on(rpc_poller *p, const rpc_guard *guard, rpc_client **out);

/* Closes the client. Every channel must be destroyed first; calls still in
 * flight complete (cancelled) before the handles close, so run the loop
 * until it has no more work, as with uv_close(). */
void rpc_client_close(rpc_client *c);

typedef struct rpc_channel_opts {
    size_t max_payload; /* 0: RPC_DEFAULT_MAX_PAYLOAD */
    /* Sent as metadata RPC_TOKEN_KEY with every call; NULL: none. Copied. */
    const char *token;
    /* Sent as metadata RPC_VERSION_KEY with every call; NULL: none. Copied. */
    const char *version;
} rpc_channel_opts;

#define RPC_TOKEN_KEY "ferry-token"
/* What each side speaks ("wire 1, ferry 0.5.0"): sent by a channel made
 * with rpc_channel_opts.version, checked by a server made with
 * rpc_server_opts.version. */
#define RPC_VERSION_KEY "ferry-version"

/* Opens one HTTP/2 channel to `target` ("127.0.0.1:5000", "[::1]:5000",
 * "localhost:5000"). Connects lazily, on the first call. opts may be NULL. */
int rpc_channel_create(rpc_client *c, const char *target, const rpc_channel_opts *opts,
                       rpc_channel **out);

/* Cancels the channel's calls in flight (their callbacks still run, with
 * FERRY_ECANCELED) and releases the channel once they have. */
void rpc_channel_destroy(rpc_channel *ch);

const char *rpc_channel_target(const rpc_channel *ch);

typedef void (*rpc_call_cb)(rpc_call *call);

/* One unary call, in caller memory. rpc_call_start() resets every field but
 * `data`; rpc_call_fini() the previous results first. A callback may start
 * the same call object again (keep N in flight). Results are valid in the
 * callback and after a wait. */
struct rpc_call {
    void *data; /* the caller's */
    int result; /* 0, or a FERRY_E* code */
    /* When result != 0: "peer <target> method <name>: <detail>". Owned by
     * the call. */
    char *errmsg;
    /* When result != 0: the bytes the server sent with its failure
     * (rpc_srv_fail_with), or NULL. Owned by the call. */
    void *detail;
    size_t detail_len;
    rpc_msg reply;
    /* private */
    rpc_call_cb cb;
    rpc_op *op;
    rpc_channel *ch;
    bool done;
};

/* Starts `method` ("/ferry.Worker/Ping") on `ch` with request `req`, giving
 * up after `timeout_ms` (<= 0: no deadline). Call on the loop thread. Returns
 * 0 and later runs cb(call) exactly once on the loop thread, or returns an
 * error (payload over the limit, bad arguments) and never runs cb. cb may be
 * NULL: then the call is a future, completed by rpc_call_wait(). */
int rpc_call_start(rpc_channel *ch, rpc_call *call, const char *method,
                   const rpc_msg_out *req, int64_t timeout_ms, rpc_call_cb cb);

/* Asks for the call to stop; its completion still arrives, normally with
 * FERRY_ECANCELED. Harmless after completion. Loop thread. */
void rpc_call_cancel(rpc_call *call);

/* Frees the reply and error text. The call must have completed. */
void rpc_call_fini(rpc_call *call);

/* Blocks until `call` has completed, running its client's loop underneath,
 * and returns call->result. Must not run on the loop thread inside a
 * callback: returns FERRY_EDEADLK there. */
int rpc_call_wait(rpc_call *call);

/* Waits for every call (asyncio's gather). Returns 0 if all succeeded, or the
 * result of the first failed one in array order; every call has completed
 * either way. Same thread rule as rpc_call_wait(). */
int rpc_call_wait_all(rpc_call *const *calls, size_t n);

/* ---- server ----------------------------------------------------------- */

typedef struct rpc_server rpc_server;
typedef struct rpc_srv_call rpc_srv_call;

/* Runs for each incoming call of a method. `req` belongs to the call and
 * stays valid until the reply. The handler must, now or later and from any
 * thread, end the call with exactly one rpc_srv_reply() or rpc_srv_fail(). */
typedef void (*rpc_handler)(rpc_srv_call *sc, rpc_msg *req, void *data);

enum {
    /* Run the handler without queuing behind the handler pool: for handlers
     * that never block (ping, echo, a collective's chunks). A request of at
     * most RPC_INLINE_DECODE_MAX bytes, on the wire and decoded, is decoded
     * and handled on the completion-queue thread itself; a larger one is
     * decoded and handled on the server's one "lane" thread, in arrival
     * order, so the queue thread never spends more than that cap's worth of
     * copying or decompression on one message. Others are decoded and
     * handled on the handler pool. The handler always gets its request
     * decoded. */
    RPC_METHOD_INLINE = 1u << 0,
    /* Served without the token on a server that has one (Ping). Its request
     * is read before anything is checked, so its payload is capped at
     * RPC_PUBLIC_MAX_PAYLOAD. Meaningless on a server without a token. */
    RPC_METHOD_PUBLIC = 1u << 1,
    /* With RPC_METHOD_INLINE: a raw (uncompressed) payload is not copied out
     * of gRPC's buffers but left there as runs (rpc_msg.runs), so that the
     * handler can read it in place, and such a request is handled on the
     * completion-queue thread whatever its size. An lz4 payload is decoded
     * as usual. */
    RPC_METHOD_PAYLOAD_RUNS = 1u << 2,
    /* Starts new work (a task call, a module load): refused with
     * FERRY_EUNAVAIL once the server drains for its shutdown, while the
     * other methods (pings, the peer traffic of calls already running) are
     * still served. */
    RPC_METHOD_NEW_WORK = 1u << 3,
};

typedef struct rpc_method {
    const char *name; /* "/ferry.Worker/Ping" */
    rpc_handler handler;
    void *data;
    unsigned flags;
    /* The largest request payload of this method, when below the server's
     * (0: the server's): LoadModule's is the cluster's max_module_bytes.
     * Checked, like the server's, before anything is allocated. */
    size_t max_payload;
} rpc_method;

/* Receives one line of the server's log (no newline): refusals, summarised.
 * Runs on the completion-queue thread: must not block. */
typedef void (*rpc_log_fn)(void *arg, const char *line);

typedef struct rpc_server_opts {
    const char *listen;  /* "127.0.0.1:0", "[::1]:5000"; port 0 picks a free one */
    size_t max_payload;  /* 0: RPC_DEFAULT_MAX_PAYLOAD */
    int handler_threads; /* 0: two per core, at least 4 */
    /* Where the server's queue is drained: NULL, a poller of its own; or a
     * poller it shares with clients (which must outlive the server). */
    rpc_poller *poller;
    /* NULL: no token. Otherwise every method not flagged RPC_METHOD_PUBLIC
     * needs metadata RPC_TOKEN_KEY equal to it (compared in constant time).
     * It is checked from the call's metadata on arrival, before the request
     * message is read, decoded or decompressed; a call without it, or with
     * a wrong one, ends with UNAUTHENTICATED. Copied. */
    const char *token;
    /* NULL: any caller. Otherwise a call whose metadata RPC_VERSION_KEY is
     * another text ends at once, before its token is looked at, with
     * UNIMPLEMENTED naming both versions; a call without it (another gRPC
     * client) is served. Copied. */
    const char *version;
    /* Where refusals are reported; NULL: nowhere. The first refusal after a
     * quiet interval gets a line of its own; the rest are counted and
     * summarised once per interval ("refused N calls ... in the last 10 s"). */
    rpc_log_fn log;
    void *log_arg;
    int log_interval_ms; /* 0: 10000 */
} rpc_server_opts;

/* Binds, registers `methods` (copied; name strings must outlive the server)
 * and starts serving. Calls to any other method get UNIMPLEMENTED. *out is
 * set before the first call is served, so that a handler may read it; it
 * is NULL again if creation fails.
 *
 * Status codes, following gRPC's conventions: a missing or wrong token
 * UNAUTHENTICATED (before anything else is looked at); a request that is
 * not a valid message INVALID_ARGUMENT; one over the payload limit
 * RESOURCE_EXHAUSTED. Names from the wire reach status texts escaped
 * (base_escape). Returns 0, FERRY_EADDRINUSE when the address is taken,
 * FERRY_EINVAL for a bad one. */
int rpc_server_create(const rpc_server_opts *opts, const rpc_method *methods,
                      size_t n_methods, rpc_server **out);

/* The bound port. */
int rpc_server_port(const rpc_server *s);

/* How many calls the server refused for a missing or wrong token. Any
 * thread. */
uint64_t rpc_server_refused(const rpc_server *s);

/* Bounds on connections, which cost a file descriptor each: one that has
 * not finished its HTTP/2 handshake in RPC_HANDSHAKE_TIMEOUT_MS, or has had
 * no call for RPC_MAX_CONNECTION_IDLE_MS, is closed (a client reconnects on
 * its next call); one carries at most RPC_MAX_CONCURRENT_STREAMS calls at
 * once (more wait in the client). */
#define RPC_HANDSHAKE_TIMEOUT_MS   10000
#define RPC_MAX_CONNECTION_IDLE_MS 60000
#define RPC_MAX_CONCURRENT_STREAMS 1024

/* Whether the server still accepts connections: connects to its own port
 * (on loopback for a wildcard address) and waits up to timeout_ms for the
 * HTTP/2 greeting. gRPC 1.51 stops accepting for good once accept() fails
 * with EMFILE, even after descriptors are free again; a daemon that sees
 * this should exit and be restarted. Returns 0 (it answered),
 * FERRY_EUNAVAIL (it did not), or -errno when no probe could be made (out
 * of descriptors: no verdict). Blocks; any thread. */
int rpc_server_probe(const rpc_server *s, int timeout_ms);

/* Whether a server could listen on `listen` now: 0, FERRY_EADDRINUSE when
 * something else holds the port, FERRY_EINVAL for a bad address, or -errno.
 * Lets a launcher say which port is taken before it starts anything. */
int rpc_listen_probe(const char *listen);

/* Drains, then stops: for up to `grace_ms` the server refuses methods
 * flagged RPC_METHOD_NEW_WORK but serves the others as before (so a
 * caller's pings still see it alive while its calls finish), until the
 * handler pool has nothing running or queued; then it stops accepting
 * calls, gives those in flight what is left of the grace, cancels the rest
 * and waits for their handlers to end them. Blocks; idempotent; any thread
 * but a handler's. */
void rpc_server_shutdown(rpc_server *s, int64_t grace_ms);

/* Shuts down (grace 0) if still running, and frees. NULL is a no-op. */
void rpc_server_destroy(rpc_server *s);

/* Ends the call with a reply. Any thread; once per call. Returns 0 or an
 * error (payload over the limit: the call is then failed for the client). */
int rpc_srv_reply(rpc_srv_call *sc, const rpc_msg_out *reply);

/* Ends the call with error `err` and a printf-style detail text that reaches
 * the caller. Any thread; once per call. */
int rpc_srv_fail(rpc_srv_call *sc, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The most bytes a failure carries beside its text. They travel as
 * trailing metadata (RPC_DETAIL_KEY, base64 on the wire), which gRPC caps
 * at 8 KiB a call by default. */
#define RPC_FAIL_DETAIL_MAX 4096
#define RPC_DETAIL_KEY      "ferry-detail-bin"

/* rpc_srv_fail() with `len` bytes of `detail` (copied; at most
 * RPC_FAIL_DETAIL_MAX, else not sent) that the caller reads as
 * rpc_call.detail: what a status text cannot hold, such as the lines a
 * task logged before it failed. */
int rpc_srv_fail_with(rpc_srv_call *sc, int err, const void *detail, size_t len,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* True once the client cancelled, the deadline passed or the server is
 * shutting down: a long handler should stop and fail with FERRY_ECANCELED. */
bool rpc_srv_cancelled(const rpc_srv_call *sc);

const char *rpc_srv_method(const rpc_srv_call *sc);
/* The client's address as gRPC names it ("ipv4:127.0.0.1:41234"). Static
 * for the life of the call. */
const char *rpc_srv_peer(const rpc_srv_call *sc);

/* ---- what each method served (counters.c) ------------------------------- */

/* gRPC's status codes, OK (0) to UNAUTHENTICATED (16). */
#define RPC_STATUS_CODES 17
/* A call's latency (matched to ended) falls in the first bucket whose
 * upper bound in seconds is at least it, or in the last, above them all:
 * Prometheus' default buckets, with 1 ms and 100 µs below. */
#define RPC_LATENCY_BUCKETS 13
extern const double rpc_latency_bounds_s[RPC_LATENCY_BUCKETS];

typedef struct rpc_method_stats {
    const char *name;                          /* the server's (rpc_method.name) */
    uint64_t calls[RPC_STATUS_CODES];          /* ended, by status */
    uint64_t bytes_in, bytes_out;              /* messages as on the wire */
    uint64_t latency[RPC_LATENCY_BUCKETS + 1]; /* calls in each bucket, not cumulative */
    double latency_s;                          /* their sum */
} rpc_method_stats;

/* A snapshot of every registered method's counters: at most `max` into
 * `out`; returns how many methods the server has. Any thread. */
size_t rpc_server_method_stats(rpc_server *s, rpc_method_stats *out, size_t max);

/* gRPC's name of a status code ("OK", "NOT_FOUND"). */
const char *rpc_status_name(int code);

/* ---- the handler pool's slots (slots.c) ------------------------------- */

/* What occupies the handler pool. A call "stuck" was cancelled (client gone,
 * deadline passed) and its handler has not returned. */
typedef struct rpc_slots_info {
    int slots, busy, stuck, queued;
    double oldest_s;  /* age of the oldest call running; 0: none */
    double stuck_s;   /* longest time since a running call was cancelled */
    char oldest[160]; /* what the oldest runs: "Call sleep.so spin" */
} rpc_slots_info;

/* Fills `out`. Takes the server's lock briefly: fine on the CQ thread. */
void rpc_server_slots(rpc_server *s, rpc_slots_info *out);
/* The same, for the server of the call `sc` (for inline handlers). */
void rpc_srv_slots(const rpc_srv_call *sc, rpc_slots_info *out);
/* "Call sleep.so spin for 41 s, cancelled 30 s ago; ..." for every busy slot. */
void rpc_server_holders(rpc_server *s, char *buf, size_t len);
/* When every slot is held by a cancelled call, fails the calls queued for
 * the pool with RESOURCE_EXHAUSTED naming the holders (a call arriving then
 * is failed the same way at once). Returns how many. Any thread. */
int rpc_server_shed(rpc_server *s);
/* Says what the handler of `sc`, running on a pool thread, is doing, for the
 * slot's description ("Call sleep.so spin"). Elsewhere a no-op. */
void rpc_srv_describe(rpc_srv_call *sc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Value of request metadata `key` (lower case), or NULL; lives as long as the
 * call. */
const char *rpc_srv_metadata(const rpc_srv_call *sc, const char *key, size_t *len);

/* ---- errors ----------------------------------------------------------- */

/* Maps a gRPC status code (grpc_status_code) to a FERRY_E* code and back. */
int rpc_status_to_err(int grpc_status);
int rpc_err_to_status(int err);

#ifdef __cplusplus
}
#endif
#endif

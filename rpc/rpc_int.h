/* rpc — private header shared by the files of this folder (and its tests). */
#ifndef FERRY_RPC_INT_H
#define FERRY_RPC_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "rpc.h"

/* ---- completion tags ---------------------------------------------------
 * Every batch started on a completion queue carries an rpc_tag. The thread
 * that drains the queue (client: bridge, server: its CQ thread) records the
 * outcome and runs `done` on the thread the owner chose. */
typedef struct rpc_tag rpc_tag;
struct rpc_tag {
    void (*done)(rpc_tag *tag, bool ok);
    rpc_tag *next; /* bridge's ready list */
    bool ok;
};

/* ---- bridge: CQ thread -> libuv loop ---------------------------------- */
typedef struct rpc_bridge {
    grpc_completion_queue *cq;
    uv_thread_t thread;
    uv_async_t async;
    uv_mutex_t lock;
    rpc_tag *ready_head, *ready_tail; /* guarded by lock */
    void (*closed_cb)(struct rpc_bridge *b);
} rpc_bridge;

/* 0, or an error. After an error with *closing set, the async handle was
 * made and is closing: `b` must stay until failed_cb(b) runs from the
 * loop; without it, nothing is left and `b` may go at once. */
int rpc_bridge_init(rpc_bridge *b, uv_loop_t *loop, void (*failed_cb)(rpc_bridge *b),
                    bool *closing);
/* Shuts the queue down (no batch may be outstanding), joins the thread and
 * closes the async handle; closed_cb runs from the loop once it is closed. */
void rpc_bridge_close(rpc_bridge *b, void (*closed_cb)(rpc_bridge *b));

/* ---- poller ------------------------------------------------------------ */

/* Runs on the poller's thread before it waits for each event, and with
 * `final` once its queue has shut down; returns whether it wants to run
 * again within a second even without an event. */
typedef bool (*rpc_poller_hook_fn)(void *arg, bool final);

struct rpc_poller {
    grpc_completion_queue *cq;
    pthread_t thread;
    pthread_mutex_t mu; /* the hooks */
    struct rpc_hook *hooks;
    atomic_int n_hooks;
};

int rpc_poller_hook(rpc_poller *p, rpc_poller_hook_fn fn, void *arg);
void rpc_poller_unhook(rpc_poller *p, rpc_poller_hook_fn fn, void *arg);

/* ---- client ------------------------------------------------------------ */
struct rpc_client {
    uv_loop_t *loop;        /* NULL: a client on a poller */
    grpc_completion_queue *cq; /* the bridge's or the poller's */
    rpc_bridge bridge;
    rpc_poller *poller;
    rpc_guard guard;
    size_t channels; /* open channels */
    size_t ops;      /* calls in flight */
    bool closing;
    int callback_depth; /* > 0 while a completion callback runs */
};

typedef struct rpc_method_reg {
    char *name;
    void *handle; /* grpc_channel_register_call */
    struct rpc_method_reg *next;
} rpc_method_reg;

struct rpc_channel {
    rpc_client *client;
    grpc_channel *gch;
    char *target;
    char *token;
    char *version; /* RPC_VERSION_KEY's value, or NULL */
    size_t max_payload;
    rpc_method_reg *methods;
    rpc_op *ops; /* in flight, doubly linked */
    size_t refs; /* the owner's, plus one per call in flight */
    bool destroyed;
    bool tls_probed; /* tls_why is the probe's answer (NULL: none) */
    char *tls_why;
};

struct rpc_op {
    rpc_tag tag;
    rpc_call *call;
    rpc_channel *ch;
    grpc_call *gc;
    const char *method; /* the registration's copy */
    rpc_op *prev, *next;
    grpc_metadata md[2]; /* the token and the version, those sent */
    grpc_metadata_array md_initial, md_trailing;
    grpc_byte_buffer *send, *recv;
    grpc_status_code status;
    grpc_slice details;
    gpr_timespec deadline; /* monotonic; infinite: none */
    atomic_bool cancelled; /* by ferry: rpc_call_cancel, a destroyed channel */
};

void rpc_client_op_started(rpc_client *c);
void rpc_client_op_done(rpc_client *c);
void rpc_client_channel_done(rpc_client *c);

/* The registration of `method` on `ch`, made on first use; NULL on ENOMEM. */
rpc_method_reg *rpc_channel_method(rpc_channel *ch, const char *method);
/* Links a call in flight; it holds a reference on the channel. */
void rpc_channel_link(rpc_channel *ch, rpc_op *op);
void rpc_channel_unlink(rpc_channel *ch, rpc_op *op);
/* Drops a call's reference: the channel is freed if it was destroyed and
 * this was its last call. */
void rpc_channel_release(rpc_channel *ch);

/* ---- codec ------------------------------------------------------------- */

/* Builds the wire message for `m`: payload fields first, then the packed
 * head. Fails with FERRY_EMSGSIZE when the payload exceeds `max_payload`.
 * With m->payload_free set, the payload is lent to the buffer on success
 * (released by gRPC's last unref); without, it is copied. */
int rpc_codec_encode(const rpc_msg_out *m, size_t max_payload, grpc_byte_buffer **out);

/* Decodes a received wire message into `out` (zeroed first). Returns 0,
 * FERRY_ECORRUPT (malformed, truncated or failed checksum) or FERRY_EMSGSIZE
 * (declared or actual payload over `max_payload`), with a detail text in
 * err[errlen]. Never reads past the buffer. */
int rpc_codec_decode(grpc_byte_buffer *bb, size_t max_payload, rpc_msg *out, char *err,
                     size_t errlen);

/* rpc_codec_decode() that gives up, before it allocates or decompresses
 * anything, with RPC_DECODE_DEFER when the message is over `defer_above`
 * bytes on the wire or declares a payload over it: the caller decodes it
 * again elsewhere. Limits and malformed framing met first are reported as
 * rpc_codec_decode() reports them. */
#define RPC_DECODE_DEFER 1
int rpc_codec_decode_capped(grpc_byte_buffer *bb, size_t max_payload, size_t defer_above,
                            rpc_msg *out, char *err, size_t errlen);
/* rpc_codec_decode_capped() that, with `runs`, leaves a raw payload in `bb`
 * (out->runs; out->bb is then `bb`, which `out` owns from then on: the
 * caller no longer destroys it). A raw payload is never deferred then. */
int rpc_codec_decode_runs(grpc_byte_buffer *bb, size_t max_payload, size_t defer_above,
                          bool runs, rpc_msg *out, char *err, size_t errlen);

/* ---- wire reader: protobuf varints across slice boundaries -------------- */
typedef struct rpc_wire_reader {
    grpc_byte_buffer_reader r;
    const uint8_t *p, *end; /* current slice */
    size_t left;            /* bytes not yet read, in total */
} rpc_wire_reader;

int rpc_wire_reader_init(rpc_wire_reader *w, grpc_byte_buffer *bb);
void rpc_wire_reader_fini(rpc_wire_reader *w);
int rpc_wire_read_varint(rpc_wire_reader *w, uint64_t *v);
/* Copies n bytes into dst (NULL: skips them). */
int rpc_wire_read(rpc_wire_reader *w, void *dst, size_t n);
/* Returns a pointer to the next contiguous run of at most n bytes and its
 * length, advancing past it; 0 at the end. */
size_t rpc_wire_next_run(rpc_wire_reader *w, size_t n, const uint8_t **run);

/* Protobuf varint encoding into buf (>= 10 bytes); returns bytes written. */
size_t rpc_varint_put(uint8_t *buf, uint64_t v);

/* ---- server ------------------------------------------------------------ */
/* A method's counters (counters.c), updated lock-free by every call. */
typedef struct rpc_method_counters {
    atomic_uint_fast64_t calls[RPC_STATUS_CODES];
    atomic_uint_fast64_t bytes_in, bytes_out;
    atomic_uint_fast64_t latency[RPC_LATENCY_BUCKETS + 1];
    atomic_uint_fast64_t latency_ns;
} rpc_method_counters;

typedef struct rpc_srv_entry {
    rpc_method m;
    void *handle; /* grpc_server_register_method */
    rpc_method_counters counts;
} rpc_srv_entry;

/* Counts a request's bytes as it arrives, and a call as it ends. */
void rpc_count_request(rpc_srv_call *sc, size_t bytes);
void rpc_count_end(rpc_srv_call *sc, int status, size_t bytes_out);

/* A queue of calls for threads to decode and handle: the handler pool's, or
 * the inline lane's. Guarded by the server's lock. */
/* One thread of the handler pool and the call it runs (slots.c). */
#define RPC_SLOT_WHAT 160
typedef struct rpc_slot {
    rpc_srv_call *sc; /* NULL: idle; else holds a reference */
    uint64_t since_ns;
    char what[RPC_SLOT_WHAT]; /* the method, or what the handler said (rpc_srv_describe) */
} rpc_slot;

typedef struct rpc_srv_queue {
    rpc_srv_call *head, *tail;
    uv_cond_t cond; /* work queued, or pool_exit */
} rpc_srv_queue;

/* Refusals of calls without the token, kept by the completion-queue thread
 * alone (no lock): counted, and logged as a summary once per interval. */
typedef struct rpc_refusals {
    uint64_t interval_ns;
    uint64_t last_line_ns; /* when a line was last logged; 0: never */
    uint64_t pending;      /* refused since that line, not yet logged */
    uint64_t pending_since_ns;
    char first[256]; /* "<method> from <peer>: <why>" of the first pending */
} rpc_refusals;

struct rpc_server {
    grpc_server *gs;
    grpc_completion_queue *cq; /* the poller's */
    rpc_poller *poller;
    bool own_poller;
    uv_thread_t *pool;
    int n_pool;
    uv_thread_t lane; /* decodes and handles large inline requests */
    bool lane_started;
    rpc_srv_entry *methods;
    size_t n_methods;
    size_t max_payload;
    bool tls; /* listens for TLS: probed with a ClientHello */
    int port;
    char host[256]; /* as listened on, without brackets; "" for any */
    char *token;    /* NULL: none needed */
    size_t token_len;
    char *version; /* NULL: callers of any version served */
    rpc_log_fn log;
    void *log_arg;
    rpc_refusals refusals;
    atomic_uint_fast64_t refused;

    uv_mutex_t lock;
    uv_cond_t drained;       /* shutdown_done, or live_calls reached 0 while stopping */
    rpc_srv_queue work;      /* the handler pool's */
    rpc_slot *slots;         /* one per pool thread; guarded by lock */
    int n_slots;
    atomic_int next_slot;    /* the index the next pool thread takes */
    rpc_srv_queue lane_work; /* the lane's */
    size_t live_calls;       /* guarded by lock */
    bool stopping;           /* guarded by lock */
    atomic_bool draining;    /* refusing RPC_METHOD_NEW_WORK before stopping */
    bool shutdown_done;      /* guarded by lock */
    bool pool_exit;          /* guarded by lock */
    bool shut;               /* rpc_server_shutdown ran */
    bool started, hooked;
    rpc_tag shutdown_tag;
};

struct rpc_srv_call {
    rpc_tag request_tag, recv_tag, close_tag, reply_tag;
    rpc_server *srv;
    rpc_srv_entry *method; /* NULL: an unregistered method */
    grpc_call *gc;
    gpr_timespec deadline;
    grpc_call_details details; /* unregistered methods only */
    grpc_metadata_array md;
    grpc_byte_buffer *req_bb, *reply_bb;
    grpc_slice status_details;
    grpc_metadata trailer; /* a failure's detail (rpc_srv_fail_with); empty: none */
    rpc_msg req;
    _Atomic(char *) peer; /* made on first rpc_srv_peer() */
    int cancelled_flag;   /* written by RECV_CLOSE_ON_SERVER */
    bool close_pending;   /* a separate close batch watches for cancellation */
    atomic_bool cancelled;
    _Atomic uint64_t cancelled_ns; /* when it was seen cancelled; 0: not */
    uint64_t began_ns;             /* when it was matched: its latency's start */
    atomic_bool ended; /* reply or fail started */
    atomic_int refs;
    rpc_srv_call *queue_next;
};

/* Whether calls of `m` must carry the server's token. */
static inline bool rpc_srv_needs_token(const rpc_server *s, const rpc_srv_entry *m)
{
    return s->token && !(m->m.flags & RPC_METHOD_PUBLIC);
}

/* Posts one request for a registered method (method != NULL) or for any
 * unregistered one (method == NULL). Returns 0 or an error during shutdown. */
int rpc_srv_call_post(rpc_server *s, rpc_srv_entry *method);
/* Runs the call's handler inline (CQ thread) or queues it for the pool or
 * the lane. */
void rpc_srv_dispatch(rpc_srv_call *sc);
/* Decodes the request and runs the handler (or fails a bad request). With
 * defer_above < SIZE_MAX, returns false without doing anything when the
 * request is larger than that (see rpc_codec_decode_capped); else true. */
bool rpc_srv_call_run(rpc_srv_call *sc, size_t defer_above);
void rpc_server_call_ended(rpc_server *s);
/* A reference more on a call, and giving one back (the last frees it; never
 * under the server's lock). */
void rpc_srv_call_ref(rpc_srv_call *sc);
void rpc_srv_call_unref(rpc_srv_call *sc);
/* A pool thread takes `sc` into its slot, and leaves it (returning the call
 * whose reference the caller then gives back). Under the server's lock. */
void rpc_slot_enter(rpc_slot *slot, rpc_srv_call *sc);
rpc_srv_call *rpc_slot_leave(rpc_slot *slot);
/* Fails `sc` with FERRY_EAGAIN naming the holders when every slot is held
 * by a cancelled call; returns whether it did. Any thread but one holding
 * the lock. */
bool rpc_slots_refuse(rpc_server *s, rpc_srv_call *sc);
/* Counts (and maybe logs) a call refused for its token; CQ thread. */
void rpc_server_refusal(rpc_server *s, rpc_srv_call *sc, const char *why);

/* ---- misc -------------------------------------------------------------- */
gpr_timespec rpc_deadline(int64_t timeout_ms);
/* Whether a client call that ended with `status` ended because its deadline
 * passed: gRPC's DEADLINE_EXCEEDED is best effort (the server's own timer
 * may fire first and reset the stream, and the client then sees what the
 * reset maps to: CANCELLED, INTERNAL or UNKNOWN). True for those statuses
 * when ferry did not cancel the call and the deadline has passed. */
bool rpc_status_by_deadline(grpc_status_code status, gpr_timespec deadline, bool cancelled);
/* Fills gRPC's max receive and send message length args for a payload
 * limit; channel and server both use them. */
void rpc_grpc_size_args(grpc_arg args[2], size_t max_payload);

/* ---- TLS (tls.c, tls_errors.c) ---------------------------------------- */

/* What rpc_tls_use() set, as fresh credentials to release after use:
 * insecure ones when TLS is off. The server's is NULL when TLS is on
 * without a certificate of its own. */
grpc_channel_credentials *rpc_tls_channel_credentials(void);
grpc_server_credentials *rpc_tls_server_credentials(void);

/* Whether TLS is on; *has_cert: with a certificate of our own; *ca: a
 * copy of the CA's PEM text to free (NULL: none). Either may be NULL. */
bool rpc_tls_state(bool *has_cert, char **ca);

/* A failed call's status and gRPC's detail text as a sentence that says
 * what went wrong with TLS, or with plain text against TLS ("the worker's
 * certificate has expired (...)"), to free; NULL when the failure does not
 * look like either. A refused certificate is probed (rpc_tls_probe) once
 * per channel, on the thread the call completes on. */
char *rpc_tls_explain(rpc_channel *ch, grpc_status_code status, const char *detail);

/* tls_probe.c, with OpenSSL. Connects to `target` (a channel's), takes its
 * certificate whatever it is, and checks it against `ca_pem` (NULL: the
 * system's roots) and the target's host: true with `out` set to why it
 * fails ("the worker's certificate has expired (valid until ...)"), false
 * when it passes or cannot be fetched. Blocks up to a second a step. */
bool rpc_tls_probe(const char *target, const char *ca_pem, char *out, size_t len);

/* Sends a TLS ClientHello on the connected, non-blocking socket `fd`: a
 * TLS server answers it as an HTTP/2 one answers the client preface.
 * Returns 0 once sent, FERRY_EUNAVAIL otherwise. */
int rpc_tls_hello(int fd);

/* Checks this process's own certificate (the first of `cert_pem`, with
 * the rest as its chain): its dates, and, given `ca_pem`, that the CA
 * signed it. 0, or FERRY_EINVAL with `out` set ("its certificate has
 * expired (...)"). */
int rpc_tls_check_own(const char *cert_pem, const char *ca_pem, char *out, size_t len);

#endif

/* One incoming call on the server, from its arrival to its last event.
 *
 * Lifetime: an rpc_srv_call holds the handler's reference, given up when the
 * reply (or failure) batch completes, and, for handlers on the pool, the
 * reference of a separate RECV_CLOSE_ON_SERVER batch that completes when the
 * call is over on the wire and says whether the client cancelled. The last
 * one frees it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_int.h"

static void sc_free(rpc_srv_call *sc)
{
    grpc_metadata_array_destroy(&sc->md);
    if (!sc->method)
        grpc_call_details_destroy(&sc->details);
    if (sc->req_bb)
        grpc_byte_buffer_destroy(sc->req_bb);
    if (sc->reply_bb)
        grpc_byte_buffer_destroy(sc->reply_bb);
    grpc_slice_unref(sc->status_details);
    grpc_slice_unref(sc->trailer.value);
    rpc_msg_fini(&sc->req);
    gpr_free(atomic_load(&sc->peer));
    if (sc->gc)
        grpc_call_unref(sc->gc);
    free(sc);
}

/* Every posted request is counted until freed, matched or not, so that
 * shutdown can wait until no call object is left. */
static void sc_release(rpc_srv_call *sc)
{
    rpc_server *s = sc->srv;
    sc_free(sc);
    rpc_server_call_ended(s);
}

static void sc_unref(rpc_srv_call *sc)
{
    if (atomic_fetch_sub(&sc->refs, 1) == 1)
        sc_release(sc);
}

void rpc_srv_call_ref(rpc_srv_call *sc)
{
    atomic_fetch_add(&sc->refs, 1);
}

void rpc_srv_call_unref(rpc_srv_call *sc)
{
    sc_unref(sc);
}

static void close_done(rpc_tag *tag, bool ok)
{
    rpc_srv_call *sc = (rpc_srv_call *)((char *)tag - offsetof(rpc_srv_call, close_tag));
    if (!ok || sc->cancelled_flag) {
        atomic_store(&sc->cancelled_ns, uv_hrtime());
        atomic_store(&sc->cancelled, true);
    }
    sc_unref(sc);
}

static void reply_done(rpc_tag *tag, bool ok)
{
    rpc_srv_call *sc = (rpc_srv_call *)((char *)tag - offsetof(rpc_srv_call, reply_tag));
    (void)ok; /* a reply to a cancelled call just goes nowhere */
    sc_unref(sc);
}

/* Starts the batch that ends the call; gives up the handler's reference if
 * it cannot. */
static int end_call(rpc_srv_call *sc, grpc_byte_buffer *msg, grpc_status_code status)
{
    rpc_count_end(sc, status, msg ? grpc_byte_buffer_length(msg) : 0);
    grpc_op ops[4];
    size_t n = 0;
    memset(ops, 0, sizeof ops);
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (!sc->close_pending) {
        /* No separate close batch: end the call in one batch of four, one
         * completion instead of two (the bare-gRPC server's recipe). */
        ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        ops[n++].data.recv_close_on_server.cancelled = &sc->cancelled_flag;
    }
    if (msg) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = msg;
    }
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = status;
    ops[n++].data.send_status_from_server.status_details =
        status == GRPC_STATUS_OK ? NULL : &sc->status_details;
    if (status != GRPC_STATUS_OK && !GRPC_SLICE_IS_EMPTY(sc->trailer.value)) {
        ops[n - 1].data.send_status_from_server.trailing_metadata_count = 1;
        ops[n - 1].data.send_status_from_server.trailing_metadata = &sc->trailer;
    }
    if (grpc_call_start_batch(sc->gc, ops, n, &sc->reply_tag, NULL) != GRPC_CALL_OK) {
        sc_unref(sc);
        return FERRY_EINTERNAL;
    }
    return 0;
}

static int fail_v(rpc_srv_call *sc, int err, const char *fmt, va_list ap)
{
    char text[1024], safe[1024];
    vsnprintf(text, sizeof text, fmt, ap);
    /* The text may quote the wire (a function's name): no control bytes
     * reach the client's terminal. UTF-8 stays as it is. */
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)text; *p && n + 5 < sizeof safe;
         p++) {
        if (*p < 0x20 || *p == 0x7f)
            n += (size_t)snprintf(safe + n, sizeof safe - n, "\\x%02x", *p);
        else
            safe[n++] = (char)*p;
    }
    safe[n] = '\0';
    sc->status_details = grpc_slice_from_copied_string(safe);
    int status = rpc_err_to_status(err);
    return end_call(sc, NULL, status == GRPC_STATUS_OK ? GRPC_STATUS_UNKNOWN : status);
}

int rpc_srv_fail_with(rpc_srv_call *sc, int err, const void *detail, size_t len,
                      const char *fmt, ...)
{
    if (!sc || atomic_exchange(&sc->ended, true))
        return FERRY_EINVAL;
    if (detail && len && len <= RPC_FAIL_DETAIL_MAX)
        sc->trailer.value = grpc_slice_from_copied_buffer(detail, len);
    va_list ap;
    va_start(ap, fmt);
    int rc = fail_v(sc, err, fmt, ap);
    va_end(ap);
    return rc;
}

static int fail_now(rpc_srv_call *sc, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = fail_v(sc, err, fmt, ap);
    va_end(ap);
    return rc;
}

int rpc_srv_fail(rpc_srv_call *sc, int err, const char *fmt, ...)
{
    if (!sc || atomic_exchange(&sc->ended, true))
        return FERRY_EINVAL;
    va_list ap;
    va_start(ap, fmt);
    int rc = fail_v(sc, err, fmt, ap);
    va_end(ap);
    return rc;
}

int rpc_srv_reply(rpc_srv_call *sc, const rpc_msg_out *reply)
{
    static const rpc_msg_out empty = {0};
    if (!sc || atomic_exchange(&sc->ended, true))
        return FERRY_EINVAL;
    const rpc_msg_out *m = reply ? reply : &empty;
    int rc = rpc_codec_encode(m, sc->srv->max_payload, &sc->reply_bb);
    if (rc) {
        fail_now(sc, rc, "reply of %s: %zu-byte payload, limit %zu: %s",
                 rpc_srv_method(sc), m->payload_len, sc->srv->max_payload,
                 ferry_strerror(rc));
        return rc;
    }
    return end_call(sc, sc->reply_bb, GRPC_STATUS_OK);
}

bool rpc_srv_cancelled(const rpc_srv_call *sc)
{
    return atomic_load(&sc->cancelled);
}

const char *rpc_srv_method(const rpc_srv_call *sc)
{
    return sc->method ? sc->method->m.name : "(unregistered)";
}

const char *rpc_srv_peer(const rpc_srv_call *sc)
{
    /* Made lazily: grpc_call_get_peer() allocates, and most calls never ask. */
    rpc_srv_call *m = (rpc_srv_call *)sc;
    char *p = atomic_load(&m->peer);
    if (!p) {
        char *fresh = grpc_call_get_peer(m->gc);
        if (atomic_compare_exchange_strong(&m->peer, &p, fresh))
            p = fresh;
        else
            gpr_free(fresh); /* another thread won; p holds its string */
    }
    return p ? p : "unknown";
}

const char *rpc_srv_metadata(const rpc_srv_call *sc, const char *key, size_t *len)
{
    for (size_t i = 0; i < sc->md.count; i++) {
        const grpc_metadata *m = &sc->md.metadata[i];
        if (grpc_slice_str_cmp(m->key, key) == 0) {
            if (len)
                *len = GRPC_SLICE_LENGTH(m->value);
            return (const char *)GRPC_SLICE_START_PTR(m->value);
        }
    }
    return NULL;
}

/* A caller of another version is told so at its first call, both
 * versions named, whatever it calls (Ping included). */
static bool refuse_version(rpc_srv_call *sc)
{
    rpc_server *s = sc->srv;
    size_t len = 0;
    const char *theirs = s->version ? rpc_srv_metadata(sc, RPC_VERSION_KEY, &len) : NULL;
    if (!theirs || (len == strlen(s->version) && !memcmp(theirs, s->version, len)))
        return false;
    rpc_server_refusal(s, sc, "another ferry version");
    fail_now(sc, FERRY_ENOTSUP,
             "this worker speaks %s; the caller speaks %.*s: run one ferry "
             "on every host",
             s->version, (int)(len > 100 ? 100 : len), theirs);
    return true;
}

static void request_done(rpc_tag *tag, bool ok)
{
    rpc_srv_call *sc =
        (rpc_srv_call *)((char *)tag - offsetof(rpc_srv_call, request_tag));
    rpc_server *s = sc->srv;
    if (!ok) { /* the server is shutting down: the request was never matched */
        sc_release(sc);
        return;
    }
    sc->began_ns = uv_hrtime();
    uv_mutex_lock(&s->lock);
    bool stopping = s->stopping;
    uv_mutex_unlock(&s->lock);
    if (!stopping) /* keep the method's requests posted */
        rpc_srv_call_post(s, sc->method);

    /* A pooled handler may run long: learn at once when the client goes
     * away, so rpc_srv_cancelled() can tell it. Inline handlers end the call
     * before returning and need no such watch. */
    atomic_store(&sc->refs, 1);
    if (sc->method && !(sc->method->m.flags & RPC_METHOD_INLINE)) {
        grpc_op close_op;
        memset(&close_op, 0, sizeof close_op);
        close_op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        close_op.data.recv_close_on_server.cancelled = &sc->cancelled_flag;
        atomic_store(&sc->refs, 2);
        sc->close_pending = true;
        if (grpc_call_start_batch(sc->gc, &close_op, 1, &sc->close_tag, NULL) !=
            GRPC_CALL_OK) {
            atomic_store(&sc->refs, 1);
            sc->close_pending = false;
        }
    }

    /* The failures below come before any handler could end the call. */
    if (!sc->method) {
        char safe[160];
        grpc_slice m = sc->details.method;
        base_escape(safe, sizeof safe, (const char *)GRPC_SLICE_START_PTR(m),
                    GRPC_SLICE_LENGTH(m));
        fail_now(sc, FERRY_ENOTSUP, "method %s is not served here", safe);
        return;
    }
    if (refuse_version(sc))
        return;
    if (rpc_srv_needs_token(s, sc->method)) {
        /* From the metadata alone: the message is not even read yet. */
        size_t len = 0;
        const char *tok = rpc_srv_metadata(sc, RPC_TOKEN_KEY, &len);
        volatile unsigned char diff = tok && len == s->token_len ? 0 : 1;
        for (size_t i = 0; !diff && i < len; i++)
            diff |= (unsigned char)(tok[i] ^ s->token[i]);
        if (diff) {
            const char *why = tok ? "wrong cluster token" : "missing cluster token";
            rpc_server_refusal(s, sc, why);
            fail_now(sc, FERRY_EUNAUTH, "%s (metadata %s)", why, RPC_TOKEN_KEY);
            return;
        }
        grpc_op op;
        memset(&op, 0, sizeof op);
        op.op = GRPC_OP_RECV_MESSAGE;
        op.data.recv_message.recv_message = &sc->req_bb;
        if (grpc_call_start_batch(sc->gc, &op, 1, &sc->recv_tag, NULL) != GRPC_CALL_OK)
            fail_now(sc, FERRY_EINTERNAL, "%s: cannot read the request",
                     rpc_srv_method(sc));
        return; /* recv_done goes on */
    }
    if (!sc->req_bb) {
        fail_now(sc, FERRY_EINVAL, "%s: request carried no message", rpc_srv_method(sc));
        return;
    }
    rpc_srv_dispatch(sc);
}

/* The request of a call whose token was good has arrived. CQ thread. */
static void recv_done(rpc_tag *tag, bool ok)
{
    rpc_srv_call *sc = (rpc_srv_call *)((char *)tag - offsetof(rpc_srv_call, recv_tag));
    if (!ok) {
        fail_now(sc, FERRY_ECANCELED, "%s: the request did not arrive",
                 rpc_srv_method(sc));
        return;
    }
    if (!sc->req_bb) {
        fail_now(sc, FERRY_EINVAL, "%s: request carried no message", rpc_srv_method(sc));
        return;
    }
    rpc_srv_dispatch(sc);
}

bool rpc_srv_call_run(rpc_srv_call *sc, size_t defer_above)
{
    /* Decoding copies the whole payload: done on the thread that runs the
     * handler, the queue thread goes straight back to reading the socket
     * and the next message arrives while this one is copied. */
    rpc_server *s = sc->srv;
    size_t limit = s->max_payload;
    if (s->token && (sc->method->m.flags & RPC_METHOD_PUBLIC) &&
        limit > RPC_PUBLIC_MAX_PAYLOAD)
        limit = RPC_PUBLIC_MAX_PAYLOAD;
    if (sc->method->m.max_payload && sc->method->m.max_payload < limit)
        limit = sc->method->m.max_payload;
    char err[256];
    bool runs = (sc->method->m.flags & RPC_METHOD_PAYLOAD_RUNS) != 0;
    int rc = rpc_codec_decode_runs(sc->req_bb, limit, defer_above, runs, &sc->req, err,
                                   sizeof err);
    if (rc == RPC_DECODE_DEFER)
        return false;
    if (sc->req.bb != sc->req_bb) /* else the payload's runs keep it */
        grpc_byte_buffer_destroy(sc->req_bb);
    sc->req_bb = NULL;
    if (rc) {
        /* gRPC's conventions: a message too large is RESOURCE_EXHAUSTED, one
         * that is not a valid message INVALID_ARGUMENT (DATA_LOSS is for
         * data lost in the worker's own keeping). */
        fail_now(sc, rc == FERRY_ECORRUPT ? FERRY_EINVAL : rc, "%s: bad request: %s",
                 rpc_srv_method(sc), err);
        return true;
    }
    sc->method->m.handler(sc, &sc->req, sc->method->m.data);
    return true;
}

int rpc_srv_call_post(rpc_server *s, rpc_srv_entry *method)
{
    rpc_srv_call *sc = calloc(1, sizeof *sc);
    if (!sc)
        return FERRY_ENOMEM;
    sc->srv = s;
    sc->method = method;
    sc->request_tag.done = request_done;
    sc->recv_tag.done = recv_done;
    sc->close_tag.done = close_done;
    sc->reply_tag.done = reply_done;
    sc->status_details = grpc_empty_slice();
    sc->trailer.key = grpc_slice_from_static_string(RPC_DETAIL_KEY);
    sc->trailer.value = grpc_empty_slice();
    grpc_metadata_array_init(&sc->md);
    uv_mutex_lock(&s->lock);
    s->live_calls++;
    uv_mutex_unlock(&s->lock);
    grpc_call_error e;
    if (method) {
        /* A method that needs the token reads its message only once it is
         * seen (request_done). */
        e = grpc_server_request_registered_call(
            s->gs, method->handle, &sc->gc, &sc->deadline, &sc->md,
            rpc_srv_needs_token(s, method) ? NULL : &sc->req_bb, s->cq, s->cq,
            &sc->request_tag);
    } else {
        grpc_call_details_init(&sc->details);
        e = grpc_server_request_call(s->gs, &sc->gc, &sc->details, &sc->md, s->cq, s->cq,
                                     &sc->request_tag);
    }
    if (e != GRPC_CALL_OK) {
        sc_release(sc);
        return FERRY_ESHUTDOWN;
    }
    return 0;
}

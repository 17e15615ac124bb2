/* A unary call: one registered call and one six-op batch, which gRPC
 * completes with exactly one event; the bridge delivers it on the loop, or
 * the poller runs it on its thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_int.h"

/* "peer <target> method <name>: <what>[: <detail>]" */
static void call_set_error(rpc_call *call, int err, const char *what, const char *detail)
{
    call->result = err;
    call->errmsg =
        base_asprintf("peer %s method %s: %s%s%s", rpc_channel_target(call->ch),
                      call->op->method, what, detail ? ": " : "", detail ? detail : "");
}

/* The failure's detail bytes among the trailing metadata, if sent. */
static void keep_detail(rpc_call *call, const grpc_metadata_array *md)
{
    for (size_t i = 0; i < md->count; i++) {
        if (!grpc_slice_str_cmp(md->metadata[i].key, RPC_DETAIL_KEY)) {
            size_t len = GRPC_SLICE_LENGTH(md->metadata[i].value);
            if (len == 0 || len > RPC_FAIL_DETAIL_MAX || !(call->detail = malloc(len)))
                return;
            memcpy(call->detail, GRPC_SLICE_START_PTR(md->metadata[i].value), len);
            call->detail_len = len;
            return;
        }
    }
}

static void op_finish(rpc_op *op)
{
    rpc_call *call = op->call;
    if (op->status == GRPC_STATUS_OK && !op->recv) {
        call_set_error(call, FERRY_ECORRUPT, "the server sent no reply message", NULL);
    } else if (op->status == GRPC_STATUS_OK) {
        char err[256];
        int rc = rpc_codec_decode(op->recv, op->ch->max_payload, &call->reply, err,
                                  sizeof err);
        if (rc)
            call_set_error(call, rc, err, NULL);
    } else {
        char *details = grpc_slice_to_c_string(op->details);
        const char *detail = details && *details ? details : NULL;
        if (rpc_status_by_deadline(op->status, op->deadline,
                                   atomic_load(&op->cancelled))) {
            char what[64];
            snprintf(what, sizeof what, "DEADLINE_EXCEEDED (gRPC said %s)",
                     rpc_status_name(op->status));
            call_set_error(call, FERRY_ETIMEDOUT, what, detail);
        } else {
            char *tls = rpc_tls_explain(op->ch, op->status, detail);
            char *what =
                tls ? base_asprintf("%s: %s", rpc_status_name(op->status), tls) : NULL;
            call_set_error(call, rpc_status_to_err(op->status),
                           what ? what : rpc_status_name(op->status), detail);
            free(what);
            free(tls);
        }
        gpr_free(details);
        keep_detail(call, &op->md_trailing);
    }
}

static void op_free(rpc_op *op)
{
    grpc_metadata_array_destroy(&op->md_initial);
    grpc_metadata_array_destroy(&op->md_trailing);
    if (op->send)
        grpc_byte_buffer_destroy(op->send);
    if (op->recv)
        grpc_byte_buffer_destroy(op->recv);
    grpc_slice_unref(op->details);
    if (op->gc)
        grpc_call_unref(op->gc);
    free(op);
}

static void op_done(rpc_tag *tag, bool ok)
{
    rpc_op *op = (rpc_op *)tag;
    rpc_call *call = op->call;
    rpc_channel *ch = op->ch;
    rpc_client *c = ch->client;
    /* On a poller: the owner's exclusion, kept until the client may be
     * gone (closing frees it with the last call). */
    rpc_guard guard = c->guard;
    bool on_poller = c->poller != NULL;
    if (on_poller)
        guard.enter(guard.arg);

    if (!ok) {
        /* A client batch fails as a whole only when gRPC itself is broken. */
        op->status = GRPC_STATUS_INTERNAL;
    }
    op_finish(op);
    rpc_channel_unlink(ch, op);
    op_free(op);
    call->op = NULL;
    call->done = true;

    /* The callback may destroy the channel or free the call: the channel
     * stays referenced by this op until it has returned. */
    rpc_call_cb cb = call->cb;
    if (cb) {
        c->callback_depth++;
        cb(call);
        c->callback_depth--;
    }
    rpc_channel_release(ch);
    rpc_client_op_done(c);
    if (on_poller)
        guard.leave(guard.arg);
}

int rpc_call_start(rpc_channel *ch, rpc_call *call, const char *method,
                   const rpc_msg_out *req, int64_t timeout_ms, rpc_call_cb cb)
{
    static const rpc_msg_out empty = {0};
    if (!ch || !call || !method || ch->destroyed || ch->client->closing)
        return FERRY_EINVAL;

    /* call->ch stays NULL unless the call starts, so waiting on a call
     * whose start failed returns at once instead of spinning. */
    void *data = call->data;
    memset(call, 0, sizeof *call);
    call->data = data;
    call->cb = cb;

    rpc_method_reg *reg = rpc_channel_method(ch, method);
    rpc_op *op = calloc(1, sizeof *op);
    if (!reg || !op) {
        free(op);
        return FERRY_ENOMEM;
    }
    op->tag.done = op_done;
    op->call = call;
    op->ch = ch;
    op->method = reg->name;
    op->details = grpc_empty_slice();
    grpc_metadata_array_init(&op->md_initial);
    grpc_metadata_array_init(&op->md_trailing);

    /* The encoding, which takes a lent payload, fails only before it takes
     * it; every later failure is FERRY_EINTERNAL and has released it (with
     * op->send), so that the caller can tell which happened. */
    int rc = rpc_codec_encode(req ? req : &empty, ch->max_payload, &op->send);
    if (rc) {
        op_free(op);
        return rc;
    }
    op->deadline = rpc_deadline(timeout_ms);
    op->gc = grpc_channel_create_registered_call(ch->gch, NULL, GRPC_PROPAGATE_DEFAULTS,
                                                 ch->client->cq, reg->handle,
                                                 op->deadline, NULL);
    if (!op->gc) {
        op_free(op);
        return FERRY_EINTERNAL;
    }

    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    size_t n_md = 0;
    if (ch->token) {
        op->md[n_md].key = grpc_slice_from_static_string(RPC_TOKEN_KEY);
        op->md[n_md++].value = grpc_slice_from_static_string(ch->token);
    }
    if (ch->version) {
        op->md[n_md].key = grpc_slice_from_static_string(RPC_VERSION_KEY);
        op->md[n_md++].value = grpc_slice_from_static_string(ch->version);
    }
    ops[0].data.send_initial_metadata.count = n_md;
    ops[0].data.send_initial_metadata.metadata = n_md ? op->md : NULL;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = op->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &op->md_initial;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &op->recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &op->md_trailing;
    ops[5].data.recv_status_on_client.status = &op->status;
    ops[5].data.recv_status_on_client.status_details = &op->details;

    /* A well-formed batch is never refused; if gRPC did refuse it, the
     * encoded message (and an owned payload with it) is released here. */
    if (grpc_call_start_batch(op->gc, ops, 6, &op->tag, NULL) != GRPC_CALL_OK) {
        op_free(op);
        return FERRY_EINTERNAL;
    }
    call->ch = ch;
    call->op = op;
    rpc_channel_link(ch, op);
    rpc_client_op_started(ch->client);
    return 0;
}

void rpc_call_cancel(rpc_call *call)
{
    if (call && call->op) {
        atomic_store(&call->op->cancelled, true);
        grpc_call_cancel(call->op->gc, NULL);
    }
}

void rpc_call_fini(rpc_call *call)
{
    if (!call)
        return;
    free(call->errmsg);
    call->errmsg = NULL;
    free(call->detail);
    call->detail = NULL;
    call->detail_len = 0;
    rpc_msg_fini(&call->reply);
}

/* One HTTP/2 channel per endpoint. Every call to that endpoint is a stream on
 * it, so a thousand calls in flight still use one TCP connection. */
#include <stdlib.h>
#include <string.h>

#include "rpc_int.h"

int rpc_channel_create(rpc_client *c, const char *target, const rpc_channel_opts *opts,
                       rpc_channel **out)
{
    size_t max_payload =
        opts && opts->max_payload ? opts->max_payload : RPC_DEFAULT_MAX_PAYLOAD;
    if (!c || !target || !*target || max_payload > RPC_MAX_PAYLOAD_LIMIT || c->closing)
        return FERRY_EINVAL;

    rpc_channel *ch = calloc(1, sizeof *ch);
    if (!ch)
        return FERRY_ENOMEM;
    ch->client = c;
    ch->max_payload = max_payload;
    ch->refs = 1;
    ch->target = base_strdup(target);
    ch->token = opts && opts->token ? base_strdup(opts->token) : NULL;
    ch->version = opts && opts->version ? base_strdup(opts->version) : NULL;
    if (!ch->target || (opts && opts->token && !ch->token) ||
        (opts && opts->version && !ch->version))
        goto fail;

    grpc_arg args[] = {
        {0},
        {0}, /* the size limits, filled below */
        /* Retries would buffer (copy) every outgoing payload; ferry retries
         * at the task level where it knows what is idempotent. */
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ENABLE_RETRIES, .value.integer = 0},
        /* A restarted worker is back within a second: reconnect quickly.
         * (Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC also uses it as the
         * connect timeout, and 100 ms fails slow-to-accept peers.) */
        {.type = GRPC_ARG_INTEGER,
         .key = GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
         .value.integer = 100},
        {.type = GRPC_ARG_INTEGER,
         .key = GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
         .value.integer = 2000},
    };
    rpc_grpc_size_args(args, max_payload);
    grpc_channel_args chargs = {.num_args = sizeof args / sizeof args[0], .args = args};
    grpc_channel_credentials *creds = rpc_tls_channel_credentials();
    ch->gch = grpc_channel_create(target, creds, &chargs);
    grpc_channel_credentials_release(creds);
    if (!ch->gch)
        goto fail;

    c->channels++;
    *out = ch;
    return 0;

fail:
    free(ch->target);
    free(ch->token);
    free(ch->version);
    free(ch);
    return FERRY_ENOMEM;
}

static void channel_free(rpc_channel *ch)
{
    rpc_client *c = ch->client;
    rpc_method_reg *m = ch->methods;
    while (m) {
        rpc_method_reg *next = m->next;
        free(m->name);
        free(m);
        m = next;
    }
    free(ch->target);
    free(ch->token);
    free(ch->version);
    free(ch->tls_why);
    free(ch);
    rpc_client_channel_done(c);
}

static void channel_unref(rpc_channel *ch)
{
    if (--ch->refs == 0)
        channel_free(ch);
}

void rpc_channel_destroy(rpc_channel *ch)
{
    if (!ch || ch->destroyed)
        return;
    ch->destroyed = true;
    for (rpc_op *op = ch->ops; op; op = op->next) {
        atomic_store(&op->cancelled, true);
        grpc_call_cancel(op->gc, NULL);
    }
    /* Calls in flight hold their own references to the grpc channel. */
    grpc_channel_destroy(ch->gch);
    ch->gch = NULL;
    channel_unref(ch);
}

const char *rpc_channel_target(const rpc_channel *ch)
{
    return ch->target;
}

rpc_method_reg *rpc_channel_method(rpc_channel *ch, const char *method)
{
    for (rpc_method_reg *m = ch->methods; m; m = m->next)
        if (strcmp(m->name, method) == 0)
            return m;
    rpc_method_reg *m = calloc(1, sizeof *m);
    if (!m || !(m->name = base_strdup(method))) {
        free(m);
        return NULL;
    }
    /* Registered once, a method costs no string work per call. */
    m->handle = grpc_channel_register_call(ch->gch, m->name, NULL, NULL);
    m->next = ch->methods;
    ch->methods = m;
    return m;
}

void rpc_channel_link(rpc_channel *ch, rpc_op *op)
{
    op->prev = NULL;
    op->next = ch->ops;
    if (ch->ops)
        ch->ops->prev = op;
    ch->ops = op;
    ch->refs++;
}

void rpc_channel_unlink(rpc_channel *ch, rpc_op *op)
{
    if (op->prev)
        op->prev->next = op->next;
    else
        ch->ops = op->next;
    if (op->next)
        op->next->prev = op->prev;
}

void rpc_channel_release(rpc_channel *ch)
{
    channel_unref(ch);
}

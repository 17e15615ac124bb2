/* The client side of rpc: for one libuv loop, a completion queue and its
 * bridge thread; or on a poller's queue, completed on its thread under the
 * owner's guard. And the count of what is still open, so that closing
 * waits for it. */
#include <stddef.h>
#include <stdlib.h>

#include "rpc_int.h"

/* A client whose bridge failed once its handle has closed. */
static void free_failed(rpc_bridge *b)
{
    free((char *)b - offsetof(rpc_client, bridge));
}

int rpc_client_create(uv_loop_t *loop, rpc_client **out)
{
    rpc_client *c = calloc(1, sizeof *c);
    if (!c)
        return FERRY_ENOMEM;
    grpc_init();
    c->loop = loop;
    bool closing;
    int rc = rpc_bridge_init(&c->bridge, loop, free_failed, &closing);
    c->cq = c->bridge.cq;
    if (rc) {
        grpc_shutdown();
        if (!closing) /* else freed from the loop */
            free(c);
        return rc;
    }
    /* The handle keeps the loop alive only while calls are in flight, so a
     * plain uv_run() returns once every callback has run. */
    uv_unref((uv_handle_t *)&c->bridge.async);
    *out = c;
    return 0;
}

int rpc_client_create_on(rpc_poller *p, const rpc_guard *guard, rpc_client **out)
{
    *out = NULL;
    if (!p || !guard || !guard->enter || !guard->leave)
        return FERRY_EINVAL;
    rpc_client *c = calloc(1, sizeof *c);
    if (!c)
        return FERRY_ENOMEM;
    /* The poller holds gRPC initialised for as long as the client may. */
    c->poller = p;
    c->cq = p->cq;
    c->guard = *guard;
    *out = c;
    return 0;
}

static void client_closed(rpc_bridge *b)
{
    rpc_client *c = (rpc_client *)((char *)b - offsetof(rpc_client, bridge));
    free(c);
    grpc_shutdown();
}

static void maybe_finish(rpc_client *c)
{
    if (!c->closing || c->ops || c->channels)
        return;
    if (c->poller)
        free(c);
    else
        rpc_bridge_close(&c->bridge, client_closed);
}

void rpc_client_close(rpc_client *c)
{
    if (!c || c->closing)
        return;
    c->closing = true;
    maybe_finish(c);
}

void rpc_client_op_started(rpc_client *c)
{
    if (c->ops++ == 0 && c->loop)
        uv_ref((uv_handle_t *)&c->bridge.async);
}

void rpc_client_op_done(rpc_client *c)
{
    if (--c->ops == 0 && c->loop)
        uv_unref((uv_handle_t *)&c->bridge.async);
    maybe_finish(c);
}

void rpc_client_channel_done(rpc_client *c)
{
    c->channels--;
    maybe_finish(c);
}

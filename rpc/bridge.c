/* The completion bridge: gRPC -> libuv.
 *
 * grpc's callback completion queue stalls in 1.51 (STACK-NOTES), so one
 * thread blocks in grpc_completion_queue_next() and hands each finished
 * batch to the loop: it appends the tag to a ready list and wakes the loop
 * with uv_async_send(). Wake-ups coalesce, so the async callback drains the
 * whole list. Tags' `done` callbacks therefore always run on the loop
 * thread, and no other thread touches loop state. */
#include <pthread.h>

#include "rpc_int.h"

static void bridge_thread(void *arg)
{
    rpc_bridge *b = arg;
    pthread_setname_np(pthread_self(), "ferry-bridge");
    for (;;) {
        grpc_event ev =
            grpc_completion_queue_next(b->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            return;
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        rpc_tag *t = ev.tag;
        t->ok = ev.success != 0;
        t->next = NULL;
        uv_mutex_lock(&b->lock);
        if (b->ready_tail)
            b->ready_tail->next = t;
        else
            b->ready_head = t;
        b->ready_tail = t;
        uv_mutex_unlock(&b->lock);
        uv_async_send(&b->async);
    }
}

static void bridge_drain(uv_async_t *async)
{
    rpc_bridge *b = async->data;
    uv_mutex_lock(&b->lock);
    rpc_tag *t = b->ready_head;
    b->ready_head = b->ready_tail = NULL;
    uv_mutex_unlock(&b->lock);
    while (t) {
        rpc_tag *next = t->next; /* done() may free t */
        t->done(t, t->ok);
        t = next;
    }
}

static void bridge_closed(uv_handle_t *h);

int rpc_bridge_init(rpc_bridge *b, uv_loop_t *loop, void (*failed_cb)(rpc_bridge *b),
                    bool *closing)
{
    int rc;
    *closing = false;
    b->ready_head = b->ready_tail = NULL;
    b->closed_cb = NULL;
    b->cq = grpc_completion_queue_create_for_next(NULL);
    if (!b->cq)
        return FERRY_ENOMEM;
    rc = uv_mutex_init(&b->lock);
    if (rc)
        goto fail_cq;
    rc = uv_async_init(loop, &b->async, bridge_drain);
    if (rc)
        goto fail_lock;
    b->async.data = b;
    rc = uv_thread_create(&b->thread, bridge_thread, b);
    if (rc)
        goto fail_async;
    return 0;

fail_async:
    /* The close completes on the loop, which holds the handle until then:
     * the owner frees `b` from failed_cb, and bridge_closed destroys the
     * lock. */
    b->closed_cb = failed_cb;
    uv_close((uv_handle_t *)&b->async, bridge_closed);
    *closing = true;
    goto fail_cq;
fail_lock:
    uv_mutex_destroy(&b->lock);
fail_cq:
    grpc_completion_queue_shutdown(b->cq);
    grpc_completion_queue_destroy(b->cq);
    return rc;
}

static void bridge_closed(uv_handle_t *h)
{
    rpc_bridge *b = h->data;
    uv_mutex_destroy(&b->lock);
    if (b->closed_cb)
        b->closed_cb(b);
}

void rpc_bridge_close(rpc_bridge *b, void (*closed_cb)(rpc_bridge *b))
{
    grpc_completion_queue_shutdown(b->cq);
    uv_thread_join(&b->thread);
    grpc_completion_queue_destroy(b->cq);
    /* Nothing can be left on the ready list: every batch completed before
     * the queue shut down, and the owner waited for all their callbacks. */
    b->closed_cb = closed_cb;
    uv_close((uv_handle_t *)&b->async, bridge_closed);
}

/* Futures: plain blocking C on top of the callbacks. A call started with no
 * callback is a future; waiting runs the loop underneath until it is done,
 * so every other completion keeps flowing meanwhile. */
#include "rpc_int.h"

int rpc_call_wait(rpc_call *call)
{
    if (!call || !call->ch)
        return FERRY_EINVAL;
    if (call->done)
        return call->result;
    rpc_client *c = call->ch->client; /* held by the op while not done */
    if (!c->loop) /* on a poller: only its callbacks complete calls */
        return FERRY_EINVAL;
    /* uv_run is not reentrant: inside a completion callback the loop is
     * already running, and the call could only finish after we return. */
    if (c->callback_depth > 0)
        return FERRY_EDEADLK;
    while (!call->done)
        uv_run(c->loop, UV_RUN_ONCE);
    return call->result;
}

int rpc_call_wait_all(rpc_call *const *calls, size_t n)
{
    int first = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = rpc_call_wait(calls[i]);
        if (rc && !first)
            first = rc;
    }
    return first;
}

/* Running the cluster's loop from blocking code: until some requests end
 * or a time passes, with the heartbeat going meanwhile. */
#include <stdlib.h>

#include "cluster_int.h"

void cl_run(cluster *cl, const size_t *pending)
{
    cl_heartbeat_start(cl);
    while (*pending > 0)
        uv_run(&cl->loop, UV_RUN_ONCE);
    cl_heartbeat_stop(cl);
}

static void wait_fired(uv_timer_t *t)
{
    ((cluster *)t->data)->wait_fired = true;
}

void cl_run_for(cluster *cl, int64_t ms, const bool *stop)
{
    if (ms <= 0)
        return;
    cl->wait_fired = false;
    uv_update_time(&cl->loop);
    uv_timer_start(&cl->wait_timer, wait_fired, (uint64_t)ms, 0);
    cl_heartbeat_start(cl);
    while (!cl->wait_fired && !(stop && *stop))
        uv_run(&cl->loop, UV_RUN_ONCE);
    cl_heartbeat_stop(cl);
    uv_timer_stop(&cl->wait_timer);
}

void cl_fanout(cluster *cl, cl_req *reqs, const bool *which, cl_kind kind,
               cl_send_fn send, void *ctx)
{
    size_t pending = 0;
    cl_fanout_start(cl, reqs, which, kind, send, ctx, &pending);
    cl_run(cl, &pending);
}

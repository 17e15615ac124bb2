/* Watching a long call from inside the wait: a timer that runs a caller's
 * function on the loop while a blocking function of this cluster waits,
 * Stats asked of one worker without waiting for it, and the end of every
 * call in flight when the watcher gives up on them. The stall inspector
 * (cluster/train/stall.c) is built on these. */
#include <stdlib.h>
#include <string.h>

#include "cluster_int.h"

typedef struct cl_watch_ask {
    rpc_call call;
    cl_watch *w;
    int rank;
    bool busy;
    unsigned gen; /* the watch it was asked for */
} cl_watch_ask;

struct cl_watch {
    cluster *cl;
    uv_timer_t timer;
    cluster_watch_fn fn;
    cluster_stats_cb stats_cb;
    void *data;
    unsigned gen;       /* changes with each cluster_watch(): older replies are dropped */
    cl_watch_ask *asks; /* by rank */
};

static void tick(uv_timer_t *t)
{
    cl_watch *w = t->data;
    if (w->fn && !w->cl->closing)
        w->fn(w->data);
}

int cluster_watch(cluster *cl, int64_t period_ms, cluster_watch_fn fn,
                  cluster_stats_cb stats_cb, void *data)
{
    cl_watch *w = cl->watch;
    if (!w) {
        if (!fn)
            return 0;
        if (!(w = calloc(1, sizeof *w)) ||
            !(w->asks = calloc(cl->cap, sizeof *w->asks))) {
            free(w);
            return FERRY_ENOMEM;
        }
        w->cl = cl;
        /* Room for the workers the cluster may take while it runs. */
        for (size_t i = 0; i < cl->cap; i++)
            w->asks[i] = (cl_watch_ask){.w = w, .rank = (int)i};
        uv_timer_init(&cl->loop, &w->timer);
        w->timer.data = w;
        cl->watch = w;
    }
    w->gen++;
    w->fn = fn;
    w->stats_cb = stats_cb;
    w->data = data;
    /* An active timer would keep the loop from ever being idle: it runs
     * only while somebody watches. */
    if (fn && period_ms > 0)
        uv_timer_start(&w->timer, tick, (uint64_t)period_ms, (uint64_t)period_ms);
    else
        uv_timer_stop(&w->timer);
    return 0;
}

static void stats_done(rpc_call *call)
{
    cl_watch_ask *a = call->data;
    cl_watch *w = a->w;
    a->busy = false;
    if (a->gen != w->gen || !w->stats_cb || w->cl->closing)
        return;
    proto_stats_reply *rep = NULL;
    const char *err = NULL;
    if (call->result)
        err = call->errmsg ? call->errmsg : ferry_strerror(call->result);
    else if (pw_stats_result(call, &rep))
        err = "its Stats reply is corrupt";
    w->stats_cb(w->data, a->rank, rep, err);
    proto_free(rep);
}

int cluster_stats_start(cluster *cl, int rank, int64_t timeout_ms)
{
    cl_watch *w = cl->watch;
    if (!w || rank < 0 || (size_t)rank >= cl->n || cl->closing)
        return FERRY_EINVAL;
    cl_watch_ask *a = &w->asks[rank];
    if (a->busy)
        return FERRY_EBUSY;
    rpc_call_fini(&a->call);
    a->call.data = a;
    a->gen = w->gen;
    int rc = pw_stats(cl->nodes[rank].pw, &a->call, timeout_ms, stats_done);
    a->busy = rc == 0;
    return rc;
}

int32_t cluster_worker_pid(const cluster *cl, int rank)
{
    if (rank < 0 || (size_t)rank >= cl->n || !cl->nodes[rank].known)
        return 0;
    return cl->nodes[rank].pid;
}

void cluster_abort_calls(cluster *cl, const bool *down, const char *why)
{
    for (size_t i = 0; i < cl->n; i++) {
        cl_node *node = &cl->nodes[i];
        if (down && down[i]) {
            cl_node_kill(cl, node, strdup(why));
            continue;
        }
        for (cl_req *r = node->inflight; r; r = r->next)
            if (r->kind == CL_REQ_CALL)
                rpc_call_cancel(&r->call);
    }
}

void cl_watch_close(cluster *cl)
{
    if (cl->watch)
        uv_close((uv_handle_t *)&cl->watch->timer, NULL);
}

void cl_watch_free(cluster *cl)
{
    cl_watch *w = cl->watch;
    if (!w)
        return;
    for (size_t i = 0; i < cl->cap; i++)
        rpc_call_fini(&w->asks[i].call);
    free(w->asks);
    free(w);
    cl->watch = NULL;
}

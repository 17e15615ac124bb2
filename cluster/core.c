/* The core every other file of the cluster builds on: error texts, the
 * cluster's plain accessors, and a request's bookkeeping (prepared, in
 * flight on its node, finished with a text that names worker, module and
 * function), alone or one per worker. It calls nothing else in cluster/. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_int.h"

void cl_append(char **s, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    char *more = base_vasprintf(f, ap);
    va_end(ap);
    char *joined = more ? base_asprintf("%s%s", *s ? *s : "", more) : NULL;
    free(more);
    if (joined) {
        free(*s);
        *s = joined;
    }
}

void cl_set_error_text(cluster *cl, char *owned)
{
    free(cl->err);
    cl->err = owned;
}

void cl_set_error(cluster *cl, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    cl_set_error_text(cl, base_vasprintf(f, ap));
    va_end(ap);
}

const char *cluster_error(const cluster *cl)
{
    return cl && cl->err ? cl->err : "";
}

size_t cluster_size(const cluster *cl)
{
    return cl ? cl->n : 0;
}

void cluster_set_call_timeout(cluster *cl, int64_t ms)
{
    if (ms > 0)
        cl->call_timeout_ms = ms;
}

const char *cluster_target(const cluster *cl, int rank)
{
    if (!cl || rank < 0 || (size_t)rank >= cl->n)
        return NULL;
    return cl->nodes[rank].target;
}

char *cl_req_label(const cl_req *r)
{
    const cl_node *nd = r->node;
    switch (r->kind) {
    case CL_REQ_CALL:
        return base_asprintf("worker %d (%s): module %s function %s", nd->rank, nd->target,
                      r->module ? r->module : "?", r->function ? r->function : "?");
    case CL_REQ_LOAD:
        return base_asprintf("worker %d (%s): module %s", nd->rank, nd->target,
                      r->module ? r->module : "?");
    case CL_REQ_PING:
        return base_asprintf("worker %d (%s): ping", nd->rank, nd->target);
    case CL_REQ_STATS:
        return base_asprintf("worker %d (%s): stats", nd->rank, nd->target);
    case CL_REQ_SHUTDOWN:
    default:
        return base_asprintf("worker %d (%s): shutdown", nd->rank, nd->target);
    }
}

void cl_req_prepare(cl_req *r, cluster *cl, cl_node *node, cl_kind kind,
                    const char *module, const char *function, cl_req_cb cb, void *data)
{
    cl_req_fini(r);
    r->call.data = r;
    r->cl = cl;
    r->node = node;
    r->kind = kind;
    r->module = module;
    r->function = function;
    r->result = 0;
    r->fail = CL_OK;
    r->cb = cb;
    r->data = data;
    uv_update_time(&cl->loop);
    r->start = uv_now(&cl->loop);
    r->busy = true;
    r->killed = false;
    r->prev = r->next = NULL;
}

static void link_inflight(cl_node *node, cl_req *r)
{
    r->prev = NULL;
    r->next = node->inflight;
    if (node->inflight)
        node->inflight->prev = r;
    node->inflight = r;
}

void cl_req_unlink(cl_node *node, cl_req *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else if (node->inflight == r)
        node->inflight = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

void cl_req_finish(cl_req *r, int result, cl_fail fail, char *err)
{
    r->result = result;
    r->fail = result ? fail : CL_OK;
    free(r->err);
    r->err = err;
    r->busy = false;
    if (r->cb)
        r->cb(r);
}

void cl_req_started(cl_req *r, int start_rc)
{
    if (!start_rc) {
        link_inflight(r->node, r);
        return;
    }
    char *label = cl_req_label(r);
    char *err = base_asprintf("%s: cannot start the request: %s", label ? label : "?",
                       ferry_strerror(start_rc));
    free(label);
    cl_req_finish(r, start_rc, CL_FAIL_OWN, err);
}

void cl_req_fini(cl_req *r)
{
    rpc_call_fini(&r->call);
    free(r->err);
    r->err = NULL;
}

void cl_req_down(cl_req *r)
{
    char *label = cl_req_label(r);
    cl_req_finish(r, FERRY_EUNAVAIL, CL_FAIL_LOST,
                  base_asprintf("%s: worker is down: %s", label, r->node->dead_why));
    free(label);
}

void cl_count_done(cl_req *r)
{
    (*(size_t *)r->data)--;
}

void cl_fanout_start(cluster *cl, cl_req *reqs, const bool *which, cl_kind kind,
                     cl_send_fn send, void *ctx, size_t *pending)
{
    for (size_t i = 0; i < cl->n; i++) {
        if (which && !which[i])
            continue;
        cl_req *r = &reqs[i];
        cl_req_prepare(r, cl, &cl->nodes[i], kind, NULL, NULL, cl_count_done, pending);
        ++*pending; /* before the start: a failed one completes at once */
        cl_req_started(r, send(r, ctx));
    }
}

int cl_first_error(cluster *cl, cl_req *reqs, size_t n, const bool *skip)
{
    for (size_t i = 0; i < n; i++) {
        if (reqs[i].result && !(skip && skip[i])) {
            cl_set_error_text(cl, reqs[i].err);
            reqs[i].err = NULL;
            return reqs[i].result;
        }
    }
    return 0;
}

void cl_reqs_free(cl_req *reqs, size_t n)
{
    for (size_t i = 0; reqs && i < n; i++)
        cl_req_fini(&reqs[i]);
    free(reqs);
}

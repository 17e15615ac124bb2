/* The cluster: one loop, one rpc client, one proxyworker per worker; the
 * request plumbing every blocking function shares; error texts. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc.h>

#include "cluster_int.h"

static char *vfmt(const char *fmt, va_list ap)
{
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    return s;
}

char *cl_fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    char *s = vfmt(f, ap);
    va_end(ap);
    return s;
}

void cl_append(char **s, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    char *more = vfmt(f, ap);
    va_end(ap);
    char *joined = more ? cl_fmt("%s%s", *s ? *s : "", more) : NULL;
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
    cl_set_error_text(cl, vfmt(f, ap));
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

/* ---- create / destroy ----------------------------------------------------- */

int cluster_create(const char *const *targets, size_t n, const cluster_opts *opts,
                   cluster **out)
{
    if (!targets || !n || !out || n > INT32_MAX)
        return FERRY_EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!targets[i] || !*targets[i])
            return FERRY_EINVAL;

    cluster *cl = calloc(1, sizeof *cl);
    if (!cl)
        return FERRY_ENOMEM;
    cl->n = n;
    cl->call_timeout_ms = opts && opts->call_timeout_ms ? opts->call_timeout_ms : 60000;
    cl->ping_timeout_ms = opts && opts->ping_timeout_ms ? opts->ping_timeout_ms : 1000;
    cl->heartbeat_ms = opts && opts->heartbeat_ms ? opts->heartbeat_ms : 1000;
    cl->max_payload = opts ? opts->max_payload : 0;
    if (opts && opts->token && !(cl->token = strdup(opts->token))) {
        free(cl);
        return FERRY_ENOMEM;
    }

    grpc_init();
    int rc = uv_loop_init(&cl->loop);
    if (rc) {
        grpc_shutdown();
        free(cl->token);
        free(cl);
        return rc;
    }
    uv_timer_init(&cl->loop, &cl->wait_timer);
    cl->wait_timer.data = cl;
    cl->nodes = calloc(n, sizeof *cl->nodes);
    rc = cl->nodes ? rpc_client_create(&cl->loop, &cl->client) : FERRY_ENOMEM;
    if (rc)
        goto fail;
    cl_health_init(cl);
    for (size_t i = 0; i < n; i++) {
        cl_node *node = &cl->nodes[i];
        node->cl = cl;
        node->rank = (int)i;
        node->target = strdup(targets[i]);
        if (!node->target) {
            rc = FERRY_ENOMEM;
            goto fail;
        }
        pw_opts po = {.target = targets[i],
                      .token = cl->token,
                      .rank = (int)i,
                      .max_payload = cl->max_payload};
        rc = pw_create(cl->client, &po, &node->pw);
        if (rc) {
            cl_set_error(cl, "worker %zu (%s): cannot open a channel: %s", i, targets[i],
                         ferry_strerror(rc));
            goto fail;
        }
    }
    *out = cl;
    return 0;

fail:
    cluster_destroy(cl);
    return rc;
}

void cluster_destroy(cluster *cl)
{
    if (!cl)
        return;
    cl->closing = true;
    for (size_t i = 0; cl->nodes && i < cl->n; i++) {
        pw_destroy(cl->nodes[i].pw); /* cancels; the callbacks still run */
        cl->nodes[i].pw = NULL;
    }
    if (cl->client)
        cl_health_close(cl);
    uv_close((uv_handle_t *)&cl->wait_timer, NULL);
    rpc_client_close(cl->client);
    uv_run(&cl->loop, UV_RUN_DEFAULT);
    int rc = uv_loop_close(&cl->loop);
    if (rc)
        fprintf(stderr, "ferry: cluster: loop still busy at close: %s\n",
                uv_strerror(rc));
    for (size_t i = 0; cl->nodes && i < cl->n; i++) {
        cl_node *node = &cl->nodes[i];
        free(node->target);
        free(node->dead_why);
        free(node->diag_cause);
        free(node->loaded);
        rpc_call_fini(&node->hb_call);
        rpc_call_fini(&node->diag_call);
    }
    cl_survey_free(cl);
    cl_modules_free(cl);
    free(cl->nodes);
    free(cl->token);
    free(cl->err);
    free(cl);
    grpc_shutdown();
}

/* ---- running the loop ----------------------------------------------------- */

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

/* ---- requests ------------------------------------------------------------- */

char *cl_req_label(const cl_req *r)
{
    const cl_node *nd = r->node;
    switch (r->kind) {
    case CL_REQ_CALL:
        return cl_fmt("worker %d (%s): module %s function %s", nd->rank, nd->target,
                      r->module ? r->module : "?", r->function ? r->function : "?");
    case CL_REQ_LOAD:
        return cl_fmt("worker %d (%s): module %s", nd->rank, nd->target,
                      r->module ? r->module : "?");
    case CL_REQ_PING:
        return cl_fmt("worker %d (%s): ping", nd->rank, nd->target);
    case CL_REQ_STATS:
        return cl_fmt("worker %d (%s): stats", nd->rank, nd->target);
    case CL_REQ_SHUTDOWN:
    default:
        return cl_fmt("worker %d (%s): shutdown", nd->rank, nd->target);
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

static void unlink_inflight(cl_node *node, cl_req *r)
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
    char *err = cl_fmt("%s: cannot start the request: %s", label ? label : "?",
                       ferry_strerror(start_rc));
    free(label);
    cl_req_finish(r, start_rc, CL_FAIL_OWN, err);
}

void cl_req_rpc_done(rpc_call *call)
{
    cl_req *r = call->data;
    cl_node *node = r->node;
    cluster *cl = r->cl;
    unlink_inflight(node, r);

    if (!call->result) {
        cl_req_finish(r, 0, CL_OK, NULL);
        return;
    }
    char *label = cl_req_label(r);
    char *err;
    if (r->killed && !cl->closing) {
        err = cl_fmt("%s: %s", label, node->dead_why ? node->dead_why : "worker is down");
        free(label);
        cl_req_finish(r, FERRY_EUNAVAIL, CL_FAIL_LOST, err);
        return;
    }
    bool lost = call->result == FERRY_EUNAVAIL || call->result == FERRY_ECONNRESET;
    if (lost && r->kind == CL_REQ_CALL && !cl->closing && !node->shut) {
        free(label);
        cl_diag_enqueue(cl, node, r);
        return;
    }
    if (call->result == FERRY_EUNAUTH)
        err = cl_fmt("%s: the worker refused this cluster's token: %s", label,
                     call->errmsg);
    else
        err = cl_fmt("%s: %s", label,
                     call->errmsg ? call->errmsg : ferry_strerror(call->result));
    free(label);
    cl_req_finish(r, call->result, lost ? CL_FAIL_LOST : CL_FAIL_OWN, err);
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
                  cl_fmt("%s: worker is down: %s", label, r->node->dead_why));
    free(label);
}

/* ---- one request per worker ----------------------------------------------- */

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

void cl_fanout(cluster *cl, cl_req *reqs, const bool *which, cl_kind kind,
               cl_send_fn send, void *ctx)
{
    size_t pending = 0;
    cl_fanout_start(cl, reqs, which, kind, send, ctx, &pending);
    cl_run(cl, &pending);
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

int cl_send_ping(cl_req *r, void *timeout_ms)
{
    return pw_ping(r->node->pw, &r->call, ++r->cl->nonce, *(const int64_t *)timeout_ms,
                   cl_req_rpc_done);
}

/* ---- wait_ready ----------------------------------------------------------- */

int cluster_wait_ready(cluster *cl, int64_t timeout_ms)
{
    if (!cl)
        return FERRY_EINVAL;
    bool *need = malloc(cl->n * sizeof *need); /* not answered yet */
    cl_req *reqs = calloc(cl->n, sizeof *reqs);
    if (!need || !reqs) {
        free(need);
        free(reqs);
        return FERRY_ENOMEM;
    }
    for (size_t i = 0; i < cl->n; i++)
        need[i] = true;
    uv_update_time(&cl->loop);
    uint64_t deadline = uv_now(&cl->loop) + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    int rc = 0;
    for (;;) {
        uint64_t now = uv_now(&cl->loop);
        int64_t left = now < deadline ? (int64_t)(deadline - now) : 1;
        int64_t t = left < cl->ping_timeout_ms ? left : cl->ping_timeout_ms;
        cl_fanout(cl, reqs, need, CL_REQ_PING, cl_send_ping, &t);
        size_t missing = 0;
        for (size_t i = 0; i < cl->n; i++) {
            if (need[i] && cl_ping_seen(&reqs[i]))
                need[i] = false;
            missing += need[i];
        }
        if (!missing)
            break;
        uv_update_time(&cl->loop);
        now = uv_now(&cl->loop);
        if (now >= deadline) {
            rc = FERRY_ETIMEDOUT;
            break;
        }
        int64_t pause = (int64_t)(deadline - now);
        cl_run_for(cl, pause < CL_RETRY_MS ? pause : CL_RETRY_MS, NULL);
    }
    if (rc) {
        size_t missing = 0;
        char *list = NULL;
        for (size_t i = 0; i < cl->n; i++) {
            if (!need[i])
                continue;
            missing++;
            cl_append(&list, "; %s", reqs[i].err ? reqs[i].err : "no answer");
        }
        cl_set_error(cl, "%zu of %zu workers did not answer within %lld ms%s", missing,
                     cl->n, (long long)timeout_ms, list ? list : "");
        free(list);
    }
    cl_reqs_free(reqs, cl->n);
    free(need);
    return rc;
}

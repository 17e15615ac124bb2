/* Health: a heartbeat while the loop runs, dead-worker detection, and the
 * diagnosis of a lost connection (did the worker crash and come back, or is
 * it gone?). */
#include <stdlib.h>
#include <string.h>

#include "cluster_int.h"

void cl_health_init(cluster *cl)
{
    uv_timer_init(&cl->loop, &cl->hb_timer);
    cl->hb_timer.data = cl;
    for (size_t i = 0; i < cl->n; i++)
        cl_health_init_node(cl, i);
}

void cl_health_init_node(cluster *cl, size_t i)
{
    uv_timer_init(&cl->loop, &cl->nodes[i].diag_timer);
    cl->nodes[i].diag_timer.data = &cl->nodes[i];
}

void cl_health_close(cluster *cl)
{
    uv_close((uv_handle_t *)&cl->hb_timer, NULL);
    for (size_t i = 0; i < cl->n; i++)
        uv_close((uv_handle_t *)&cl->nodes[i].diag_timer, NULL);
}

/* ---- heartbeat ------------------------------------------------------------ */

static void hb_done(rpc_call *call)
{
    cl_node *node = call->data;
    cluster *cl = node->cl;
    node->hb_busy = false;
    if (cl->closing)
        return;
    proto_ping_reply *rep = NULL;
    if (!call->result && !pw_ping_result(call, &rep)) {
        cl_node_seen(cl, node, rep, false);
        proto_free(rep);
        return;
    }
    /* A diagnosis in progress owns the verdict on this node. */
    if (node->dead || node->diag || node->shut)
        return;
    if (++node->missed >= CL_MISSED_PINGS_DEAD)
        cl_node_kill(cl, node,
                     base_asprintf("stopped answering pings (%d missed in a row, %lld ms each; "
                            "last: %s)",
                            node->missed, (long long)cl->ping_timeout_ms,
                            call->errmsg ? call->errmsg : ferry_strerror(call->result)));
}

static void hb_tick(uv_timer_t *t)
{
    cluster *cl = t->data;
    for (size_t i = 0; i < cl->n; i++) {
        cl_node *node = &cl->nodes[i];
        if (node->hb_busy || node->diag || node->shut)
            continue;
        rpc_call_fini(&node->hb_call);
        node->hb_call.data = node;
        if (!pw_ping(node->pw, &node->hb_call, ++cl->nonce, cl->ping_timeout_ms, hb_done))
            node->hb_busy = true;
    }
}

void cl_heartbeat_start(cluster *cl)
{
    if (cl->run_depth++ == 0 && cl->heartbeat_ms > 0 && !cl->closing)
        uv_timer_start(&cl->hb_timer, hb_tick, (uint64_t)cl->heartbeat_ms,
                       (uint64_t)cl->heartbeat_ms);
}

void cl_heartbeat_stop(cluster *cl)
{
    /* A stopped timer keeps nothing alive: the loop is idle between calls. */
    if (--cl->run_depth == 0)
        uv_timer_stop(&cl->hb_timer);
}

/* ---- diagnosis of a lost connection --------------------------------------- */

/* The crash record names module and function; the label already does when
 * they are the ones this request ran. */
static const char *crash_detail(const cl_req *r, const char *crash)
{
    if (r->module && r->function) {
        char *prefix = base_asprintf("module %s function %s: ", r->module, r->function);
        size_t len = prefix ? strlen(prefix) : 0;
        bool same = prefix && strncmp(crash, prefix, len) == 0;
        free(prefix);
        if (same)
            return crash + len;
    }
    return crash;
}

static void diag_end(cl_node *node, const proto_ping_reply *rep)
{
    cluster *cl = node->cl;
    cl_req *waiters = node->diag_waiters;
    char *cause = node->diag_cause;
    node->diag_waiters = NULL;
    node->diag_cause = NULL;
    node->diag = false;

    const char *why = cause ? cause : "connection lost";
    /* Only a worker seen before the call can be said to have crashed or
     * restarted during it: an unseen one's record may be any age. */
    bool crashed = rep && node->known && rep->crash_id != node->crash_id &&
                   rep->last_crash && *rep->last_crash;
    bool restarted = rep && node->known && rep->pid != node->pid;
    char *crash = crashed ? strdup(rep->last_crash) : NULL;
    int32_t old_pid = node->pid;
    char *lost = NULL;
    if (rep) {
        cl_node_seen(cl, node, rep, true);
    } else {
        uv_update_time(&cl->loop);
        lost = base_asprintf("connection lost (%s); no answer to pings for %llu ms%s", why,
                      (unsigned long long)(uv_now(&cl->loop) - node->diag_since),
                      node->diag_cut ? ", until the call's deadline" : "");
        cl_node_kill(cl, node, lost ? strdup(lost) : NULL);
    }

    while (waiters) {
        cl_req *r = waiters;
        waiters = r->next;
        r->prev = r->next = NULL;
        char *label = cl_req_label(r);
        char *err;
        int result;
        cl_fail fail;
        if (crashed && crash) {
            err = base_asprintf("%s: worker crashed: %s; restarted by its supervisor", label,
                         crash_detail(r, crash));
            result = FERRY_EREMOTE;
            fail = CL_FAIL_CRASH;
        } else if (restarted) {
            err = base_asprintf("%s: connection lost (%s); the worker restarted (pid %d, now "
                         "pid %d) with no crash record",
                         label, why, old_pid, rep->pid);
            result = FERRY_ECONNRESET;
            fail = CL_FAIL_LOST;
        } else if (rep) {
            err =
                base_asprintf("%s: connection lost (%s); the worker answers again", label, why);
            result = FERRY_ECONNRESET;
            fail = CL_FAIL_LOST;
        } else {
            err = base_asprintf("%s: %s", label, lost ? lost : why);
            result = FERRY_EUNAVAIL;
            fail = CL_FAIL_LOST;
        }
        free(label);
        cl_req_finish(r, result, fail, err);
    }
    free(crash);
    free(lost);
    free(cause);
}

static void diag_probe(cl_node *node);

static void diag_retry(uv_timer_t *t)
{
    diag_probe(t->data);
}

static void diag_ping_done(rpc_call *call)
{
    cl_node *node = call->data;
    cluster *cl = node->cl;
    node->diag_busy = false;
    proto_ping_reply *rep = NULL;
    if (!call->result && !pw_ping_result(call, &rep)) {
        diag_end(node, rep);
        proto_free(rep);
        return;
    }
    uv_update_time(&cl->loop);
    if (cl->closing || uv_now(&cl->loop) + CL_RETRY_MS >= node->diag_deadline)
        diag_end(node, NULL);
    else
        uv_timer_start(&node->diag_timer, diag_retry, CL_RETRY_MS, 0);
}

static void diag_probe(cl_node *node)
{
    cluster *cl = node->cl;
    uv_update_time(&cl->loop);
    uint64_t now = uv_now(&cl->loop);
    int64_t left = now < node->diag_deadline ? (int64_t)(node->diag_deadline - now) : 1;
    rpc_call_fini(&node->diag_call);
    node->diag_call.data = node;
    int rc =
        pw_ping(node->pw, &node->diag_call, ++cl->nonce,
                left < cl->ping_timeout_ms ? left : cl->ping_timeout_ms, diag_ping_done);
    if (rc)
        diag_end(node, NULL);
    else
        node->diag_busy = true;
}

/* The diagnosis ends by the earliest deadline of the calls it holds: a call
 * lost just before its deadline must not fail seconds after it. */
static void diag_clamp(cl_node *node, const cl_req *r)
{
    int64_t timeout = node->cl->call_timeout_ms > 0 ? node->cl->call_timeout_ms : 0;
    uint64_t until = r->start + (uint64_t)timeout;
    if (until >= node->diag_deadline)
        return;
    node->diag_deadline = until;
    node->diag_cut = true;
    /* A probe in flight waits by the old deadline: its end probes again. */
    if (node->diag_busy)
        rpc_call_cancel(&node->diag_call);
}

void cl_diag_enqueue(cluster *cl, cl_node *node, cl_req *r)
{
    r->prev = NULL;
    r->next = node->diag_waiters;
    node->diag_waiters = r;
    if (node->diag) {
        diag_clamp(node, r);
        return;
    }
    node->diag = true;
    node->diag_cause = r->call.errmsg ? strdup(r->call.errmsg) : NULL;
    uv_update_time(&cl->loop);
    int64_t span =
        cl->call_timeout_ms < CL_DIAG_MAX_MS ? cl->call_timeout_ms : CL_DIAG_MAX_MS;
    node->diag_since = uv_now(&cl->loop);
    node->diag_deadline = node->diag_since + (uint64_t)span;
    node->diag_cut = false;
    diag_clamp(node, r);
    diag_probe(node);
}

/* ---- how a request ended ------------------------------------------------- */

void cl_req_rpc_done(rpc_call *call)
{
    cl_req *r = call->data;
    cl_node *node = r->node;
    cluster *cl = r->cl;
    cl_req_unlink(node, r);

    if (!call->result) {
        if (r->kind == CL_REQ_CALL)
            cl_tasklog_show(cl, node, call);
        cl_req_finish(r, 0, CL_OK, NULL);
        return;
    }
    if (r->kind == CL_REQ_CALL)
        cl_tasklog_show(cl, node, call); /* what it logged before it failed */
    char *label = cl_req_label(r);
    char *err;
    if (r->killed && !cl->closing) {
        err = base_asprintf("%s: %s", label, node->dead_why ? node->dead_why : "worker is down");
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
        err = base_asprintf("%s: the worker refused this cluster's token: %s", label,
                     call->errmsg);
    else
        err = base_asprintf("%s: %s", label,
                     call->errmsg ? call->errmsg : ferry_strerror(call->result));
    free(label);
    cl_req_finish(r, call->result, lost ? CL_FAIL_LOST : CL_FAIL_OWN, err);
}

int cl_send_ping(cl_req *r, void *timeout_ms)
{
    return pw_ping(r->node->pw, &r->call, ++r->cl->nonce, *(const int64_t *)timeout_ms,
                   cl_req_rpc_done);
}

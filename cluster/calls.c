/* Calls: one worker, every worker (scatter/gather in rank order), or any
 * free worker (a work queue over many small calls); barrier; a call left
 * open. */
#include <stdlib.h>
#include <string.h>

#include "cluster_int.h"

void cluster_free_bytes(ferry_bytes_t *b)
{
    if (!b)
        return;
    rpc_buf_free(b->data);
    b->data = NULL;
    b->len = 0;
}

static void free_all(ferry_bytes_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cluster_free_bytes(&out[i]);
}

/* Starts `function` on `node`, or fails `r` at once if the node is down. */
static void start_call(cluster *cl, cl_req *r, cl_node *node, const cluster_module *m,
                       const char *function, const ferry_bytes_t *in, cl_req_cb cb,
                       void *data)
{
    cl_req_prepare(r, cl, node, CL_REQ_CALL, m->name, function, cb, data);
    if (node->dead) {
        cl_req_down(r);
        return;
    }
    cl_req_started(r, pw_call(node->pw, &r->call, m->sha256, function, (int)cl->n,
                              in ? in->data : NULL, in ? in->len : 0, cl->call_timeout_ms,
                              cl_req_rpc_done));
}

/* Revives what answers again and reloads what a restarted worker lost. */
static int prepare(cluster *cl, const cluster_module *m, const bool *which)
{
    cl_probe_dead(cl, which);
    return cl_ensure_loaded(cl, m, which);
}

static bool bad_args(cluster *cl, const cluster_module *m, const char *function)
{
    if (!cl)
        return true;
    if (!m || !function || !*function) {
        cl_set_error(cl, "a call needs a module and a function name");
        return true;
    }
    return false;
}

int cluster_call(cluster *cl, const cluster_module *m, int rank, const char *function,
                 const ferry_bytes_t *in, ferry_bytes_t *out)
{
    if (bad_args(cl, m, function) || !out)
        return FERRY_EINVAL;
    memset(out, 0, sizeof *out);
    if (rank < 0 || (size_t)rank >= cl->n) {
        cl_set_error(cl,
                     "module %s function %s: no worker of rank %d (the cluster has %zu)",
                     m->name, function, rank, cl->n);
        return FERRY_EINVAL;
    }
    bool *which = calloc(cl->n, sizeof *which);
    if (!which)
        return FERRY_ENOMEM;
    which[rank] = true;
    int rc = prepare(cl, m, which);
    free(which);
    if (rc)
        return rc;

    cl_req r = {0};
    size_t pending = 1;
    start_call(cl, &r, &cl->nodes[rank], m, function, in, cl_count_done, &pending);
    cl_run(cl, &pending);
    rc = cl_first_error(cl, &r, 1, NULL);
    if (!rc)
        pw_call_result(&r.call, &out->data, &out->len);
    cl_req_fini(&r);
    return rc;
}

/* A gather that fails fast: the first failure cancels the calls still
 * running, so a worker that died ends the gather at once rather than after
 * the slowest function. */
typedef struct gather {
    cl_req *reqs;
    bool *cancelled; /* by the gather, not by their own failure */
    size_t n, pending;
    bool failed, cancelling;
} gather;

/* How long the other calls run on after a failure of a function's own
 * before they are cancelled: when a worker dies, its peers may fail (a peer
 * gone) before the master sees the lost connection, and the worker lost is
 * the news to report. */
#define CL_GATHER_SETTLE_MS 500

static void cancel_rest(gather *g)
{
    g->cancelling = true;
    for (size_t i = 0; i < g->n; i++) {
        /* A call whose connection was lost waits for its worker's
         * diagnosis: that verdict is the news, not a cancellation. */
        if (g->reqs[i].busy && !g->reqs[i].node->diag) {
            g->cancelled[i] = true;
            rpc_call_cancel(&g->reqs[i].call);
        }
    }
}

static void settled(uv_timer_t *t)
{
    cancel_rest(t->data);
}

static void gather_done(cl_req *r)
{
    gather *g = r->data;
    g->pending--;
    if (!r->result || g->cancelling || g->cancelled[r->index])
        return;
    bool lost = r->fail == CL_FAIL_LOST || r->fail == CL_FAIL_CRASH;
    if (lost || g->pending == 0) {
        uv_timer_stop(&r->cl->gather_timer);
        cancel_rest(g);
    } else if (!g->failed) {
        r->cl->gather_timer.data = g;
        uv_timer_start(&r->cl->gather_timer, settled, CL_GATHER_SETTLE_MS, 0);
    }
    g->failed = true;
}

int cluster_call_all(cluster *cl, const cluster_module *m, const char *function,
                     const ferry_bytes_t *in, ferry_bytes_t *out)
{
    return cluster_call_first(cl, m, function, cl ? cl->n : 0, in, out);
}

/* Whether a request not in skip[] failed because its worker was lost. */
static bool lost_one(const cl_req *reqs, const bool *skip, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (reqs[i].result && !skip[i] &&
            (reqs[i].fail == CL_FAIL_LOST || reqs[i].fail == CL_FAIL_CRASH))
            return true;
    return false;
}

int cluster_call_first(cluster *cl, const cluster_module *m, const char *function,
                       size_t n, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    return cluster_call_ranks(cl, m, function, n, NULL, in, out);
}

int cluster_call_ranks(cluster *cl, const cluster_module *m, const char *function,
                       size_t n, const int *ranks, const ferry_bytes_t *in,
                       ferry_bytes_t *out)
{
    if (bad_args(cl, m, function) || !out || n == 0 || n > cl->n)
        return FERRY_EINVAL;
    memset(out, 0, n * sizeof *out);
    bool which[cl->n];
    for (size_t i = 0; i < cl->n; i++)
        which[i] = !ranks;
    for (size_t i = 0; ranks && i < n; i++) {
        if (ranks[i] < 0 || (size_t)ranks[i] >= cl->n)
            return FERRY_EINVAL;
        which[ranks[i]] = true;
    }
    int rc = prepare(cl, m, which);
    if (rc)
        return rc;
    gather g = {.n = n, .pending = n};
    g.reqs = calloc(n, sizeof *g.reqs);
    g.cancelled = calloc(n, sizeof *g.cancelled);
    if (!g.reqs || !g.cancelled) {
        free(g.reqs);
        free(g.cancelled);
        return FERRY_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        g.reqs[i].index = i;
        start_call(cl, &g.reqs[i], &cl->nodes[ranks ? (size_t)ranks[i] : i], m, function,
                   in ? &in[i] : NULL, gather_done, &g);
    }
    cl_run(cl, &g.pending);
    uv_timer_stop(&cl->gather_timer);
    /* The failure to report is a lost or crashed worker's, when one was
     * lost: the others' failures (a peer gone) follow from it. Otherwise the
     * first in rank order that is not one of the cancellations it caused. */
    if (lost_one(g.reqs, g.cancelled, n))
        for (size_t i = 0; i < n; i++)
            g.cancelled[i] |= g.reqs[i].fail != CL_FAIL_LOST &&
                              g.reqs[i].fail != CL_FAIL_CRASH;
    rc = cl_first_error(cl, g.reqs, n, g.cancelled);
    for (size_t i = 0; i < n && !rc; i++)
        pw_call_result(&g.reqs[i].call, &out[i].data, &out[i].len);
    cl_reqs_free(g.reqs, n);
    free(g.cancelled);
    return rc;
}

/* ---- each: every result, no fail-fast ------------------------------------ */

typedef struct each {
    cl_req *reqs;   /* n calls, then n * n follow-ups: row f for failed rank f */
    size_t n, pending;
    const cluster_module *m;
    const cluster_each_follow *follow;
} each;

static void each_done(cl_req *r)
{
    each *e = r->data;
    e->pending--;
    if (!r->result || r->index >= e->n || !e->follow)
        return;
    ferry_bytes_t in = {0};
    size_t f = r->index;
    if (e->follow->arg_for((int)f, &in, e->follow->arg))
        return;
    for (size_t i = 0; i < e->n; i++) {
        if (i == f || !e->reqs[i].busy)
            continue;
        cl_req *fr = &e->reqs[e->n + f * e->n + i];
        fr->index = e->n + f * e->n + i;
        e->pending++;
        start_call(r->cl, fr, &r->cl->nodes[i], e->m, e->follow->function, &in, each_done, e);
    }
    free(in.data);
}

int cluster_call_each(cluster *cl, const cluster_module *m, const char *function, size_t n,
                      const bool *which, const ferry_bytes_t *in, ferry_bytes_t *out,
                      int *rc, char **err, const cluster_each_follow *follow)
{
    if (bad_args(cl, m, function) || !out || !rc || !err || n == 0 || n > cl->n)
        return FERRY_EINVAL;
    memset(out, 0, n * sizeof *out);
    for (size_t i = 0; i < n; i++) {
        rc[i] = 0;
        err[i] = NULL;
    }
    int r0 = prepare(cl, m, NULL);
    if (r0)
        return r0;
    each e = {.n = n, .m = m, .follow = follow};
    size_t total = n + (follow ? n * n : 0);
    if (!(e.reqs = calloc(total, sizeof *e.reqs)))
        return FERRY_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (which && !which[i])
            continue;
        e.reqs[i].index = i;
        e.pending++;
        start_call(cl, &e.reqs[i], &cl->nodes[i], m, function, in ? &in[i] : NULL, each_done,
                   &e);
    }
    cl_run(cl, &e.pending);
    for (size_t i = 0; i < n; i++) {
        if (which && !which[i])
            continue;
        rc[i] = e.reqs[i].result;
        if (rc[i]) {
            err[i] = e.reqs[i].err;
            e.reqs[i].err = NULL;
        } else {
            pw_call_result(&e.reqs[i].call, &out[i].data, &out[i].len);
        }
    }
    cl_reqs_free(e.reqs, total);
    return 0;
}

/* ---- the work queue ------------------------------------------------------- */

typedef struct queue {
    cluster *cl;
    const cluster_module *m;
    const char *function;
    const ferry_bytes_t *in;
    ferry_bytes_t *out;
    size_t n, next; /* items; the next never handed out */
    size_t *requeued, n_requeued;
    size_t done;
    size_t pending; /* calls in flight */
    int depth;
    cl_req *slots; /* depth per worker: slot d of rank r is slots[r * depth + d] */
    bool *dropped; /* workers this queue gave up on */
    bool stop;
    int rc;
    char *err;
    char *lost; /* the text of the last worker lost */
} queue;

static void queue_done(cl_req *r);

static bool queue_take(queue *q, size_t *idx)
{
    if (q->stop)
        return false;
    if (q->n_requeued) {
        *idx = q->requeued[--q->n_requeued];
        return true;
    }
    if (q->next < q->n) {
        *idx = q->next++;
        return true;
    }
    return false;
}

/* Fills idle slots, a round over the workers per depth level, so that the
 * first calls spread evenly. */
static void queue_pump(queue *q)
{
    cluster *cl = q->cl;
    for (int d = 0; d < q->depth; d++) {
        for (size_t w = 0; w < cl->n; w++) {
            cl_req *r = &q->slots[w * (size_t)q->depth + (size_t)d];
            size_t idx;
            if (r->busy || q->dropped[w] || cl->nodes[w].dead || !queue_take(q, &idx))
                continue;
            q->pending++;
            r->index = idx; /* before the start: a failed one completes at once */
            start_call(cl, r, &cl->nodes[w], q->m, q->function,
                       q->in ? &q->in[idx] : NULL, queue_done, q);
        }
    }
}

static void queue_done(cl_req *r)
{
    queue *q = r->data;
    size_t idx = r->index;
    q->pending--;
    if (!r->result) {
        pw_call_result(&r->call, &q->out[idx].data, &q->out[idx].len);
        q->done++;
    } else if (r->fail == CL_FAIL_LOST && !q->stop) {
        /* Not the function's fault: someone else runs it. */
        q->dropped[r->node->rank] = true;
        q->requeued[q->n_requeued++] = idx;
        free(q->lost);
        q->lost = r->err;
        r->err = NULL;
    } else if (!q->stop) {
        q->stop = true;
        q->rc = r->result;
        q->err = r->err;
        r->err = NULL;
    }
    queue_pump(q);
}

int cluster_call_any(cluster *cl, const cluster_module *m, const char *function, size_t n,
                     const ferry_bytes_t *in, ferry_bytes_t *out, int depth)
{
    if (bad_args(cl, m, function) || (n && !out))
        return FERRY_EINVAL;
    if (!n)
        return 0;
    memset(out, 0, n * sizeof *out);
    int rc = prepare(cl, m, NULL);
    if (rc)
        return rc;
    queue q = {.cl = cl, .m = m, .function = function, .in = in, .out = out, .n = n};
    q.depth = depth > 0 ? depth : 16;
    q.slots = calloc(cl->n * (size_t)q.depth, sizeof *q.slots);
    q.requeued = malloc(n * sizeof *q.requeued);
    q.dropped = calloc(cl->n, sizeof *q.dropped);
    if (!q.slots || !q.requeued || !q.dropped) {
        rc = FERRY_ENOMEM;
        goto out;
    }
    queue_pump(&q);
    cl_run(cl, &q.pending);

    if (q.stop) {
        rc = q.rc;
        cl_set_error_text(cl, q.err);
        q.err = NULL;
    } else if (q.done < n) {
        rc = FERRY_EUNAVAIL;
        char *why = q.lost ? strdup(q.lost) : NULL;
        for (size_t i = 0; !why && i < cl->n; i++)
            if (cl->nodes[i].dead)
                why = base_asprintf("worker %zu (%s) is down: %s", i, cl->nodes[i].target,
                             cl->nodes[i].dead_why);
        cl_set_error(cl, "module %s function %s: no worker left for %zu of %zu calls; %s",
                     m->name, function, n - q.done, n,
                     why ? why : "every worker is down");
        free(why);
    }
out:
    cl_reqs_free(q.slots, cl->n * (size_t)q.depth);
    free(q.requeued);
    free(q.dropped);
    free(q.err);
    free(q.lost);
    if (rc)
        free_all(out, n);
    return rc;
}

/* ---- barrier -------------------------------------------------------------- */

int cluster_barrier(cluster *cl)
{
    if (!cl)
        return FERRY_EINVAL;
    /* Our own calls have all ended when a blocking function returns; what
     * may still run is a cancelled call a worker has not yet noticed. */
    uv_update_time(&cl->loop);
    uint64_t deadline = uv_now(&cl->loop) + (uint64_t)cl->call_timeout_ms;
    for (;;) {
        const cluster_worker *w;
        int rc = cluster_survey(cl, true, &w);
        if (rc)
            return rc;
        size_t busy = cl->n;
        for (size_t i = 0; i < cl->n; i++) {
            if (w[i].stats && w[i].stats->in_flight) {
                busy = i;
                break;
            }
        }
        if (busy == cl->n)
            return 0;
        uv_update_time(&cl->loop);
        if (uv_now(&cl->loop) >= deadline) {
            cl_set_error(cl, "barrier: worker %zu (%s) still runs %u calls after %lld ms",
                         busy, cl->nodes[busy].target, w[busy].stats->in_flight,
                         (long long)cl->call_timeout_ms);
            return FERRY_ETIMEDOUT;
        }
        cl_run_for(cl, 20, NULL);
    }
}

/* ---- a call left open ------------------------------------------------------ */

struct cluster_open {
    cluster *cl;
    rpc_channel *ch;
    rpc_call call;  /* call.data points back here */
    size_t pending; /* 1 until it ended */
    int result;
};

static void open_done(rpc_call *call)
{
    cluster_open *c = call->data;
    c->result = call->result;
    c->pending = 0;
}

int cluster_open_call(cluster *cl, int rank, const char *method, const void *head,
                      size_t len, cluster_open **out)
{
    *out = NULL;
    if (!cl || !method || rank < 0 || (size_t)rank >= cl->n || (!head && len))
        return FERRY_EINVAL;
    cluster_open *c = calloc(1, sizeof *c);
    if (!c)
        return FERRY_ENOMEM;
    *c = (cluster_open){.cl = cl, .pending = 1};
    rpc_channel_opts co = {
        .max_payload = cl->max_payload, .token = cl->token, .version = PROTO_VERSION};
    int rc = rpc_channel_create(cl->client, cl->nodes[rank].target, &co, &c->ch);
    if (rc == 0) {
        c->call.data = c;
        rpc_msg_out m = {.head_bytes = head, .head_len = len};
        rc = rpc_call_start(c->ch, &c->call, method, &m, 0, open_done);
    }
    if (rc) {
        if (c->ch)
            rpc_channel_destroy(c->ch);
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

bool cluster_open_ended(const cluster_open *c, int *result)
{
    bool ended = !c || c->pending == 0;
    if (ended && result)
        *result = c ? c->result : FERRY_EINVAL;
    return ended;
}

/* The slice of loop time between two looks at a cluster_run_until's
 * condition when no event came. */
#define RUN_UNTIL_SLICE_MS 5

void cluster_run_until(cluster *cl, int64_t ms, bool (*done)(void *arg), void *arg)
{
    uv_update_time(&cl->loop);
    uint64_t end = uv_now(&cl->loop) + (uint64_t)(ms > 0 ? ms : 0);
    while (!done(arg)) {
        uv_update_time(&cl->loop);
        uint64_t now = uv_now(&cl->loop);
        if (now >= end)
            return;
        int64_t left = (int64_t)(end - now);
        cl_run_for(cl, left < RUN_UNTIL_SLICE_MS ? left : RUN_UNTIL_SLICE_MS, NULL);
    }
}

int cluster_close_call(cluster_open *c)
{
    if (!c)
        return 0;
    if (c->pending)
        rpc_call_cancel(&c->call);
    cl_run(c->cl, &c->pending);
    int rc = c->result;
    rpc_call_fini(&c->call);
    rpc_channel_destroy(c->ch);
    free(c);
    return rc;
}

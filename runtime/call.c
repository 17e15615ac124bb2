/* Call: runs one task function on the handler pool with its ferry_ctx_t.
 *
 * The context lives on the handler's stack; everything a function asks of
 * it (scratch, its result) is released here once the reply is on its way.
 * A result made with ctx->ops->result comes from rpc's buffer pool and is
 * handed to the reply without a copy. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_int.h"
#include "where.h"

#define SCRATCH_ALIGN 64

typedef struct scratch {
    struct scratch *next;
} scratch;

typedef struct call_ctx {
    ferry_ctx_t pub; /* first: the function's ctx is this struct */
    rpc_srv_call *sc;
    rt_worker *w;
    const rt_module *m;
    const char *module;
    scratch *scratch;
    void *result; /* from rpc_buf_alloc */
    size_t result_len;
    char errtext[1024];
    rt_tasklog log; /* for the reply: the submitter shows it */
} call_ctx;

static const char *level_name(int level)
{
    switch (level) {
    case FERRY_LOG_ERROR:
        return "error";
    case FERRY_LOG_WARN:
        return "warn";
    case FERRY_LOG_INFO:
        return "info";
    default:
        return "debug";
    }
}

static void ctx_log(ferry_ctx_t *ctx, int level, const char *fmt, ...)
{
    call_ctx *c = (call_ctx *)ctx;
    /* One buffer, one write: lines of concurrent calls never interleave. */
    char line[2048];
    int at = snprintf(line, sizeof line, "worker %d %s ", ctx->rank, c->module);
    if (at < 0 || (size_t)at >= sizeof line)
        return;
    int n = snprintf(line + at, sizeof line - (size_t)at, "%s: %s: ", ctx->function,
                     level_name(level));
    if (n < 0)
        return;
    n += at;
    if ((size_t)n < sizeof line - 1) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line + n, sizeof line - 1 - (size_t)n, fmt, ap);
        va_end(ap);
    }
    size_t len = strnlen(line, sizeof line - 1);
    /* The reply's copy goes without the worker and module: the submitter
     * says the rank, and knows the module. */
    rt_tasklog_add(&c->log, line + at);
    line[len++] = '\n';
    fwrite(line, 1, len, stderr);
}

static bool ctx_cancelled(ferry_ctx_t *ctx)
{
    return rpc_srv_cancelled(((call_ctx *)ctx)->sc);
}

static void *ctx_scratch(ferry_ctx_t *ctx, size_t len)
{
    call_ctx *c = (call_ctx *)ctx;
    /* The link sits in its own aligned slot in front of the memory handed
     * out, so the memory keeps the 64-byte alignment. */
    if (len > SIZE_MAX - 2 * SCRATCH_ALIGN)
        return NULL;
    size_t total =
        SCRATCH_ALIGN + (len + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
    scratch *s = aligned_alloc(SCRATCH_ALIGN, total);
    if (!s)
        return NULL;
    s->next = c->scratch;
    c->scratch = s;
    return (char *)s + SCRATCH_ALIGN;
}

static void *ctx_result(ferry_ctx_t *ctx, ferry_bytes_t *out, size_t len)
{
    call_ctx *c = (call_ctx *)ctx;
    /* Asked twice: the newer one wins and the older one is not leaked. */
    rpc_buf_free(c->result);
    c->result = rpc_buf_alloc(len ? len : 1);
    c->result_len = c->result ? len : 0;
    out->data = c->result;
    out->len = c->result_len;
    return c->result;
}

static int ctx_fail(ferry_ctx_t *ctx, int err, const char *fmt, ...)
{
    call_ctx *c = (call_ctx *)ctx;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->errtext, sizeof c->errtext, fmt, ap);
    va_end(ap);
    return err;
}

static const ferry_ctx_ops_t ctx_ops = {
    .version = FERRY_TASK_ABI_VERSION,
    .size = sizeof(ferry_ctx_ops_t),
    .log = ctx_log,
    .cancelled = ctx_cancelled,
    .scratch = ctx_scratch,
    .result = ctx_result,
    .fail = ctx_fail,
};

rt_worker *rt_call_worker(ferry_ctx_t *ctx)
{
    return ((call_ctx *)ctx)->w;
}

const char *rt_call_peer(ferry_ctx_t *ctx)
{
    return rpc_srv_peer(((call_ctx *)ctx)->sc);
}

const rt_module *rt_call_module(ferry_ctx_t *ctx)
{
    return ((call_ctx *)ctx)->m;
}

int rt_call_register(rt_worker *w, const rt_builtins *set)
{
    if (w->n_builtins == RT_BUILTIN_SETS)
        return FERRY_ENOSPC;
    w->builtins[w->n_builtins++] = set;
    return 0;
}

/* The built-in function `name` that a registered set gives module `m`, or
 * NULL. */
static ferry_fn_t builtin_function(const rt_worker *w, const rt_module *m,
                                   const char *name)
{
    for (int i = 0; i < w->n_builtins; i++) {
        const rt_builtins *b = w->builtins[i];
        if (b->serves && !b->serves(m))
            continue;
        for (size_t k = 0; k < b->n; k++)
            if (strcmp(b->functions[k].name, name) == 0)
                return b->functions[k].fn;
    }
    return NULL;
}

static void free_result(void *payload, void *arg)
{
    (void)arg;
    rpc_buf_free(payload);
}

/* Counted before the call ends, so a caller that saw its reply sees it in
 * Stats too. */
static void call_ended(rt_worker *w, int rc)
{
    if (rc)
        atomic_fetch_add(&w->stats.calls_failed, 1);
    atomic_fetch_add(&w->stats.calls_served, 1);
    atomic_fetch_sub(&w->stats.in_flight, 1);
}

/* Checks what the function left in `out`; sets c->errtext when unusable. */
static int check_result(call_ctx *c, const ferry_bytes_t *out)
{
    if (c->result && out->data == c->result && out->len > c->result_len) {
        snprintf(c->errtext, sizeof c->errtext,
                 "result of %zu bytes in a buffer of %zu (ctx->ops->result)", out->len,
                 c->result_len);
        return FERRY_EINVAL;
    }
    if (out->len && !out->data) {
        snprintf(c->errtext, sizeof c->errtext, "result of %zu bytes at NULL", out->len);
        return FERRY_EINVAL;
    }
    return 0;
}

static void reply_result(rt_worker *w, call_ctx *c, const ferry_bytes_t *out,
                         double elapsed)
{
    proto_bytes head = {0};
    /* Out of memory for a few bytes: the result still goes, without its
     * timing. */
    proto_call_reply r = {.elapsed_s = elapsed};
    r.n_log_lines = rt_tasklog_list(&c->log, &r.log_lines);
    proto_call_reply_pack(&r, &head);
    rpc_msg_out reply = {
        .head_bytes = head.data, .head_len = head.len, .codec = RPC_CODEC_AUTO};
    if (out->len) {
        reply.payload = out->data;
        reply.payload_len = out->len;
        if (out->data == c->result) {
            /* rpc frees it once sent; a failed reply leaves it with us. */
            reply.payload_free = free_result;
            c->result = NULL;
        }
        /* Anything else the function pointed at (its own static bytes) is
         * copied by the reply while it is still valid. */
    }
    call_ended(w, 0);
    if (rpc_srv_reply(c->sc, &reply) != 0) {
        /* rpc failed the call for the client (a result over the limit) */
        atomic_fetch_add(&w->stats.calls_failed, 1);
        if (reply.payload_free)
            rpc_buf_free((void *)reply.payload);
    }
    proto_bytes_fini(&head);
}

static void run(rt_worker *w, rpc_srv_call *sc, rpc_msg *req,
                const proto_call_req *in, const rt_module *m, ferry_fn_t fn)
{
    call_ctx c = {
        .pub = {.version = FERRY_TASK_ABI_VERSION,
                .size = sizeof(ferry_ctx_t),
                .rank = in->rank,
                .world_size = in->world_size,
                .task = m->task->name,
                .function = in->function,
                .ops = &ctx_ops,
                .device = w->device},
        .sc = sc,
        .w = w,
        .m = m,
        .module = m->name,
    };
    c.pub.impl = &c;
    rt_tasklog_init(&c.log);
    ferry_bytes_t arg = {.data = req->payload, .len = req->payload_len};
    ferry_bytes_t out = {0};
    uint64_t t0 = uv_hrtime();
    /* The module's name was escaped when LoadModule took it in (escaping
     * it again would double its backslashes); the function's is raw. */
    char fname[128];
    rpc_srv_describe(sc, "Call %s %s", m->name,
                     base_escape(fname, sizeof fname, in->function, strlen(in->function)));
    rt_crash_mark(m->name, in->function);
    rt_tasklog_bind(&c.log);
    rt_where_enter(m->name, in->function);
    int rc = fn(&c.pub, &arg, &out);
    rt_where_leave();
    rt_tasklog_bind(NULL);
    rt_crash_mark(NULL, NULL);
    double elapsed = (double)(uv_hrtime() - t0) / 1e9;

    if (rc == 0)
        rc = check_result(&c, &out);
    else if (rc > 0) {
        char text[sizeof c.errtext];
        snprintf(text, sizeof text, "returned %d, not a FERRY_E* code%s%.900s", rc,
                 c.errtext[0] ? ": " : "", c.errtext);
        memcpy(c.errtext, text, sizeof text);
        rc = FERRY_EUNKNOWN;
    } else if (!c.errtext[0])
        snprintf(c.errtext, sizeof c.errtext, "%s", ferry_strerror(rc));
    if (rc == 0) {
        reply_result(w, &c, &out, elapsed);
    } else {
        call_ended(w, rc);
        /* What it logged goes too: often the why of the failure. */
        proto_bytes tail = {0};
        rt_tasklog_pack_tail(&c.log, RPC_FAIL_DETAIL_MAX, &tail);
        rpc_srv_fail_with(sc, rc, tail.data, tail.len,
                          "worker %d module %s function %s: %s", in->rank, m->name,
                          in->function, c.errtext);
        proto_bytes_fini(&tail);
    }
    rpc_buf_free(c.result);
    rt_tasklog_fini(&c.log);
    for (scratch *s = c.scratch, *next; s; s = next) {
        next = s->next;
        free(s);
    }
}

void rt_call_handler(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    rt_worker *w = data;
    atomic_fetch_add(&w->stats.in_flight, 1);
    proto_call_req *in = NULL;
    if (proto_call_req_unpack(req->head, req->head_len, &in)) {
        call_ended(w, FERRY_EINVAL);
        rpc_srv_fail(sc, FERRY_EINVAL, "Call: request is not a CallRequest");
        return;
    }
    const rt_module *m = rt_modcache_find(w->cache, in->sha256);
    ferry_fn_t fn = m ? rt_module_function(m, in->function) : NULL;
    if (m && !fn)
        fn = builtin_function(w, m, in->function);
    if (!m) {
        call_ended(w, FERRY_ENOENT);
        rpc_srv_fail(sc, FERRY_ENOENT, "worker %d: module %s not loaded", in->rank,
                     in->sha256);
    } else if (!fn) {
        char list[1024];
        rt_module_list(m, list, sizeof list);
        call_ended(w, FERRY_ENOENT);
        rpc_srv_fail(sc, FERRY_ENOENT,
                     "worker %d: module %s has no function '%s' (it has: %s)", in->rank,
                     m->name, in->function, list);
    } else {
        run(w, sc, req, in, m, fn);
    }
    proto_free(in);
}

/* bench — baseline B: plain gRPC-core unary echo, server and client. */
#include "bare_echo.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "grpc_unary.h"
#include "stats.h"

/* Requests kept posted on the server: more than the most calls in flight. */
#define SERVER_REQUESTS 320

/* Max message lengths -1 on both sides. */
static grpc_channel_args *server_args(void)
{
    static grpc_arg args[] = {
        {.type = GRPC_ARG_INTEGER,
         .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
         .value.integer = -1},
        {.type = GRPC_ARG_INTEGER,
         .key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH,
         .value.integer = -1},
    };
    static grpc_channel_args ca = {sizeof args / sizeof args[0], args};
    return &ca;
}

/* The client also turns retries off, as ferry's channel does, so that both
 * clients run the same channel stack (for 64-byte echoes it made no visible
 * difference either way). */
static grpc_channel_args *client_args(void)
{
    static grpc_arg args[] = {
        {.type = GRPC_ARG_INTEGER,
         .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
         .value.integer = -1},
        {.type = GRPC_ARG_INTEGER,
         .key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH,
         .value.integer = -1},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ENABLE_RETRIES, .value.integer = 0},
    };
    static grpc_channel_args ca = {sizeof args / sizeof args[0], args};
    return &ca;
}

/* ---- server (in the child) ---------------------------------------------- */

enum { TAG_REQUEST, TAG_REPLY, TAG_SHUTDOWN };

typedef struct srv_call {
    int kind; /* TAG_REQUEST, then TAG_REPLY */
    grpc_call *call;
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_byte_buffer *req;
    int cancelled;
} srv_call;

typedef struct server {
    grpc_server *gs;
    grpc_completion_queue *cq;
    void *method;
    atomic_bool stopping;
    int shutdown_kind; /* the shutdown tag */
} server;

static void post_request(server *s)
{
    srv_call *c = calloc(1, sizeof *c);
    if (!c)
        bench_child_die("out of memory");
    c->kind = TAG_REQUEST;
    grpc_metadata_array_init(&c->md);
    grpc_call_error e = grpc_server_request_registered_call(
        s->gs, s->method, &c->call, &c->deadline, &c->md, &c->req, s->cq, s->cq, c);
    if (e != GRPC_CALL_OK) {
        grpc_metadata_array_destroy(&c->md);
        free(c);
        if (!atomic_load(&s->stopping))
            bench_child_die("request_registered_call: %d", (int)e);
    }
}

static void free_srv_call(srv_call *c)
{
    if (c->req)
        grpc_byte_buffer_destroy(c->req);
    if (c->call)
        grpc_call_unref(c->call);
    grpc_metadata_array_destroy(&c->md);
    free(c);
}

/* A new call: echo its message in one batch. */
static void reply(srv_call *c)
{
    grpc_op ops[4];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = c->req;
    ops[2].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[2].data.send_status_from_server.status = GRPC_STATUS_OK;
    ops[3].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[3].data.recv_close_on_server.cancelled = &c->cancelled;
    c->kind = TAG_REPLY;
    grpc_call_error e = grpc_call_start_batch(c->call, ops, 4, c, NULL);
    if (e != GRPC_CALL_OK)
        bench_child_die("server start_batch: %d", (int)e);
}

static void *server_cq_thread(void *arg)
{
    server *s = arg;
    for (;;) {
        grpc_event ev =
            grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        if (ev.tag == &s->shutdown_kind) {
            grpc_completion_queue_shutdown(s->cq);
            continue;
        }
        srv_call *c = ev.tag;
        if (c->kind == TAG_REQUEST) {
            if (!ev.success) { /* shutting down */
                free_srv_call(c);
                continue;
            }
            if (!atomic_load(&s->stopping))
                post_request(s);
            if (!c->req) /* the client sent no message: answer an empty one */
                c->req = grpc_raw_byte_buffer_create(NULL, 0);
            reply(c);
        } else {
            free_srv_call(c);
        }
    }
    return NULL;
}

static int bare_server_main(void *arg)
{
    (void)arg;
    grpc_init();
    server s = {0};
    s.cq = grpc_completion_queue_create_for_next(NULL);
    s.gs = grpc_server_create(server_args(), NULL);
    s.method = grpc_server_register_method(s.gs, BENCH_BARE_METHOD, NULL,
                                           GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
    grpc_server_register_completion_queue(s.gs, s.cq, NULL);
    grpc_server_credentials *cr = grpc_insecure_server_credentials_create();
    int port = grpc_server_add_http2_port(s.gs, "127.0.0.1:0", cr);
    grpc_server_credentials_release(cr);
    if (!s.method || port <= 0)
        bench_child_die("bare server: cannot bind 127.0.0.1:0");
    grpc_server_start(s.gs);
    for (int i = 0; i < SERVER_REQUESTS; i++)
        post_request(&s);
    pthread_t th;
    if (pthread_create(&th, NULL, server_cq_thread, &s) != 0)
        bench_child_die("pthread_create");
    bench_child_ready(port);

    bench_child_wait_stop();
    atomic_store(&s.stopping, true);
    grpc_server_shutdown_and_notify(s.gs, s.cq, &s.shutdown_kind);
    grpc_server_cancel_all_calls(s.gs);
    pthread_join(th, NULL);
    grpc_server_destroy(s.gs);
    grpc_completion_queue_destroy(s.cq);
    grpc_shutdown();
    return 0;
}

int bench_bare_server_start(bench_child *c)
{
    return bench_child_start(c, "bare-echo", bare_server_main, NULL);
}

/* ---- client (in the parent) ---------------------------------------------- */

typedef struct cli_call {
    grpc_call *call;
    bench_unary u;
    uint64_t t0;
} cli_call;

struct bench_bare {
    grpc_channel *ch;
    grpc_completion_queue *cq;
    void *method;
    uint8_t msg[BENCH_ECHO_BYTES];
};
typedef struct bench_bare client;

static int start_call(client *cl, cli_call *c)
{
    memset(c, 0, sizeof *c);
    grpc_slice sl = grpc_slice_from_static_buffer(cl->msg, sizeof cl->msg);
    c->t0 = bench_now_ns();
    c->call = grpc_channel_create_registered_call(
        cl->ch, NULL, GRPC_PROPAGATE_DEFAULTS, cl->cq, cl->method,
        gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    grpc_call_error e = bench_unary_start(c->call, &c->u, grpc_raw_byte_buffer_create(&sl, 1), c);
    if (e != GRPC_CALL_OK) {
        fprintf(stderr, "bench/rpc: bare client start_batch: %d\n", (int)e);
        return -1;
    }
    return 0;
}

/* Checks and releases a completed call. */
static int finish_call(cli_call *c, bool ok)
{
    int rc = 0;
    size_t got = c->u.recv ? grpc_byte_buffer_length(c->u.recv) : 0;
    if (!ok || c->u.status != GRPC_STATUS_OK || got != BENCH_ECHO_BYTES) {
        char *d = grpc_slice_to_c_string(c->u.details);
        fprintf(stderr, "bench/rpc: bare echo failed: ok %d status %d (%s), %zu bytes\n",
                (int)ok, (int)c->u.status, d, got);
        gpr_free(d);
        rc = -1;
    }
    bench_unary_fini(&c->u);
    grpc_call_unref(c->call);
    return rc;
}

/* Makes `total` calls keeping `inflight` in flight; stores each call's latency
 * in µs in lat_us[] when given. Returns the elapsed seconds, or -1. */
static double run(client *cl, int inflight, int total, double *lat_us)
{
    cli_call *slots = calloc((size_t)inflight, sizeof *slots);
    if (!slots)
        return -1;
    int started = 0, done = 0, failed = 0;
    uint64_t t0 = bench_now_ns();
    for (; started < inflight && started < total; started++) {
        if (start_call(cl, &slots[started]) != 0) {
            failed = 1;
            break;
        }
    }
    while (done < started) {
        grpc_event ev =
            grpc_completion_queue_next(cl->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type != GRPC_OP_COMPLETE) {
            failed = 1;
            break;
        }
        cli_call *c = ev.tag;
        uint64_t t1 = bench_now_ns();
        if (lat_us)
            lat_us[done] = (double)(t1 - c->t0) * 1e-3;
        done++;
        if (finish_call(c, ev.success) != 0)
            failed = 1;
        if (!failed && started < total) {
            if (start_call(cl, c) != 0)
                failed = 1;
            else
                started++;
        }
    }
    double secs = (double)(bench_now_ns() - t0) * 1e-9;
    free(slots);
    return failed ? -1 : secs;
}

int bench_bare_open(bench_bare **out, int port)
{
    client *cl = calloc(1, sizeof *cl);
    if (!cl)
        return -1;
    for (size_t i = 0; i < sizeof cl->msg; i++)
        cl->msg[i] = (uint8_t)i;
    char target[64];
    snprintf(target, sizeof target, "127.0.0.1:%d", port);
    grpc_channel_credentials *cr = grpc_insecure_credentials_create();
    cl->ch = grpc_channel_create(target, cr, client_args());
    grpc_channel_credentials_release(cr);
    cl->cq = grpc_completion_queue_create_for_next(NULL);
    cl->method = grpc_channel_register_call(cl->ch, BENCH_BARE_METHOD, NULL, NULL);
    *out = cl;
    return 0;
}

double bench_bare_run(bench_bare *cl, int inflight, int calls, double *lat_us)
{
    return run(cl, inflight, calls, lat_us);
}

void bench_bare_close(bench_bare *cl)
{
    if (!cl)
        return;
    grpc_channel_destroy(cl->ch);
    grpc_completion_queue_shutdown(cl->cq);
    while (grpc_completion_queue_next(cl->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
               .type != GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cl->cq);
    free(cl);
}

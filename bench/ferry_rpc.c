/* bench — ferry rpc client: latency, calls/s and payload throughput. */
#include "ferry_rpc.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "ferry.pb-c.h"
#include "ferry_server.h"
#include "opts.h"
#include "stats.h"
#include "proto/raw.h"

/* No call of this benchmark should take a minute: fail rather than hang. */
#define CALL_TIMEOUT_MS 60000

typedef struct run {
    uv_loop_t *loop;
    rpc_channel *ch;
    const char *method;
    const rpc_msg_out *req;
    int total, started, done;
    bool failed;
    double *lat_us;    /* per call, when not NULL */
    size_t echo_len;   /* echo: expected reply payload length */
    uint64_t wire_len; /* sink: wire bytes of the last payload */
    atomic_int *lent;  /* sink: counts the payloads lent */
} run;

typedef struct slot {
    rpc_call call;
    run *r;
    uint64_t t0;
} slot;

static void on_done(rpc_call *call);

static void start_slot(run *r, slot *s)
{
    memset(&s->call, 0, sizeof s->call);
    s->call.data = s;
    s->r = r;
    s->t0 = bench_now_ns();
    if (r->lent)
        atomic_fetch_add(r->lent, 1);
    int err =
        rpc_call_start(r->ch, &s->call, r->method, r->req, CALL_TIMEOUT_MS, on_done);
    if (err != 0 && err != FERRY_EINTERNAL && r->lent) /* not lent after all */
        atomic_fetch_sub(r->lent, 1);
    if (err != 0) {
        fprintf(stderr, "bench/rpc: rpc_call_start %s: %s\n", r->method,
                ferry_strerror(err));
        r->failed = true;
        return;
    }
    r->started++;
}

static void check_reply(run *r, rpc_call *call)
{
    if (call->result != 0) {
        fprintf(stderr, "bench/rpc: call failed: %s (%s)\n", ferry_strerror(call->result),
                call->errmsg ? call->errmsg : "");
        r->failed = true;
        return;
    }
    if (r->echo_len) {
        if (call->reply.payload_len != r->echo_len) {
            fprintf(stderr, "bench/rpc: echo returned %zu bytes, sent %zu\n",
                    call->reply.payload_len, r->echo_len);
            r->failed = true;
        }
        return;
    }
    Ferry__PingRequest *head = NULL;
    if (proto_raw_unpack(&ferry__ping_request__descriptor, call->reply.head,
                         call->reply.head_len, (ProtobufCMessage **)&head) != 0) {
        fprintf(stderr, "bench/rpc: sink reply head does not unpack\n");
        r->failed = true;
        return;
    }
    r->wire_len = head->nonce;
    protobuf_c_message_free_unpacked(&head->base, NULL);
}

static void on_done(rpc_call *call)
{
    slot *s = call->data;
    run *r = s->r;
    if (r->lat_us)
        r->lat_us[r->done] = (double)(bench_now_ns() - s->t0) * 1e-3;
    r->done++;
    check_reply(r, call);
    rpc_call_fini(call);
    if (!r->failed && r->started < r->total)
        start_slot(r, s);
}

/* Makes r->total calls keeping `inflight` in flight. Returns elapsed seconds
 * or -1. */
static double run_calls(run *r, int inflight)
{
    slot *slots = calloc((size_t)inflight, sizeof *slots);
    if (!slots)
        return -1;
    r->started = r->done = 0;
    r->failed = false;
    uint64_t t0 = bench_now_ns();
    for (int i = 0; i < inflight && r->started < r->total && !r->failed; i++)
        start_slot(r, &slots[i]);
    while (r->done < r->started)
        uv_run(r->loop, UV_RUN_ONCE);
    double secs = (double)(bench_now_ns() - t0) * 1e-9;
    free(slots);
    return r->failed ? -1 : secs;
}

struct bench_ferry {
    uv_loop_t loop;
    rpc_client *client;
    rpc_channel *ch;
    atomic_int lent; /* sink payloads gRPC has not released */
};

/* gRPC is done with one lent sink payload (any thread). */
static void on_release(void *payload, void *arg)
{
    (void)payload;
    bench_ferry *f = arg;
    atomic_fetch_sub(&f->lent, 1);
}

int bench_ferry_open(bench_ferry **out, int port)
{
    bench_ferry *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    int err;
    char target[64];
    snprintf(target, sizeof target, "127.0.0.1:%d", port);
    if ((err = uv_loop_init(&f->loop)) != 0) {
        fprintf(stderr, "bench/rpc: uv_loop_init: %s\n", uv_strerror(err));
        free(f);
        return -1;
    }
    if ((err = rpc_client_create(&f->loop, &f->client)) != 0) {
        fprintf(stderr, "bench/rpc: rpc_client_create: %s\n", ferry_strerror(err));
        goto fail;
    }
    if ((err = rpc_channel_create(f->client, target, NULL, &f->ch)) != 0) {
        fprintf(stderr, "bench/rpc: rpc_channel_create: %s\n", ferry_strerror(err));
        goto fail;
    }
    *out = f;
    return 0;
fail:
    bench_ferry_close(f);
    return -1;
}

int bench_ferry_close(bench_ferry *f)
{
    if (!f)
        return 0;
    if (f->ch)
        rpc_channel_destroy(f->ch);
    if (f->client)
        rpc_client_close(f->client);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    int err = uv_loop_close(&f->loop), rc = 0;
    if (err != 0) {
        fprintf(stderr, "bench/rpc: uv_loop_close: %s (handles left open)\n",
                uv_strerror(err));
        rc = -1;
    }
    free(f);
    return rc;
}

double bench_ferry_echo(bench_ferry *f, int inflight, int calls, double *lat_us)
{
    static uint8_t msg[BENCH_ECHO_BYTES];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (uint8_t)i;
    rpc_msg_out req = {.payload = msg, .payload_len = sizeof msg, .codec = RPC_CODEC_RAW};
    run r = {
        .loop = &f->loop,
        .ch = f->ch,
        .method = BENCH_ECHO_METHOD,
        .req = &req,
        .total = calls,
        .lat_us = lat_us,
        .echo_len = sizeof msg,
    };
    return run_calls(&r, inflight);
}

double bench_ferry_sink(bench_ferry *f, const void *payload, size_t len, rpc_codec codec,
                        int calls, uint64_t *wire_len)
{
    Ferry__PingRequest head = FERRY__PING_REQUEST__INIT;
    head.nonce = len;
    proto_raw packed = proto_raw_pack(&head.base);
    rpc_msg_out req = {
        .head_bytes = packed.data,
        .head_len = packed.len,
        .payload = payload,
        .payload_len = len,
        .codec = codec,
        .payload_free = on_release,
        .free_arg = f,
    };
    run r = {
        .loop = &f->loop,
        .ch = f->ch,
        .method = BENCH_SINK_METHOD,
        .req = &req,
        .total = calls,
        .lent = &f->lent,
    };
    double s = run_calls(&r, 1);
    if (wire_len)
        *wire_len = r.wire_len;
    while (atomic_load(&f->lent) > 0) {
        uv_run(&f->loop, UV_RUN_NOWAIT);
        sched_yield();
    }
    return s;
}

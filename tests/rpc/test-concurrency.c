/* tests/rpc — many calls in flight on one channel share one connection. */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(rpc_concurrency, .init = h_setup, .fini = h_teardown, .timeout = 120);

enum { N_CALLS = 1000 };

typedef struct slot {
    rpc_call call;
    Ferry__CallRequest req;
    proto_raw head;
    rpc_msg_out out;
    char fn[24];
    uint64_t payload[4]; /* index, ~index, index * k, seed */
    int completions;
} slot;

static int completed;

static void slot_done(rpc_call *call)
{
    slot *s = call->data;
    s->completions++;
    completed++;
}

static void check_slot(slot *s, size_t i)
{
    rpc_call *c = &s->call;
    cr_assert(s->completions == 1, "call %zu completed %d times", i, s->completions);
    cr_assert(c->result == 0, "call %zu: %s: %s", i, ferry_err_name(c->result),
              c->errmsg ? c->errmsg : "");
    Ferry__CallRequest *r = h_reply_callreq(&c->reply);
    cr_assert_str_eq(r->function, s->fn, "call %zu got the reply of %s", i, r->function);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    cr_assert(c->reply.payload_len == sizeof s->payload);
    cr_assert(memcmp(c->reply.payload, s->payload, sizeof s->payload) == 0,
              "call %zu: payload of another call", i);
}

static void run_concurrent(const char *method, rpc_codec codec)
{
    slot *slots = calloc(N_CALLS, sizeof *slots);
    completed = 0;
    for (size_t i = 0; i < N_CALLS; i++) {
        slot *s = &slots[i];
        snprintf(s->fn, sizeof s->fn, "call-%zu", i);
        s->payload[0] = i;
        s->payload[1] = ~(uint64_t)i;
        s->payload[2] = i * 0x9e3779b97f4a7c15ull;
        s->payload[3] = 42;
        h_msg_out(&s->out, &s->req, &s->head, "idx", s->fn, s->payload, sizeof s->payload,
                  codec);
        s->call.data = s;
        int rc = rpc_call_start(H.ch, &s->call, method, &s->out, 60000, slot_done);
        cr_assert(rc == 0, "start %zu: %s", i, ferry_err_name(rc));
    }
    cr_assert(h_run_until_count(&completed, N_CALLS, 60000), "%d of %d calls completed",
              completed, N_CALLS);
    uv_run(&H.loop, UV_RUN_NOWAIT);
    cr_assert(completed == N_CALLS, "%d completions for %d calls", completed, N_CALLS);
    for (size_t i = 0; i < N_CALLS; i++) {
        check_slot(&slots[i], i);
        rpc_call_fini(&slots[i].call);
    }
    free(slots);
}

H_TEST(rpc_concurrency, thousand_calls_on_one_channel_get_their_own_replies)
{
    run_concurrent(H_ECHO_POOL, RPC_CODEC_RAW);
    cr_assert(atomic_load(&HS.handled) == N_CALLS, "server handled %d calls",
              atomic_load(&HS.handled));
}

H_TEST(rpc_concurrency, thousand_calls_on_one_channel_use_one_connection)
{
    run_concurrent(H_ECHO_POOL, RPC_CODEC_LZ4);
    /* The client port differs per TCP connection: one peer, one connection. */
    size_t peers = h_distinct_peers();
    cr_assert(peers == 1, "the server saw %zu distinct client addresses", peers);
}

H_TEST(rpc_concurrency, thousand_calls_to_an_inline_handler_complete)
{
    run_concurrent(H_ECHO, RPC_CODEC_RAW);
}

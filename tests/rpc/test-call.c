/* tests/rpc — unary calls end to end: round trips, handler outcomes, metadata,
 * payload ownership. */
#include "harness.h"
#include "proto/raw.h"

#include <stdlib.h>
#include <string.h>

TestSuite(rpc_call, .init = h_setup, .fini = h_teardown, .timeout = 60);

static void check_echo(rpc_call *call, const char *sha256, const char *function,
                       const void *payload, size_t len)
{
    cr_assert(call->result == 0, "call failed: %s: %s", ferry_err_name(call->result),
              call->errmsg ? call->errmsg : "(no errmsg)");
    Ferry__CallRequest *r = h_reply_callreq(&call->reply);
    cr_assert_str_eq(r->sha256, sha256);
    cr_assert_str_eq(r->function, function);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    cr_assert(call->reply.payload_len == len, "reply payload %zu bytes, sent %zu",
              call->reply.payload_len, len);
    if (len == 0)
        return;
    cr_assert(call->reply.payload != NULL);
    cr_assert(memcmp(call->reply.payload, payload, len) == 0, "reply payload differs");
}

static void round_trip(const char *method, const void *payload, size_t len,
                       rpc_codec codec)
{
    rpc_call call;
    h_call(H.ch, &call, method, "0123abcd", "square", payload, len, codec,
           H_CALL_TIMEOUT_MS);
    check_echo(&call, "0123abcd", "square", payload, len);
    rpc_call_fini(&call);
}

H_TEST(rpc_call, round_trip_returns_head_and_raw_payload_bytes)
{
    size_t len = 100000;
    uint8_t *p = malloc(len);
    h_fill_random(p, len, 1);
    rpc_call call;
    h_call(H.ch, &call, H_ECHO, "0123abcd", "square", p, len, RPC_CODEC_RAW,
           H_CALL_TIMEOUT_MS);
    check_echo(&call, "0123abcd", "square", p, len);
    cr_assert(call.reply.codec == RPC_CODEC_RAW);
    cr_assert(call.reply.wire_len == len, "raw wire_len %zu != %zu", call.reply.wire_len,
              len);
    rpc_call_fini(&call);
    free(p);
}

H_TEST(rpc_call, round_trip_returns_head_and_lz4_payload_bytes)
{
    size_t len = 1 << 20;
    uint8_t *p = malloc(len);
    h_fill_sparse(p, len, 2);
    rpc_call call;
    h_call(H.ch, &call, H_ECHO, "0123abcd", "square", p, len, RPC_CODEC_LZ4,
           H_CALL_TIMEOUT_MS);
    check_echo(&call, "0123abcd", "square", p, len);
    /* The echo replies with the codec the request arrived with. */
    cr_assert(call.reply.codec == RPC_CODEC_LZ4, "reply arrived as codec %d",
              call.reply.codec);
    cr_assert(call.reply.wire_len < len / 4, "lz4 wire_len %zu for %zu sparse bytes",
              call.reply.wire_len, len);
    rpc_call_fini(&call);
    free(p);
}

H_TEST(rpc_call, round_trip_with_auto_codec_compresses_sparse_data)
{
    size_t len = 1 << 20;
    uint8_t *p = malloc(len);
    h_fill_sparse(p, len, 3);
    rpc_call call;
    h_call(H.ch, &call, H_ECHO, "s", "f", p, len, RPC_CODEC_AUTO, H_CALL_TIMEOUT_MS);
    check_echo(&call, "s", "f", p, len);
    cr_assert(call.reply.codec == RPC_CODEC_LZ4, "AUTO sent sparse data as codec %d",
              call.reply.codec);
    rpc_call_fini(&call);
    free(p);
}

H_TEST(rpc_call, round_trip_without_payload_gives_no_payload)
{
    rpc_call call;
    h_call(H.ch, &call, H_ECHO, "only", "head", NULL, 0, RPC_CODEC_RAW,
           H_CALL_TIMEOUT_MS);
    check_echo(&call, "only", "head", NULL, 0);
    cr_assert(call.reply.payload == NULL);
    rpc_call_fini(&call);
}

H_TEST(rpc_call, round_trip_of_a_payload_above_grpc_default_4mib_limit)
{
    size_t len = (size_t)9 << 20;
    uint8_t *p = malloc(len);
    h_fill_random(p, len, 4);
    round_trip(H_ECHO, p, len, RPC_CODEC_RAW);
    round_trip(H_ECHO, p, len, RPC_CODEC_LZ4);
    free(p);
}

H_TEST(rpc_call, round_trip_with_empty_head)
{
    uint8_t p[3] = {1, 2, 3};
    rpc_msg_out out = {.payload = p, .payload_len = sizeof p};
    rpc_call call = {0};
    h_done d = {0};
    call.data = &d;
    cr_assert(rpc_call_start(H.ch, &call, H_ECHO, &out, H_CALL_TIMEOUT_MS, h_done_cb) ==
              0);
    cr_assert(h_run_until_flag(&d.done, H_WAIT_MS));
    check_echo(&call, "", "", p, sizeof p);
    rpc_call_fini(&call);
}

H_TEST(rpc_call, handler_can_forward_a_received_head_as_bytes)
{
    uint8_t p[5000];
    h_fill_sparse(p, sizeof p, 9);
    round_trip(H_FORWARD, p, sizeof p, RPC_CODEC_RAW);
    round_trip(H_FORWARD, p, sizeof p, RPC_CODEC_LZ4);
    round_trip(H_FORWARD, NULL, 0, RPC_CODEC_RAW);
}

H_TEST(rpc_call, handler_on_the_pool_replies_like_an_inline_one)
{
    uint8_t p[4096];
    h_fill_random(p, sizeof p, 5);
    round_trip(H_ECHO_POOL, p, sizeof p, RPC_CODEC_RAW);
    round_trip(H_ECHO_POOL, p, sizeof p, RPC_CODEC_LZ4);
}

H_TEST(rpc_call, reply_payload_is_64_byte_aligned_and_can_be_taken)
{
    uint8_t p[1000];
    h_fill_random(p, sizeof p, 6);
    rpc_call call;
    h_call(H.ch, &call, H_ECHO, "a", "b", p, sizeof p, RPC_CODEC_RAW, H_CALL_TIMEOUT_MS);
    check_echo(&call, "a", "b", p, sizeof p);
    cr_assert(((uintptr_t)call.reply.payload & 63) == 0, "payload at %p",
              call.reply.payload);
    size_t len = 0;
    void *taken = rpc_msg_take_payload(&call.reply, &len);
    cr_assert(taken != NULL && len == sizeof p);
    cr_assert(call.reply.payload == NULL, "msg still points at the taken payload");
    rpc_call_fini(&call); /* must not free what was taken */
    cr_assert(memcmp(taken, p, len) == 0);
    rpc_buf_free(taken);
}

H_TEST(rpc_call, handler_replying_from_another_thread_later_completes_the_call)
{
    uint8_t p[256];
    h_fill_random(p, sizeof p, 7);
    double t0 = h_now_ms();
    rpc_call call;
    h_call(H.ch, &call, H_SLOW, "later", "reply", p, sizeof p, RPC_CODEC_RAW,
           H_CALL_TIMEOUT_MS);
    double took = h_now_ms() - t0;
    check_echo(&call, "later", "reply", p, sizeof p);
    cr_assert(took >= H_SLOW_MS - 5, "slow reply arrived after %.1f ms", took);
    rpc_call_fini(&call);
}

H_TEST(rpc_call, handlers_replying_from_other_threads_overlap)
{
    enum { N = 16 };
    rpc_call calls[N];
    rpc_call *ptrs[N];
    Ferry__CallRequest reqs[N];
    proto_raw heads[N];
    rpc_msg_out outs[N];
    char fn[N][16];
    double t0 = h_now_ms();
    for (int i = 0; i < N; i++) {
        snprintf(fn[i], sizeof fn[i], "n%d", i);
        h_msg_out(&outs[i], &reqs[i], &heads[i], "s", fn[i], fn[i], strlen(fn[i]),
                  RPC_CODEC_RAW);
        memset(&calls[i], 0, sizeof calls[i]);
        ptrs[i] = &calls[i];
        /* cb NULL: a future, completed by rpc_call_wait_all below. */
        int rc =
            rpc_call_start(H.ch, &calls[i], H_SLOW, &outs[i], H_CALL_TIMEOUT_MS, NULL);
        cr_assert(rc == 0, "start %d: %s", i, ferry_err_name(rc));
    }
    int rc = rpc_call_wait_all(ptrs, N);
    double took = h_now_ms() - t0;
    cr_assert(rc == 0, "wait_all: %s", ferry_err_name(rc));
    for (int i = 0; i < N; i++) {
        check_echo(&calls[i], "s", fn[i], fn[i], strlen(fn[i]));
        rpc_call_fini(&calls[i]);
    }
    /* Overlap is seen, not timed: one handler thread at a time would never
     * have two in their 50 ms at once. */
    fprintf(stderr, "%d slow calls took %.0f ms, at most %d at once\n", N, took,
            atomic_load(&HS.slow_peak));
    cr_assert(atomic_load(&HS.slow_peak) >= 2, "%d slow calls never overlapped (%.0f ms)",
              N, took);
}

H_TEST(rpc_call, call_with_no_deadline_completes)
{
    rpc_call call;
    h_call(H.ch, &call, H_SLOW, "x", "y", NULL, 0, RPC_CODEC_RAW, 0);
    check_echo(&call, "x", "y", NULL, 0);
    rpc_call_fini(&call);
}

H_TEST(rpc_call, failing_handler_returns_its_text_and_code)
{
    rpc_call call;
    int rc = h_call(H.ch, &call, H_FAIL, "", "sqrt.so", NULL, 0, RPC_CODEC_RAW,
                    H_CALL_TIMEOUT_MS);
    cr_assert(rc == FERRY_ENOENT, "result %s (%d), errmsg %s", ferry_err_name(rc), rc,
              call.errmsg);
    cr_assert(call.result == rc);
    cr_assert(call.errmsg != NULL);
    cr_assert(strstr(call.errmsg, "no module sqrt.so") != NULL, "errmsg: %s",
              call.errmsg);
    cr_assert(strstr(call.errmsg, H.target) != NULL, "errmsg names no peer: %s",
              call.errmsg);
    cr_assert(strstr(call.errmsg, H_FAIL) != NULL, "errmsg names no method: %s",
              call.errmsg);
    cr_assert(call.reply.payload == NULL && call.reply.payload_len == 0);
    rpc_call_fini(&call);
    cr_assert(call.errmsg == NULL, "rpc_call_fini left errmsg");
}

H_TEST(rpc_call, slow_handler_failing_from_another_thread_returns_its_code)
{
    rpc_call call;
    int rc = h_call(H.ch, &call, H_SLOW, "", "fail", NULL, 0, RPC_CODEC_RAW,
                    H_CALL_TIMEOUT_MS);
    cr_assert(rc == FERRY_EINVAL, "result %s, errmsg %s", ferry_err_name(rc),
              call.errmsg);
    cr_assert(call.errmsg && strstr(call.errmsg, "failed on purpose"), "errmsg: %s",
              call.errmsg);
    rpc_call_fini(&call);
}

H_TEST(rpc_call, unknown_method_fails_with_enotsup)
{
    rpc_call call;
    int rc = h_call(H.ch, &call, "/test.Echo/NoSuchMethod", "", "", NULL, 0,
                    RPC_CODEC_RAW, H_CALL_TIMEOUT_MS);
    cr_assert(rc == FERRY_ENOTSUP, "result %s, errmsg %s", ferry_err_name(rc),
              call.errmsg);
    cr_assert(call.errmsg && strstr(call.errmsg, "/test.Echo/NoSuchMethod"), "errmsg: %s",
              call.errmsg);
    rpc_call_fini(&call);
    cr_assert(atomic_load(&HS.handled) == 0, "a handler ran for an unknown method");
}

H_TEST(rpc_call, worker_method_without_handler_fails_with_enotsup)
{
    rpc_call call;
    int rc = h_call(H.ch, &call, "/ferry.Worker/Stats", "", "", NULL, 0, RPC_CODEC_RAW,
                    H_CALL_TIMEOUT_MS);
    cr_assert(rc == FERRY_ENOTSUP, "result %s, errmsg %s", ferry_err_name(rc),
              call.errmsg);
    rpc_call_fini(&call);
    /* The server still serves the methods it has after that. */
    round_trip(H_ECHO, "abc", 3, RPC_CODEC_RAW);
}

static Ferry__LoadModuleReply *info_call(rpc_channel *ch)
{
    rpc_call call;
    int rc = h_call(ch, &call, H_INFO, "", "", NULL, 0, RPC_CODEC_RAW, H_CALL_TIMEOUT_MS);
    cr_assert(rc == 0, "info: %s: %s", ferry_err_name(rc), call.errmsg);
    ProtobufCMessage *m = NULL;
    cr_assert(proto_raw_unpack(&ferry__load_module_reply__descriptor, call.reply.head,
                               call.reply.head_len, &m) == 0);
    rpc_call_fini(&call);
    Ferry__LoadModuleReply *r = (Ferry__LoadModuleReply *)m;
    cr_assert(r->n_functions == 2);
    return r;
}

H_TEST(rpc_call, channel_token_reaches_the_handler_as_metadata)
{
    rpc_channel_opts o = {.token = "s3cret-token"};
    cr_assert(rpc_channel_create(H.client, H.target, &o, &H.extra[0]) == 0);
    Ferry__LoadModuleReply *r = info_call(H.extra[0]);
    cr_assert_str_eq(r->functions[1], "s3cret-token");
    cr_assert_str_eq(r->task_name, H_INFO, "rpc_srv_method gave %s", r->task_name);
    protobuf_c_message_free_unpacked(&r->base, NULL);
}

H_TEST(rpc_call, channel_without_token_sends_none)
{
    Ferry__LoadModuleReply *r = info_call(H.ch);
    cr_assert_str_eq(r->functions[1], "(none)");
    protobuf_c_message_free_unpacked(&r->base, NULL);
}

H_TEST(rpc_call, handler_sees_the_client_address_as_peer)
{
    Ferry__LoadModuleReply *r = info_call(H.ch);
    cr_assert(strstr(r->functions[0], "127.0.0.1:") != NULL, "peer %s", r->functions[0]);
    protobuf_c_message_free_unpacked(&r->base, NULL);
}

H_TEST(rpc_call, channel_reports_its_target)
{
    cr_assert_str_eq(rpc_channel_target(H.ch), H.target);
}

H_TEST(rpc_call, call_struct_can_be_reused_after_fini)
{
    rpc_call call;
    for (int i = 0; i < 3; i++) {
        char fn[16];
        snprintf(fn, sizeof fn, "round%d", i);
        h_call(H.ch, &call, H_ECHO, "s", fn, fn, strlen(fn), RPC_CODEC_RAW,
               H_CALL_TIMEOUT_MS);
        check_echo(&call, "s", fn, fn, strlen(fn));
        rpc_call_fini(&call);
    }
}

H_TEST(rpc_call, cancel_after_completion_is_harmless)
{
    rpc_call call;
    h_call(H.ch, &call, H_ECHO, "s", "f", "xyz", 3, RPC_CODEC_RAW, H_CALL_TIMEOUT_MS);
    rpc_call_cancel(&call);
    h_run_for(20);
    check_echo(&call, "s", "f", "xyz", 3);
    rpc_call_fini(&call);
}

static atomic_int freed;
static void count_free(void *payload, void *arg)
{
    cr_assert(arg == &freed);
    free(payload);
    atomic_fetch_add(&freed, 1);
}

H_TEST(rpc_call, owned_request_payload_is_freed_once_after_the_call)
{
    atomic_store(&freed, 0);
    size_t len = 1 << 20;
    uint8_t *p = malloc(len);
    h_fill_random(p, len, 8);
    uint8_t *copy = malloc(len);
    memcpy(copy, p, len);
    Ferry__CallRequest req;
    proto_raw req_head;
    rpc_msg_out out;
    h_msg_out(&out, &req, &req_head, "s", "f", p, len, RPC_CODEC_RAW);
    out.payload_free = count_free;
    out.free_arg = &freed;
    rpc_call call = {0};
    h_done d = {0};
    call.data = &d;
    cr_assert(rpc_call_start(H.ch, &call, H_ECHO, &out, H_CALL_TIMEOUT_MS, h_done_cb) ==
              0);
    cr_assert(h_run_until_flag(&d.done, H_WAIT_MS));
    check_echo(&call, "s", "f", copy, len);
    rpc_call_fini(&call);
    cr_assert(h_run_until_atomic(&freed, 1, 2000), "payload_free never ran");
    h_run_for(20);
    cr_assert(atomic_load(&freed) == 1, "payload_free ran %d times", atomic_load(&freed));
    free(copy);
}

/* The callback owns the call once it runs: it may finish and free it. */
static int freed_in_cb;
static void fini_and_free_cb(rpc_call *call)
{
    cr_assert(call->result == 0);
    rpc_call_fini(call);
    free(call);
    freed_in_cb++;
}

H_TEST(rpc_call, callback_may_free_its_call)
{
    enum { N = 20 };
    freed_in_cb = 0;
    for (int i = 0; i < N; i++) {
        rpc_call *c = calloc(1, sizeof *c);
        Ferry__CallRequest req;
        proto_raw req_head;
        rpc_msg_out out;
        h_msg_out(&out, &req, &req_head, "heap", "call", "12345", 5, RPC_CODEC_RAW);
        cr_assert(rpc_call_start(H.ch, c, i % 2 ? H_ECHO : H_SLOW, &out,
                                 H_CALL_TIMEOUT_MS, fini_and_free_cb) == 0);
    }
    cr_assert(h_run_until_count(&freed_in_cb, N, H_WAIT_MS), "%d of %d callbacks ran",
              freed_in_cb, N);
}

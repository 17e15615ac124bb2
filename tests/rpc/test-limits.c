/* tests/rpc — payload size limits on both ends of a call. */
#include "harness.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(rpc_limits, .init = h_setup_bare, .fini = h_teardown, .timeout = 60);

static atomic_int freed;
static void count_free(void *payload, void *arg)
{
    (void)arg;
    free(payload);
    atomic_fetch_add(&freed, 1);
}

H_TEST(rpc_limits, start_above_channel_max_payload_returns_emsgsize_and_skips_callback)
{
    h_server_start(0);
    rpc_channel_opts o = {.max_payload = 1024};
    h_channel_open(&o);
    uint8_t p[1025] = {0};
    Ferry__CallRequest req;
    proto_raw req_head;
    rpc_msg_out out;
    h_msg_out(&out, &req, &req_head, "", "", p, sizeof p, RPC_CODEC_RAW);
    rpc_call call = {0};
    h_done d = {0};
    call.data = &d;
    int rc = rpc_call_start(H.ch, &call, H_ECHO, &out, H_CALL_TIMEOUT_MS, h_done_cb);
    cr_assert(rc == FERRY_EMSGSIZE, "start returned %s", ferry_err_name(rc));
    h_run_for(50);
    cr_assert(d.completions == 0, "the callback of a failed start ran");
    cr_assert(atomic_load(&HS.handled) == 0,
              "a request over the limit reached the server");
    /* Compressible data is checked by its raw size, not its wire size. */
    memset(&call, 0, sizeof call);
    call.data = &d;
    out.codec = RPC_CODEC_LZ4;
    rc = rpc_call_start(H.ch, &call, H_ECHO, &out, H_CALL_TIMEOUT_MS, h_done_cb);
    cr_assert(rc == FERRY_EMSGSIZE, "lz4 start returned %s", ferry_err_name(rc));
    h_run_for(20);
    cr_assert(d.completions == 0);
}

H_TEST(rpc_limits, payload_of_exactly_channel_max_payload_goes_through)
{
    h_server_start(0);
    rpc_channel_opts o = {.max_payload = 1024};
    h_channel_open(&o);
    uint8_t p[1024];
    h_fill_random(p, sizeof p, 11);
    rpc_call call;
    int rc = h_call(H.ch, &call, H_ECHO, "", "", p, sizeof p, RPC_CODEC_RAW,
                    H_CALL_TIMEOUT_MS);
    cr_assert(rc == 0, "%s: %s", ferry_err_name(rc), call.errmsg);
    cr_assert(call.reply.payload_len == sizeof p);
    cr_assert(memcmp(call.reply.payload, p, sizeof p) == 0);
    rpc_call_fini(&call);
}

H_TEST(rpc_limits, failed_start_leaves_an_owned_payload_with_the_caller)
{
    h_server_start(0);
    rpc_channel_opts o = {.max_payload = 16};
    h_channel_open(&o);
    atomic_store(&freed, 0);
    uint8_t *p = calloc(1, 64);
    Ferry__CallRequest req;
    proto_raw req_head;
    rpc_msg_out out;
    h_msg_out(&out, &req, &req_head, "", "", p, 64, RPC_CODEC_RAW);
    out.payload_free = count_free;
    rpc_call call = {0};
    h_done d = {0};
    call.data = &d;
    int rc = rpc_call_start(H.ch, &call, H_ECHO, &out, H_CALL_TIMEOUT_MS, h_done_cb);
    cr_assert(rc == FERRY_EMSGSIZE, "start returned %s", ferry_err_name(rc));
    h_run_for(20);
    cr_assert(atomic_load(&freed) == 0, "rpc freed a payload it did not take");
    cr_assert(d.completions == 0);
    free(p);
}

H_TEST(rpc_limits, server_with_small_max_payload_rejects_a_larger_request)
{
    h_server_start(1024);
    h_channel_open(NULL);
    size_t len = 4096;
    uint8_t *p = malloc(len);
    h_fill_random(p, len, 12);
    rpc_call call;
    int rc =
        h_call(H.ch, &call, H_ECHO, "", "", p, len, RPC_CODEC_RAW, H_CALL_TIMEOUT_MS);
    cr_assert(rc == FERRY_EMSGSIZE, "result %s, errmsg %s", ferry_err_name(rc),
              call.errmsg);
    cr_assert(atomic_load(&HS.handled) == 0, "the handler ran for an oversized request");
    rpc_call_fini(&call);
    /* The server goes on serving calls within its limit. */
    rc = h_call(H.ch, &call, H_ECHO, "", "", p, 1000, RPC_CODEC_RAW, H_CALL_TIMEOUT_MS);
    cr_assert(rc == 0, "small call after a rejected one: %s", ferry_err_name(rc));
    rpc_call_fini(&call);
    free(p);
}

H_TEST(rpc_limits, server_rejects_a_small_lz4_payload_whose_raw_size_exceeds_its_limit)
{
    h_server_start(1024);
    h_channel_open(NULL);
    size_t len = 64 << 10;
    uint8_t *p = calloc(1, len); /* zeros: a few hundred bytes as lz4 */
    rpc_call call;
    int rc =
        h_call(H.ch, &call, H_ECHO, "", "", p, len, RPC_CODEC_LZ4, H_CALL_TIMEOUT_MS);
    cr_assert(rc == FERRY_EMSGSIZE, "result %s, errmsg %s", ferry_err_name(rc),
              call.errmsg);
    cr_assert(atomic_load(&HS.handled) == 0);
    rpc_call_fini(&call);
    free(p);
}

H_TEST(rpc_limits, client_rejects_a_reply_above_its_channel_max_payload)
{
    h_server_start(0);
    rpc_channel_opts o = {.max_payload = 1024};
    h_channel_open(&o);
    rpc_call call;
    int rc = h_call(H.ch, &call, H_SIZED, "", "4096", NULL, 0, RPC_CODEC_RAW,
                    H_CALL_TIMEOUT_MS);
    cr_assert(rc == FERRY_EMSGSIZE, "result %s, errmsg %s", ferry_err_name(rc),
              call.errmsg);
    cr_assert(call.reply.payload == NULL);
    rpc_call_fini(&call);
    rc = h_call(H.ch, &call, H_SIZED, "", "1024", NULL, 0, RPC_CODEC_RAW,
                H_CALL_TIMEOUT_MS);
    cr_assert(rc == 0, "reply of exactly max_payload: %s", ferry_err_name(rc));
    cr_assert(call.reply.payload_len == 1024);
    rpc_call_fini(&call);
}

H_TEST(rpc_limits, server_reply_above_its_max_payload_fails_the_call)
{
    h_server_start(1024);
    h_channel_open(NULL);
    rpc_call call;
    int rc = h_call(H.ch, &call, H_SIZED, "", "4096", NULL, 0, RPC_CODEC_RAW,
                    H_CALL_TIMEOUT_MS);
    cr_assert(rc == FERRY_EMSGSIZE, "result %s, errmsg %s", ferry_err_name(rc),
              call.errmsg);
    rpc_call_fini(&call);
    /* The handler records rpc_srv_reply's result after it returns, which
     * can be after the client has its answer. */
    for (int i = 0; i < 500 && atomic_load(&HS.sized_reply_rc) == 1; i++)
        usleep(10000);
    int reply_rc = atomic_load(&HS.sized_reply_rc);
    cr_assert(reply_rc == FERRY_EMSGSIZE, "rpc_srv_reply returned %s (%d)",
              ferry_err_name(reply_rc), reply_rc);
}

H_TEST(rpc_limits, start_with_bad_arguments_fails_and_skips_callback)
{
    h_server_start(0);
    h_channel_open(NULL);
    rpc_call call = {0};
    h_done d = {0};
    call.data = &d;
    rpc_msg_out out = {0};
    int rc = rpc_call_start(H.ch, &call, NULL, &out, H_CALL_TIMEOUT_MS, h_done_cb);
    cr_assert(rc != 0, "a call without a method started");
    /* payload_len without a payload */
    out.payload_len = 10;
    memset(&call, 0, sizeof call);
    call.data = &d;
    rc = rpc_call_start(H.ch, &call, H_ECHO, &out, H_CALL_TIMEOUT_MS, h_done_cb);
    cr_assert(rc == FERRY_EINVAL, "10 bytes at NULL: %s", ferry_err_name(rc));
    h_run_for(20);
    cr_assert(d.completions == 0, "the callback of a failed start ran");
    cr_assert(atomic_load(&HS.handled) == 0);
}

H_TEST(rpc_limits, limits_above_the_largest_payload_limit_are_refused)
{
    h_server_start(0);
    rpc_channel_opts o = {.max_payload = RPC_MAX_PAYLOAD_LIMIT + 1};
    int rc = rpc_channel_create(H.client, H.target, &o, &H.ch);
    cr_assert(rc != 0, "a channel with max_payload above RPC_MAX_PAYLOAD_LIMIT");
    H.ch = NULL;
    const rpc_method *m;
    size_t n = h_methods(&m);
    rpc_server_opts so = {.listen = "127.0.0.1:0",
                          .max_payload = RPC_MAX_PAYLOAD_LIMIT + 1};
    rc = rpc_server_create(&so, m, n, &H.extra_server);
    cr_assert(rc != 0, "a server with max_payload above RPC_MAX_PAYLOAD_LIMIT");
    H.extra_server = NULL;
    /* The limit itself is allowed. */
    o.max_payload = RPC_MAX_PAYLOAD_LIMIT;
    cr_assert(rpc_channel_create(H.client, H.target, &o, &H.ch) == 0);
}

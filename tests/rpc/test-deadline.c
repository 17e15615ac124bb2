/* tests/rpc — deadlines, and peers that are not there. */
#include "harness.h"

#include <stdio.h>
#include <string.h>

TestSuite(rpc_deadline, .init = h_setup, .fini = h_teardown, .timeout = 60);

H_TEST(rpc_deadline, exceeded_deadline_fails_with_etimedout_naming_peer_and_method)
{
    double t0 = h_now_ms();
    rpc_call call;
    int rc = h_call(H.ch, &call, H_BLOCK, "", "", NULL, 0, RPC_CODEC_RAW, 300);
    double took = h_now_ms() - t0;
    cr_assert(rc == FERRY_ETIMEDOUT, "result %s, errmsg %s", ferry_err_name(rc),
              call.errmsg);
    cr_assert(call.errmsg != NULL);
    cr_assert(strstr(call.errmsg, H.target) != NULL, "errmsg names no peer: %s",
              call.errmsg);
    cr_assert(strstr(call.errmsg, H_BLOCK) != NULL, "errmsg names no method: %s",
              call.errmsg);
    cr_assert(took >= 250, "deadline of 300 ms hit after %.0f ms", took);
    cr_assert(took < 300 + 2000, "deadline of 300 ms hit after %.0f ms", took);
    rpc_call_fini(&call);
    /* The server saw the deadline pass too: the blocked handler was released. */
    cr_assert(h_run_until_atomic(&HS.block_cancelled, 1, 5000),
              "the handler never saw rpc_srv_cancelled after the deadline");
}

H_TEST(rpc_deadline, slow_reply_within_the_deadline_succeeds)
{
    rpc_call call;
    int rc = h_call(H.ch, &call, H_SLOW, "", "", NULL, 0, RPC_CODEC_RAW, 5000);
    cr_assert(rc == 0, "result %s, errmsg %s", ferry_err_name(rc), call.errmsg);
    rpc_call_fini(&call);
}

H_TEST(rpc_deadline, slow_reply_after_the_deadline_fails_with_etimedout)
{
    rpc_call call;
    int rc = h_call(H.ch, &call, H_SLOW, "", "", NULL, 0, RPC_CODEC_RAW, 10);
    cr_assert(rc == FERRY_ETIMEDOUT, "result %s, errmsg %s", ferry_err_name(rc),
              call.errmsg);
    rpc_call_fini(&call);
}

/* A port with nothing listening: the connection is refused at once, so the
 * call must fail as unavailable well before its deadline. */
H_TEST(rpc_deadline, server_not_running_fails_with_eunavail_within_the_deadline)
{
    char target[64];
    snprintf(target, sizeof target, "127.0.0.1:%d", h_dead_port());
    cr_assert(rpc_channel_create(H.client, target, NULL, &H.extra[0]) == 0);
    const int64_t deadline_ms = 5000;
    const double slack_ms = 1000;
    double t0 = h_now_ms();
    rpc_call call;
    int rc =
        h_call(H.extra[0], &call, H_ECHO, "", "", "x", 1, RPC_CODEC_RAW, deadline_ms);
    double took = h_now_ms() - t0;
    cr_assert(rc == FERRY_EUNAVAIL, "result %s after %.0f ms, errmsg %s",
              ferry_err_name(rc), took, call.errmsg);
    cr_assert(took < deadline_ms + slack_ms, "took %.0f ms, deadline %lld ms", took,
              (long long)deadline_ms);
    cr_assert(call.errmsg && strstr(call.errmsg, target), "errmsg names no peer: %s",
              call.errmsg);
    rpc_call_fini(&call);
}

H_TEST(rpc_deadline, many_calls_to_a_dead_server_all_fail)
{
    enum { N = 50 };
    char target[64];
    snprintf(target, sizeof target, "127.0.0.1:%d", h_dead_port());
    cr_assert(rpc_channel_create(H.client, target, NULL, &H.extra[0]) == 0);
    rpc_call calls[N];
    rpc_call *ptrs[N];
    rpc_msg_out out = {0};
    for (int i = 0; i < N; i++) {
        memset(&calls[i], 0, sizeof calls[i]);
        ptrs[i] = &calls[i];
        cr_assert(rpc_call_start(H.extra[0], &calls[i], H_ECHO, &out, 5000, NULL) == 0);
    }
    double t0 = h_now_ms();
    int rc = rpc_call_wait_all(ptrs, N);
    cr_assert(rc == FERRY_EUNAVAIL, "wait_all: %s", ferry_err_name(rc));
    cr_assert(h_now_ms() - t0 < 6000);
    for (int i = 0; i < N; i++) {
        cr_assert(calls[i].result == FERRY_EUNAVAIL, "call %d: %s", i,
                  ferry_err_name(calls[i].result));
        rpc_call_fini(&calls[i]);
    }
}

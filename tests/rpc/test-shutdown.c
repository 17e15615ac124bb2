/* tests/rpc — stopping a server with calls in flight. */
#include "harness.h"

#include <string.h>

TestSuite(rpc_shutdown, .init = h_setup, .fini = h_teardown, .timeout = 60);

static void start(rpc_call *call, h_done *d, const char *method)
{
    memset(call, 0, sizeof *call);
    memset(d, 0, sizeof *d);
    call->data = d;
    Ferry__CallRequest req;
    proto_raw req_head;
    rpc_msg_out out;
    h_msg_out(&out, &req, &req_head, "", "", "pay", 3, RPC_CODEC_RAW);
    int rc = rpc_call_start(H.ch, call, method, &out, H_CALL_TIMEOUT_MS, h_done_cb);
    cr_assert(rc == 0, "start: %s", ferry_err_name(rc));
}

H_TEST(rpc_shutdown, shutdown_with_a_blocked_call_in_flight_returns_and_the_call_fails)
{
    rpc_call call;
    h_done d;
    start(&call, &d, H_BLOCK);
    cr_assert(h_run_until_atomic(&HS.block_started, 1, H_WAIT_MS));
    double t0 = h_now_ms();
    rpc_server_shutdown(H.server, 100);
    double took = h_now_ms() - t0;
    cr_assert(took < 5000, "shutdown with grace 100 ms took %.0f ms", took);
    cr_assert(atomic_load(&HS.block_cancelled) == 1,
              "shutdown returned before the handler saw rpc_srv_cancelled");
    cr_assert(h_run_until_flag(&d.done, H_WAIT_MS), "the call never completed");
    cr_assert(call.result != 0, "a call cut off by shutdown succeeded");
    cr_assert(call.errmsg != NULL);
    rpc_call_fini(&call);
}

H_TEST(rpc_shutdown, shutdown_gives_a_call_in_flight_its_grace_to_finish)
{
    rpc_call call;
    h_done d;
    start(&call, &d, H_SLOW);
    cr_assert(h_run_until_atomic(&HS.handled, 1, H_WAIT_MS));
    double t0 = h_now_ms();
    rpc_server_shutdown(H.server, 5000);
    double took = h_now_ms() - t0;
    cr_assert(took < 3000, "shutdown waited %.0f ms for a 50 ms handler", took);
    cr_assert(h_run_until_flag(&d.done, H_WAIT_MS));
    cr_assert(call.result == 0, "result %s: %s", ferry_err_name(call.result),
              call.errmsg);
    cr_assert(call.reply.payload_len == 3);
    rpc_call_fini(&call);
}

H_TEST(rpc_shutdown, calls_after_shutdown_fail_within_their_deadline)
{
    rpc_call call;
    cr_assert(h_call(H.ch, &call, H_ECHO, "", "", NULL, 0, RPC_CODEC_RAW, 5000) == 0);
    rpc_call_fini(&call);
    rpc_server_shutdown(H.server, 0);
    double t0 = h_now_ms();
    int rc = h_call(H.ch, &call, H_ECHO, "", "", NULL, 0, RPC_CODEC_RAW, 3000);
    cr_assert(rc != 0, "a call to a shut-down server succeeded");
    cr_assert(h_now_ms() - t0 < 4000);
    rpc_call_fini(&call);
}

H_TEST(rpc_shutdown, shutdown_is_idempotent_and_quick_when_idle)
{
    double t0 = h_now_ms();
    rpc_server_shutdown(H.server, 1000);
    rpc_server_shutdown(H.server, 1000);
    cr_assert(h_now_ms() - t0 < 1000, "idle shutdown took %.0f ms", h_now_ms() - t0);
    /* h_teardown's rpc_server_destroy runs on the shut-down server. */
}

H_TEST(rpc_shutdown, destroy_with_a_call_in_flight_does_not_hang)
{
    rpc_call call;
    h_done d;
    start(&call, &d, H_BLOCK);
    cr_assert(h_run_until_atomic(&HS.block_started, 1, H_WAIT_MS));
    rpc_server_destroy(H.server);
    H.server = NULL;
    cr_assert(h_run_until_flag(&d.done, H_WAIT_MS));
    cr_assert(call.result != 0);
    rpc_call_fini(&call);
}

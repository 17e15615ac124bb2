/* tests/rpc — cancelling a call, from the call or by destroying its channel. */
#include "harness.h"

#include <string.h>

TestSuite(rpc_cancel, .init = h_setup, .fini = h_teardown, .timeout = 60);

/* Starts a call to the blocking handler and runs the loop until the handler
 * is inside it. */
static void start_blocked(rpc_call *call, h_done *d, rpc_channel *ch)
{
    memset(call, 0, sizeof *call);
    memset(d, 0, sizeof *d);
    call->data = d;
    Ferry__CallRequest req;
    proto_raw head;
    rpc_msg_out out;
    h_msg_out(&out, &req, &head, "", "", NULL, 0, RPC_CODEC_RAW);
    int rc = rpc_call_start(ch, call, H_BLOCK, &out, H_CALL_TIMEOUT_MS, h_done_cb);
    cr_assert(rc == 0, "start: %s", ferry_err_name(rc));
    cr_assert(h_run_until_atomic(&HS.block_started, 1, H_WAIT_MS),
              "the blocking handler never started");
    cr_assert(!d->done, "the blocked call completed early: %s",
              ferry_err_name(call->result));
}

H_TEST(rpc_cancel, cancelled_call_fails_with_ecanceled_and_the_handler_sees_it)
{
    rpc_call call;
    h_done d;
    start_blocked(&call, &d, H.ch);
    double t0 = h_now_ms();
    rpc_call_cancel(&call);
    cr_assert(h_run_until_flag(&d.done, H_WAIT_MS), "cancelled call never completed");
    cr_assert(h_now_ms() - t0 < 2000, "cancel took %.0f ms", h_now_ms() - t0);
    h_run_for(10);
    cr_assert(d.completions == 1, "callback ran %d times", d.completions);
    cr_assert(call.result == FERRY_ECANCELED, "result %s, errmsg %s",
              ferry_err_name(call.result), call.errmsg);
    cr_assert(h_run_until_atomic(&HS.block_cancelled, 1, 5000),
              "the server handler never saw rpc_srv_cancelled");
    rpc_call_fini(&call);
}

H_TEST(rpc_cancel, cancelling_twice_completes_once)
{
    rpc_call call;
    h_done d;
    start_blocked(&call, &d, H.ch);
    rpc_call_cancel(&call);
    rpc_call_cancel(&call);
    cr_assert(h_run_until_flag(&d.done, H_WAIT_MS));
    rpc_call_cancel(&call);
    h_run_for(20);
    cr_assert(d.completions == 1, "callback ran %d times", d.completions);
    cr_assert(call.result == FERRY_ECANCELED);
    rpc_call_fini(&call);
}

H_TEST(rpc_cancel, cancel_right_after_start_completes_once)
{
    rpc_call call = {0};
    h_done d = {0};
    call.data = &d;
    rpc_msg_out out = {0};
    cr_assert(rpc_call_start(H.ch, &call, H_ECHO, &out, H_CALL_TIMEOUT_MS, h_done_cb) ==
              0);
    rpc_call_cancel(&call);
    cr_assert(h_run_until_flag(&d.done, H_WAIT_MS));
    h_run_for(10);
    cr_assert(d.completions == 1);
    /* It may have finished before the cancel reached anything. */
    cr_assert(call.result == FERRY_ECANCELED || call.result == 0, "result %s",
              ferry_err_name(call.result));
    rpc_call_fini(&call);
}

H_TEST(rpc_cancel, destroying_the_channel_cancels_its_calls)
{
    rpc_channel *ch;
    cr_assert(rpc_channel_create(H.client, H.target, NULL, &ch) == 0);
    rpc_call call;
    h_done d;
    start_blocked(&call, &d, ch);
    rpc_channel_destroy(ch);
    cr_assert(h_run_until_flag(&d.done, H_WAIT_MS), "call on a destroyed channel hung");
    h_run_for(10);
    cr_assert(d.completions == 1);
    cr_assert(call.result == FERRY_ECANCELED, "result %s", ferry_err_name(call.result));
    cr_assert(h_run_until_atomic(&HS.block_cancelled, 1, 5000),
              "the server handler never saw rpc_srv_cancelled");
    rpc_call_fini(&call);
}

/* A completion callback may destroy its own channel while other calls on it
 * are still in flight: they complete cancelled, and nothing is used after
 * it is freed (ASan builds check that). */
static int blocked_done;
static void count_cb(rpc_call *call)
{
    (void)call;
    blocked_done++;
}

static void destroy_channel_cb(rpc_call *call)
{
    h_done *d = call->data;
    d->completions++;
    d->done = true;
    rpc_channel_destroy(H.extra[0]);
    H.extra[0] = NULL;
}

H_TEST(rpc_cancel, callback_may_destroy_its_channel_with_calls_in_flight)
{
    enum { N = 8 };
    cr_assert(rpc_channel_create(H.client, H.target, NULL, &H.extra[0]) == 0);
    rpc_call blocked[N];
    rpc_msg_out out = {0};
    blocked_done = 0;
    for (int i = 0; i < N; i++) {
        memset(&blocked[i], 0, sizeof blocked[i]);
        cr_assert(rpc_call_start(H.extra[0], &blocked[i], H_BLOCK, &out,
                                 H_CALL_TIMEOUT_MS, count_cb) == 0);
    }
    cr_assert(h_run_until_atomic(&HS.block_started, N < 4 ? N : 4, H_WAIT_MS));
    rpc_call last = {0};
    h_done d = {0};
    last.data = &d;
    cr_assert(rpc_call_start(H.extra[0], &last, H_ECHO, &out, H_CALL_TIMEOUT_MS,
                             destroy_channel_cb) == 0);
    cr_assert(h_run_until_flag(&d.done, H_WAIT_MS));
    cr_assert(last.result == 0, "%s", ferry_err_name(last.result));
    cr_assert(h_run_until_count(&blocked_done, N, H_WAIT_MS), "%d of %d calls completed",
              blocked_done, N);
    for (int i = 0; i < N; i++) {
        cr_assert(blocked[i].result == FERRY_ECANCELED, "call %d: %s", i,
                  ferry_err_name(blocked[i].result));
        rpc_call_fini(&blocked[i]);
    }
    rpc_call_fini(&last);
}

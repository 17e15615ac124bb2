/* tests/rpc — calls as futures: rpc_call_wait and rpc_call_wait_all. */
#include "harness.h"

#include <string.h>

TestSuite(rpc_future, .init = h_setup, .fini = h_teardown, .timeout = 60);

static void start_future(rpc_call *call, const char *method, const char *function)
{
    Ferry__CallRequest req;
    proto_raw head;
    rpc_msg_out out;
    h_msg_out(&out, &req, &head, "fut", function, function, strlen(function),
              RPC_CODEC_RAW);
    memset(call, 0, sizeof *call);
    int rc = rpc_call_start(H.ch, call, method, &out, H_CALL_TIMEOUT_MS, NULL);
    cr_assert(rc == 0, "start %s: %s", method, ferry_err_name(rc));
}

H_TEST(rpc_future, wait_returns_the_result_of_a_future)
{
    rpc_call call;
    start_future(&call, H_SLOW, "hello");
    int rc = rpc_call_wait(&call);
    cr_assert(rc == 0, "wait: %s: %s", ferry_err_name(rc), call.errmsg);
    cr_assert(call.result == 0);
    cr_assert(call.reply.payload_len == 5 && memcmp(call.reply.payload, "hello", 5) == 0);
    /* Waiting again on a completed call returns at once with the same result. */
    cr_assert(rpc_call_wait(&call) == 0);
    rpc_call_fini(&call);
}

H_TEST(rpc_future, wait_returns_the_error_of_a_failed_future)
{
    rpc_call call;
    start_future(&call, H_FAIL, "gone.so");
    int rc = rpc_call_wait(&call);
    cr_assert(rc == FERRY_ENOENT, "wait: %s", ferry_err_name(rc));
    cr_assert(call.errmsg && strstr(call.errmsg, "no module gone.so"), "errmsg %s",
              call.errmsg);
    rpc_call_fini(&call);
}

H_TEST(rpc_future, wait_all_returns_zero_when_all_succeed)
{
    enum { N = 20 };
    rpc_call calls[N];
    rpc_call *ptrs[N];
    for (int i = 0; i < N; i++) {
        start_future(&calls[i], i % 2 ? H_SLOW : H_ECHO, "ok");
        ptrs[i] = &calls[i];
    }
    cr_assert(rpc_call_wait_all(ptrs, N) == 0);
    for (int i = 0; i < N; i++) {
        cr_assert(calls[i].result == 0);
        rpc_call_fini(&calls[i]);
    }
}

H_TEST(rpc_future, wait_all_returns_the_first_error_in_array_order)
{
    /* The EINVAL failure comes 50 ms after the ENOTSUP one, but is earlier in
     * the array: wait_all must return it, and only after every call ended. */
    rpc_call ok, slow_fail, fast_fail, ok2;
    start_future(&ok, H_ECHO, "fine");
    start_future(&slow_fail, H_SLOW, "fail");
    start_future(&fast_fail, "/test.Echo/Missing", "x");
    start_future(&ok2, H_SLOW, "fine");
    rpc_call *ptrs[] = {&ok, &slow_fail, &fast_fail, &ok2};
    int rc = rpc_call_wait_all(ptrs, 4);
    cr_assert(rc == FERRY_EINVAL, "wait_all returned %s", ferry_err_name(rc));
    cr_assert(ok.result == 0);
    cr_assert(slow_fail.result == FERRY_EINVAL);
    cr_assert(fast_fail.result == FERRY_ENOTSUP, "fast_fail: %s",
              ferry_err_name(fast_fail.result));
    cr_assert(ok2.result == 0, "the last call had not completed: %s",
              ferry_err_name(ok2.result));
    cr_assert(ok2.reply.payload_len == 4);
    for (size_t i = 0; i < 4; i++)
        rpc_call_fini(ptrs[i]);
}

H_TEST(rpc_future, wait_all_of_nothing_returns_zero)
{
    cr_assert(rpc_call_wait_all(NULL, 0) == 0);
}

static rpc_call inner;
static int inner_wait_rc;
static bool outer_done;

static void outer_cb(rpc_call *call)
{
    (void)call;
    inner_wait_rc = rpc_call_wait(&inner);
    outer_done = true;
}

H_TEST(rpc_future, wait_inside_a_callback_returns_edeadlk)
{
    start_future(&inner, H_SLOW, "inner");
    rpc_call outer = {0};
    rpc_msg_out out = {0};
    outer_done = false;
    inner_wait_rc = 1;
    cr_assert(rpc_call_start(H.ch, &outer, H_ECHO, &out, H_CALL_TIMEOUT_MS, outer_cb) ==
              0);
    cr_assert(h_run_until_flag(&outer_done, H_WAIT_MS));
    cr_assert(inner_wait_rc == FERRY_EDEADLK, "wait in a callback returned %s",
              ferry_err_name(inner_wait_rc));
    /* The inner call still completes normally afterwards. */
    cr_assert(rpc_call_wait(&inner) == 0);
    rpc_call_fini(&outer);
    rpc_call_fini(&inner);
}

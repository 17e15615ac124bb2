/* tests/runtime — Call: results, errors that reach the caller, the context a
 * function sees, concurrency with Ping, cancellation and the counters. */
#include "rth.h"

#include "ferry.pb-c.h"
#include "proto/raw.h"

#include <string.h>

TestSuite(rt_call, .init = rth_setup, .fini = rth_teardown, .timeout = 60);

RTH_TEST(rt_call, echo_returns_its_argument)
{
    char sha[RT_SHA256_HEX], err[1024], *out = NULL;
    rth_load_faulty(sha);
    int rc = rth_invoke(R.ch, sha, "echo", "hello, worker", &out, err, sizeof err);
    cr_assert(rc == 0, "%s: %s", ferry_err_name(rc), err);
    cr_assert_str_eq(out, "hello, worker");
    free(out);
    rc = rth_invoke(R.ch, sha, "echo", NULL, &out, err, sizeof err);
    cr_assert(rc == 0, "empty argument: %s", err);
    cr_assert(out == NULL, "empty echo returned '%s'", out);
}

RTH_TEST(rt_call, a_large_binary_argument_comes_back_intact)
{
    char sha[RT_SHA256_HEX];
    rth_load_faulty(sha);
    size_t len = (4u << 20) + 123;
    unsigned char *buf = malloc(len);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (unsigned char)x;
    }
    Ferry__CallRequest req = FERRY__CALL_REQUEST__INIT;
    req.sha256 = sha;
    req.function = "echo";
    rpc_call c;
    int rc = rth_call(R.ch, &c, PROTO_METHOD_CALL, &req.base, buf, len);
    cr_assert(rc == 0, "%s: %s", ferry_err_name(rc), c.errmsg);
    cr_assert(c.reply.payload_len == len, "%zu bytes back", c.reply.payload_len);
    cr_assert(memcmp(c.reply.payload, buf, len) == 0, "bytes differ");
    rpc_call_fini(&c);
    free(buf);
}

RTH_TEST(rt_call, the_function_sees_rank_world_size_task_and_name)
{
    char sha[RT_SHA256_HEX], err[1024], *out = NULL;
    rth_load_faulty(sha);
    int rc = rth_invoke(R.ch, sha, "info", NULL, &out, err, sizeof err);
    cr_assert(rc == 0, "%s", err);
    cr_assert_str_eq(out, "rank 2 of 4 task faulty function info");
    free(out);
}

RTH_TEST(rt_call, an_unknown_function_lists_the_ones_there_are)
{
    char sha[RT_SHA256_HEX], err[1024];
    rth_load_faulty(sha);
    int rc = rth_invoke(R.ch, sha, "nope", NULL, NULL, err, sizeof err);
    cr_assert(rc == FERRY_ENOENT, "%s: %s", ferry_err_name(rc), err);
    cr_assert(strstr(err, "module faulty.so has no function 'nope' (it has: fail, segv, "
                          "abort, echo, sleep, info, overflow, nap)"),
              "%s", err);
}

RTH_TEST(rt_call, a_module_never_loaded_is_named)
{
    char err[1024];
    const char *sha = "00000000000000000000000000000000000000000000000000000000000000aa";
    int rc = rth_invoke(R.ch, sha, "echo", NULL, NULL, err, sizeof err);
    cr_assert(rc == FERRY_ENOENT, "%s: %s", ferry_err_name(rc), err);
    cr_assert(strstr(err, "module 0000"), "%s", err);
    cr_assert(strstr(err, "not loaded"), "%s", err);
}

RTH_TEST(rt_call, the_text_of_a_failing_function_reaches_the_caller)
{
    char sha[RT_SHA256_HEX], err[1024];
    rth_load_faulty(sha);
    int rc = rth_invoke(R.ch, sha, "fail", "x=-1", NULL, err, sizeof err);
    cr_assert(rc == FERRY_EINVAL, "%s: %s", ferry_err_name(rc), err);
    cr_assert(strstr(err, "worker 2 module faulty.so function fail: bad input: x=-1"),
              "%s", err);
    /* The call after it is served as usual. */
    char *out = NULL;
    rc = rth_invoke(R.ch, sha, "echo", "next", &out, err, sizeof err);
    cr_assert(rc == 0, "%s", err);
    cr_assert_str_eq(out, "next");
    free(out);
}

RTH_TEST(rt_call, a_function_logs_a_line_naming_itself)
{
    char sha[RT_SHA256_HEX], err[1024], *out = NULL;
    rth_load_faulty(sha);
    rth_capture_start();
    int rc = rth_invoke(R.ch, sha, "echo", "12345", &out, err, sizeof err);
    char *log = rth_capture_end();
    cr_assert(rc == 0, "%s", err);
    free(out);
    cr_assert(strstr(log, "worker 2 faulty.so echo: info: echoed 5 bytes\n"), "log: %s",
              log);
    free(log);
}

static bool in_flight_is(const proto_stats_reply *s, const void *arg)
{
    return s->in_flight == *(const unsigned *)arg;
}

RTH_TEST(rt_call, ping_answers_while_four_long_calls_run)
{
    char sha[RT_SHA256_HEX];
    rth_load_faulty(sha);
    enum { N = 4 };
    rpc_call calls[N];
    Ferry__CallRequest req = FERRY__CALL_REQUEST__INIT;
    req.sha256 = sha;
    req.function = "sleep";
    const char *arg = "600000"; /* ten minutes: they end by cancellation only */
    proto_raw out_head = proto_raw_pack(&req.base);
    rpc_msg_out out = {.head_bytes = out_head.data,
                       .head_len = out_head.len,
                       .payload = arg,
                       .payload_len = strlen(arg)};
    for (int i = 0; i < N; i++) {
        memset(&calls[i], 0, sizeof calls[i]);
        cr_assert(rpc_call_start(R.ch, &calls[i], PROTO_METHOD_CALL, &out,
                                 RTH_CALL_TIMEOUT * 10, NULL) == 0);
    }
    unsigned four = N, zero = 0;
    cr_assert(rth_stats_until(in_flight_is, &four), "the sleeps never all ran");

    proto_ping_reply *p = NULL;
    cr_assert(rth_ping(R.ch, &p) == 0, "Ping did not answer while calls ran");
    proto_free(p);
    for (int i = 0; i < N; i++)
        cr_assert(!calls[i].done, "sleep %d ended early: %s", i, calls[i].errmsg);
    char err[1024], *echoed = NULL;
    cr_assert(rth_invoke(R.ch, sha, "echo", "beside", &echoed, err, sizeof err) == 0,
              "a short call did not run beside the long ones: %s", err);
    free(echoed);

    for (int i = 0; i < N; i++)
        rpc_call_cancel(&calls[i]);
    for (int i = 0; i < N; i++) {
        int rc = rpc_call_wait(&calls[i]);
        cr_assert(rc == FERRY_ECANCELED, "sleep %d: %s", i, ferry_err_name(rc));
        rpc_call_fini(&calls[i]);
    }
    /* The functions saw the cancellation and returned: nothing is left
     * running on the worker. */
    cr_assert(rth_stats_until(in_flight_is, &zero), "the cancelled sleeps kept running");
    proto_stats_reply *s = rth_stats(R.ch);
    cr_assert(s->calls_failed == N, "%llu failed", (unsigned long long)s->calls_failed);
    cr_assert(s->calls_served == N + 1, "%llu served",
              (unsigned long long)s->calls_served);
    proto_free(s);
}

RTH_TEST(rt_call, a_deadline_cancels_a_long_call_on_the_worker)
{
    char sha[RT_SHA256_HEX];
    rth_load_faulty(sha);
    Ferry__CallRequest req = FERRY__CALL_REQUEST__INIT;
    req.sha256 = sha;
    req.function = "sleep";
    proto_raw out_head = proto_raw_pack(&req.base);
    rpc_msg_out out = {.head_bytes = out_head.data,
                       .head_len = out_head.len,
                       .payload = "600000",
                       .payload_len = 6};
    rpc_call c = {0};
    cr_assert(rpc_call_start(R.ch, &c, PROTO_METHOD_CALL, &out, 200, NULL) == 0);
    int rc = rpc_call_wait(&c);
    cr_assert(rc == FERRY_ETIMEDOUT, "%s", ferry_err_name(rc));
    rpc_call_fini(&c);
    unsigned zero = 0;
    cr_assert(rth_stats_until(in_flight_is, &zero), "the sleep outlived its deadline");
}

RTH_TEST(rt_call, stats_count_calls_served_failed_and_modules)
{
    char sha[RT_SHA256_HEX], err[1024];
    proto_stats_reply *s = rth_stats(R.ch);
    cr_assert(s->calls_served == 0 && s->calls_failed == 0 && s->in_flight == 0);
    cr_assert(s->modules_loaded == 0);
    cr_assert(s->uptime_s >= 0);
    cr_assert_str_eq(s->last_crash, "");
    proto_free(s);

    rth_load_faulty(sha);
    for (int i = 0; i < 3; i++)
        cr_assert(rth_invoke(R.ch, sha, "echo", "x", NULL, err, sizeof err) == 0);
    cr_assert(rth_invoke(R.ch, sha, "fail", "y", NULL, err, sizeof err) == FERRY_EINVAL);
    cr_assert(rth_invoke(R.ch, sha, "nope", NULL, NULL, err, sizeof err) == FERRY_ENOENT);
    cr_assert(rth_invoke(R.ch, sha, "sleep", "ten", NULL, err, sizeof err) ==
              FERRY_EINVAL);
    cr_assert(strstr(err, "expected milliseconds, got 'ten'"), "%s", err);
    /* Refused for the token: never served. */
    cr_assert(rth_invoke(R.ch_none, sha, "echo", "x", NULL, err, sizeof err) ==
              FERRY_EUNAUTH);

    s = rth_stats(R.ch);
    cr_assert(s->calls_served == 6, "%llu served", (unsigned long long)s->calls_served);
    cr_assert(s->calls_failed == 3, "%llu failed", (unsigned long long)s->calls_failed);
    cr_assert(s->in_flight == 0, "%u in flight", s->in_flight);
    cr_assert(s->modules_loaded == 1, "%u modules", s->modules_loaded);
    proto_free(s);
}

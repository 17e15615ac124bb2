/* proxyworker: each stub against a real in-process worker, on a loop of the
 * test's own. */
#include <string.h>
#include <unistd.h>

#include "harness.h"

TC_TEST(proxyworker, ping_echoes_the_nonce_and_names_the_process)
{
    tc_workers(1);
    tc_pw t;
    tc_pw_open(&t, TC_TOKEN, 0);
    cr_assert_str_eq(pw_target(t.p), T.target[0]);
    cr_assert_eq(pw_rank(t.p), 0);
    rpc_call call = {0};
    cr_assert(pw_ping(t.p, &call, 0xfeedbeefULL, TC_WAIT_MS, NULL) == 0);
    cr_assert(rpc_call_wait(&call) == 0, "%s", call.errmsg);
    proto_ping_reply *rep;
    cr_assert(pw_ping_result(&call, &rep) == 0);
    cr_assert_eq(rep->nonce, 0xfeedbeefULL);
    cr_assert_eq(rep->pid, getpid());
    cr_assert_eq(rep->rank, 0);
    cr_assert(rep->device && strncmp(rep->device, "cpu", 3) == 0, "device '%s'",
              rep->device);
    proto_free(rep);
    rpc_call_fini(&call);
    tc_pw_close(&t);
}

TC_TEST(proxyworker, ping_needs_no_token)
{
    tc_workers(1);
    tc_pw t;
    tc_pw_open(&t, NULL, 0);
    rpc_call call = {0};
    cr_assert(pw_ping(t.p, &call, 1, TC_WAIT_MS, NULL) == 0);
    cr_assert(rpc_call_wait(&call) == 0, "%s", call.errmsg);
    rpc_call_fini(&call);
    tc_pw_close(&t);
}

TC_TEST(proxyworker, load_asks_first_then_ships_then_finds_it_cached)
{
    tc_workers(1);
    tc_read_module("faulty.so");
    char sha[RT_SHA256_HEX];
    rt_sha256_hex(T.bytes, T.len, sha);
    tc_pw t;
    tc_pw_open(&t, TC_TOKEN, 0);

    rpc_call ask = {0}, ship = {0}, again = {0};
    cr_assert(pw_load_module(t.p, &ask, sha, "faulty.so", NULL, 0, TC_WAIT_MS, NULL) ==
              0);
    cr_assert_eq(rpc_call_wait(&ask), FERRY_ENOENT, "asking: %s", ask.errmsg);

    cr_assert(pw_load_module(t.p, &ship, sha, "faulty.so", T.bytes, T.len, TC_WAIT_MS,
                             NULL) == 0);
    cr_assert(rpc_call_wait(&ship) == 0, "shipping: %s", ship.errmsg);
    proto_load_module_reply *rep;
    cr_assert(pw_load_module_result(&ship, &rep) == 0);
    cr_assert_str_eq(rep->task_name, "faulty");
    cr_assert_not(rep->cached);
    bool echo = false;
    for (size_t i = 0; i < rep->n_functions; i++)
        echo |= strcmp(rep->functions[i], "echo") == 0;
    cr_assert(echo, "echo is not among the %zu functions", rep->n_functions);
    proto_free(rep);

    cr_assert(pw_load_module(t.p, &again, sha, "faulty.so", NULL, 0, TC_WAIT_MS, NULL) ==
              0);
    cr_assert(rpc_call_wait(&again) == 0, "asking again: %s", again.errmsg);
    cr_assert(pw_load_module_result(&again, &rep) == 0);
    cr_assert(rep->cached);
    proto_free(rep);

    rpc_call_fini(&ask);
    rpc_call_fini(&ship);
    rpc_call_fini(&again);
    tc_pw_close(&t);
}

static void load(tc_pw *t, char sha[RT_SHA256_HEX])
{
    tc_read_module("faulty.so");
    rt_sha256_hex(T.bytes, T.len, sha);
    rpc_call c = {0};
    cr_assert(pw_load_module(t->p, &c, sha, "faulty.so", T.bytes, T.len, TC_WAIT_MS,
                             NULL) == 0);
    cr_assert(rpc_call_wait(&c) == 0, "%s", c.errmsg);
    rpc_call_fini(&c);
}

TC_TEST(proxyworker, call_carries_arguments_rank_and_world_size)
{
    tc_workers(1);
    tc_pw t;
    tc_pw_open(&t, TC_TOKEN, 3);
    char sha[RT_SHA256_HEX];
    load(&t, sha);

    rpc_call echo = {0}, info = {0};
    cr_assert(pw_call(t.p, &echo, sha, "echo", 5, "payload", 7, TC_WAIT_MS, NULL) == 0);
    cr_assert(pw_call(t.p, &info, sha, "info", 5, NULL, 0, TC_WAIT_MS, NULL) == 0);
    rpc_call *both[] = {&echo, &info};
    cr_assert(rpc_call_wait_all(both, 2) == 0, "%s / %s", echo.errmsg, info.errmsg);

    ferry_bytes_t out;
    pw_call_result(&echo, &out.data, &out.len);
    tc_assert_bytes(&out, "payload");
    rpc_buf_free(out.data);
    pw_call_result(&echo, &out.data, &out.len); /* taken: nothing left */
    cr_assert(out.data == NULL && out.len == 0);

    pw_call_result(&info, &out.data, &out.len);
    tc_assert_bytes(&out, "rank 3 of 5 task faulty function info");
    rpc_buf_free(out.data);
    rpc_call_fini(&echo);
    rpc_call_fini(&info);
    tc_pw_close(&t);
}

TC_TEST(proxyworker, an_empty_result_is_null)
{
    tc_workers(1);
    tc_pw t;
    tc_pw_open(&t, TC_TOKEN, 0);
    char sha[RT_SHA256_HEX];
    load(&t, sha);
    rpc_call c = {0};
    cr_assert(pw_call(t.p, &c, sha, "sleep", 1, "0", 1, TC_WAIT_MS, NULL) == 0);
    cr_assert(rpc_call_wait(&c) == 0, "%s", c.errmsg);
    void *data = (void *)1;
    size_t len = 1;
    pw_call_result(&c, &data, &len);
    cr_assert(data == NULL && len == 0);
    rpc_call_fini(&c);
    tc_pw_close(&t);
}

TC_TEST(proxyworker, stats_count_the_calls_served)
{
    tc_workers(1);
    tc_pw t;
    tc_pw_open(&t, TC_TOKEN, 0);
    char sha[RT_SHA256_HEX];
    load(&t, sha);
    rpc_call c = {0};
    cr_assert(pw_call(t.p, &c, sha, "fail", 1, "x", 1, TC_WAIT_MS, NULL) == 0);
    cr_assert_eq(rpc_call_wait(&c), FERRY_EINVAL);
    cr_assert(strstr(c.errmsg, "bad input: x"), "%s", c.errmsg);
    rpc_call_fini(&c);

    cr_assert(pw_stats(t.p, &c, TC_WAIT_MS, NULL) == 0);
    cr_assert(rpc_call_wait(&c) == 0, "%s", c.errmsg);
    proto_stats_reply *st;
    cr_assert(pw_stats_result(&c, &st) == 0);
    cr_assert_eq(st->calls_served, 1);
    cr_assert_eq(st->calls_failed, 1);
    cr_assert_eq(st->modules_loaded, 1);
    proto_free(st);
    rpc_call_fini(&c);
    tc_pw_close(&t);
}

TC_TEST(proxyworker, shutdown_stops_the_worker)
{
    tc_workers(1);
    tc_pw t;
    tc_pw_open(&t, TC_TOKEN, 0);
    rpc_call c = {0};
    cr_assert(pw_shutdown(t.p, &c, 100, TC_WAIT_MS, NULL) == 0);
    cr_assert(rpc_call_wait(&c) == 0, "%s", c.errmsg);
    rpc_call_fini(&c);
    rt_worker_wait(T.w[0]); /* returns: the Shutdown arrived */
    tc_pw_close(&t);
}

TC_TEST(proxyworker, a_wrong_token_is_refused)
{
    tc_workers(1);
    tc_pw t;
    tc_pw_open(&t, "not-the-token", 0);
    rpc_call c = {0};
    cr_assert(pw_stats(t.p, &c, TC_WAIT_MS, NULL) == 0);
    cr_assert_eq(rpc_call_wait(&c), FERRY_EUNAUTH, "%s", c.errmsg);
    cr_assert(strstr(c.errmsg, "token"), "%s", c.errmsg);
    rpc_call_fini(&c);
    tc_pw_close(&t);
}

TC_TEST(proxyworker, bad_arguments_do_not_start)
{
    tc_workers(1);
    tc_pw t;
    tc_pw_open(&t, TC_TOKEN, 0);
    pw *p = NULL;
    pw_opts none = {.target = NULL};
    cr_assert_eq(pw_create(t.client, &none, &p), FERRY_EINVAL);
    rpc_call c = {0};
    cr_assert_eq(pw_call(t.p, &c, NULL, "echo", 1, NULL, 0, 0, NULL), FERRY_EINVAL);
    cr_assert_eq(pw_call(t.p, &c, "abc", "echo", 1, NULL, 5, 0, NULL), FERRY_EINVAL);
    cr_assert_eq(pw_load_module(t.p, &c, "abc", "x", NULL, 3, 0, NULL), FERRY_EINVAL);
    cr_assert_eq(pw_ping(NULL, &c, 0, 0, NULL), FERRY_EINVAL);
    pw_destroy(NULL);
    tc_pw_close(&t);
}

TC_TEST(proxyworker, destroy_cancels_what_is_in_flight)
{
    tc_workers(1);
    tc_pw t;
    tc_pw_open(&t, TC_TOKEN, 0);
    char sha[RT_SHA256_HEX];
    load(&t, sha);
    rpc_call c = {0};
    cr_assert(pw_call(t.p, &c, sha, "sleep", 1, "5000", 4, TC_WAIT_MS, NULL) == 0);
    pw_destroy(t.p);
    t.p = NULL;
    int rc = rpc_call_wait(&c);
    cr_assert_eq(rc, FERRY_ECANCELED, "%s", c.errmsg);
    rpc_call_fini(&c);
    tc_pw_close(&t);
}

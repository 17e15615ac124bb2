/* tests/runtime — the worker's life: Shutdown and rt_worker_stop end
 * rt_worker_wait; a Shutdown's grace cancels what still runs. */
#include "rth.h"

#include "ferry.pb-c.h"
#include "proto/raw.h"

#include <pthread.h>
#include <string.h>

TestSuite(rt_worker, .init = rth_setup, .fini = rth_teardown, .timeout = 60);

RTH_TEST(rt_worker, shutdown_makes_wait_return)
{
    Ferry__ShutdownRequest req = FERRY__SHUTDOWN_REQUEST__INIT;
    req.grace_ms = 1000;
    rpc_call c;
    int rc = rth_call(R.ch, &c, PROTO_METHOD_SHUTDOWN, &req.base, NULL, 0);
    cr_assert(rc == 0, "Shutdown: %s: %s", ferry_err_name(rc), c.errmsg);
    rpc_call_fini(&c);
    rt_worker_wait(R.worker); /* a hang here fails the test by its timeout */
    rt_worker_wait(R.worker); /* and again: it stays stopped */
}

static void *stop_later(void *arg)
{
    rt_worker_stop(arg);
    rt_worker_stop(arg);
    return NULL;
}

RTH_TEST(rt_worker, stop_from_another_thread_makes_wait_return)
{
    pthread_t t;
    cr_assert(pthread_create(&t, NULL, stop_later, R.worker) == 0);
    rt_worker_wait(R.worker);
    pthread_join(t, NULL);
    /* Stopping is no shutdown: the server still answers until destroyed. */
    cr_assert(rth_ping(R.ch, NULL) == 0);
}

static bool one_in_flight(const proto_stats_reply *s, const void *arg)
{
    (void)arg;
    return s->in_flight == 1;
}

RTH_TEST(rt_worker, the_shutdown_grace_cancels_a_call_that_runs_on)
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
    rpc_call sleeper = {0};
    cr_assert(rpc_call_start(R.ch, &sleeper, PROTO_METHOD_CALL, &out, 0, NULL) == 0);
    cr_assert(rth_stats_until(one_in_flight, NULL), "the sleep never ran");

    Ferry__ShutdownRequest sreq = FERRY__SHUTDOWN_REQUEST__INIT;
    sreq.grace_ms = 50;
    rpc_call c;
    cr_assert(rth_call(R.ch, &c, PROTO_METHOD_SHUTDOWN, &sreq.base, NULL, 0) == 0);
    rpc_call_fini(&c);
    rt_worker_wait(R.worker);
    /* The Shutdown's 50 ms win over the hour given here: the sleep is
     * cancelled, sees it and ends; otherwise this blocks past the timeout. */
    rt_worker_destroy(R.worker, 3600 * 1000);
    R.worker = NULL;
    int rc = rpc_call_wait(&sleeper);
    cr_assert(rc != 0, "the sleep finished normally");
    rpc_call_fini(&sleeper);
}

RTH_TEST(rt_worker, ping_reports_rank_restarts_and_the_last_crash)
{
    rth_disconnect();
    rt_worker_destroy(R.worker, 0);
    R.worker = NULL;
    char path[512];
    snprintf(path, sizeof path, "%s/crash", R.state);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("1700000000123456789 module boom.so function bang: signal 11 (SIGSEGV)\n", f);
    fclose(f);

    rt_worker_opts o = {.rank = 7, .restarts = 3};
    rth_start_worker(&o);
    proto_ping_reply *p = NULL;
    cr_assert(rth_ping(R.ch_none, &p) == 0);
    cr_assert(p->rank == 7);
    cr_assert(p->restarts == 3);
    cr_assert_str_eq(p->last_crash, "module boom.so function bang: signal 11 (SIGSEGV)");
    cr_assert(p->crash_id == 1700000000123456789ull);
    proto_free(p);
    proto_stats_reply *s = rth_stats(R.ch);
    cr_assert(s->restarts == 3);
    cr_assert_str_eq(s->last_crash, "module boom.so function bang: signal 11 (SIGSEGV)");
    proto_free(s);
}

RTH_TEST(rt_worker, a_taken_port_is_reported_as_in_use)
{
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", R.port);
    char other[300];
    snprintf(other, sizeof other, "%s/other", R.dir);
    rt_worker_opts o = {.listen = listen, .state_dir = other, .token = RTH_TOKEN};
    rt_worker *w = NULL;
    int rc = rt_worker_create(&o, &w);
    cr_assert(rc == FERRY_EADDRINUSE, "%s", ferry_err_name(rc));
    cr_assert(w == NULL);
}

static bool two_in_flight(const proto_stats_reply *s, const void *arg)
{
    (void)arg;
    return s->in_flight == 2;
}

/* Stats and Shutdown must not queue behind Calls that hold every executor
 * thread (rth forces 8 threads, so this test asks for 2). */
RTH_TEST(rt_worker, stats_and_shutdown_answer_while_calls_hold_every_executor_thread)
{
    rth_disconnect();
    rt_worker_destroy(R.worker, 0);
    R.worker = NULL;
    rt_worker_opts o = {.threads = 2};
    rth_start_worker(&o);

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
    rpc_call sleepers[2] = {0};
    for (int i = 0; i < 2; i++)
        cr_assert(rpc_call_start(R.ch, &sleepers[i], PROTO_METHOD_CALL, &out, 0, NULL) ==
                  0);
    /* Queued behind the sleeps, each Stats would run out its deadline and
     * fail the test inside rth_stats. */
    cr_assert(rth_stats_until(two_in_flight, NULL), "the sleeps never both ran");

    Ferry__ShutdownRequest sreq = FERRY__SHUTDOWN_REQUEST__INIT;
    sreq.grace_ms = 50;
    rpc_call c;
    int rc = rth_call(R.ch, &c, PROTO_METHOD_SHUTDOWN, &sreq.base, NULL, 0);
    cr_assert(rc == 0, "Shutdown: %s: %s", ferry_err_name(rc), c.errmsg);
    rpc_call_fini(&c);
    rt_worker_wait(R.worker);
    rt_worker_destroy(R.worker, 3600 * 1000);
    R.worker = NULL;
    for (int i = 0; i < 2; i++) {
        rc = rpc_call_wait(&sleepers[i]);
        cr_assert(rc != 0, "sleep %d finished normally", i);
        rpc_call_fini(&sleepers[i]);
    }
}

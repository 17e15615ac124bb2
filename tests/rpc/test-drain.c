/* tests/rpc — a server's shutdown drains first: for its grace it refuses the
 * methods that start new work but still serves the others, so that a
 * caller's pings see it alive while the calls it waits for finish. */
#include "harness.h"

#include <string.h>

TestSuite(rpc_drain, .init = h_setup_bare, .fini = h_teardown, .timeout = 60);

#define GRACE_MS 1500

/* The harness's methods, with the pool's echo flagged as new work. */
static void start_server(void)
{
    const rpc_method *tmpl;
    size_t n = h_methods(&tmpl);
    static rpc_method m[16];
    cr_assert(n <= sizeof m / sizeof m[0]);
    memcpy(m, tmpl, n * sizeof *m);
    for (size_t i = 0; i < n; i++)
        if (strcmp(m[i].name, H_ECHO_POOL) == 0)
            m[i].flags |= RPC_METHOD_NEW_WORK;
    rpc_server_opts o = {.listen = "127.0.0.1:0"};
    cr_assert_eq(rpc_server_create(&o, m, n, &H.server), 0);
    H.port = rpc_server_port(H.server);
    snprintf(H.target, sizeof H.target, "127.0.0.1:%d", H.port);
    h_channel_open(NULL);
}

typedef struct stopper {
    uv_thread_t thread;
    double took_ms;
} stopper;

static void stop(void *arg)
{
    stopper *s = arg;
    double t0 = h_now_ms();
    rpc_server_shutdown(H.server, GRACE_MS);
    s->took_ms = h_now_ms() - t0;
}

H_TEST(rpc_drain, during_the_grace_new_work_is_refused_and_the_rest_served)
{
    start_server();
    rpc_call held, call;
    h_done d = {0};
    memset(&held, 0, sizeof held);
    held.data = &d;
    Ferry__CallRequest req;
    proto_raw head;
    rpc_msg_out out;
    h_msg_out(&out, &req, &head, "", "", "pay", 3, RPC_CODEC_RAW);
    cr_assert_eq(rpc_call_start(H.ch, &held, H_BLOCK, &out, H_CALL_TIMEOUT_MS, h_done_cb), 0);
    cr_assert(h_run_until_atomic(&HS.block_started, 1, H_WAIT_MS));

    stopper s = {0};
    cr_assert_eq(uv_thread_create(&s.thread, stop, &s), 0);
    h_run_for(200);
    /* Served: an inline method, as a heartbeat's ping is. */
    int rc = h_call(H.ch, &call, H_ECHO, "", "", "x", 1, RPC_CODEC_RAW, 5000);
    cr_assert_eq(rc, 0, "echo while draining: %s: %s", ferry_err_name(rc), call.errmsg);
    rpc_call_fini(&call);
    /* Refused at once: new work. */
    rc = h_call(H.ch, &call, H_ECHO_POOL, "", "", "x", 1, RPC_CODEC_RAW, 5000);
    cr_assert_eq(rc, FERRY_EUNAVAIL, "new work while draining: %s", ferry_err_name(rc));
    cr_assert(call.errmsg && strstr(call.errmsg, "the server is shutting down"), "%s",
              call.errmsg ? call.errmsg : "(no text)");
    rpc_call_fini(&call);
    cr_assert_eq(atomic_load(&HS.block_cancelled), 0, "the held call was cut short");

    /* The held call never ends on its own: the grace runs out, then it is
     * cancelled. */
    cr_assert(h_run_until_flag(&d.done, H_WAIT_MS), "the held call never completed");
    uv_thread_join(&s.thread);
    cr_assert(s.took_ms >= GRACE_MS - 50, "shutdown returned after %.0f ms", s.took_ms);
    cr_assert_eq(atomic_load(&HS.block_cancelled), 1);
    cr_assert(held.result != 0);
    rpc_call_fini(&held);
}

H_TEST(rpc_drain, an_idle_pool_ends_the_drain_at_once)
{
    start_server();
    double t0 = h_now_ms();
    rpc_server_shutdown(H.server, 5000);
    cr_assert(h_now_ms() - t0 < 2500, "an idle server drained for %.0f ms", h_now_ms() - t0);
}

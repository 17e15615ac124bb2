/* tests/cluster — a master's request payload is copied when the request
 * starts: the caller may overwrite and free it at once, whether the worker
 * answers or is killed while the bytes are on their way (a sanitizer build
 * reports any later read of them). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "tchild.h"

#define BIG ((size_t)8 << 20) /* far above a write of gRPC's */

/* Bytes that do not compress (xorshift), so that the request goes raw:
 * compressed, it would be a copy whatever the rule. */
static void fill(uint8_t *b, size_t len, uint8_t seed)
{
    uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1u);
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b[i] = (uint8_t)x;
    }
}

/* Starts an echo of BIG bytes, then overwrites and frees them. */
static void echo_start(tc_pw *t, rpc_call *call, uint8_t seed)
{
    uint8_t *arg = malloc(BIG);
    cr_assert(arg);
    fill(arg, BIG, seed);
    memset(call, 0, sizeof *call);
    int rc = pw_call(t->p, call, T.mod.sha256, "echo", 1, arg, BIG, TC_WAIT_MS, NULL);
    cr_assert(rc == 0, "pw_call: %s", ferry_strerror(rc));
    memset(arg, 0xee, BIG);
    free(arg);
}

TC_TEST(cluster_kill, a_call_argument_may_be_freed_as_soon_as_the_call_starts)
{
    tc_workers(1);
    tc_cluster(0, 0, 0);
    tc_load_faulty();
    tc_pw t;
    tc_pw_open(&t, TC_TOKEN, 0);
    rpc_call call;
    echo_start(&t, &call, 7);
    cr_assert(rpc_call_wait(&call) == 0, "%s", call.errmsg);
    void *out;
    size_t len;
    pw_call_result(&call, &out, &len);
    uint8_t *want = malloc(BIG);
    cr_assert(want);
    fill(want, BIG, 7);
    cr_assert(len == BIG && memcmp(out, want, BIG) == 0,
              "the worker echoed %zu bytes that are not the argument as it was at the "
              "start",
              len);
    free(want);
    rpc_buf_free(out);
    rpc_call_fini(&call);
    tc_pw_close(&t);
}

TC_TEST(cluster_kill, a_call_whose_worker_is_killed_mid_send_fails_naming_it)
{
    tc_child_worker();
    tc_cluster(0, 0, 0);
    tc_load_faulty();
    tc_pw t;
    tc_pw_open(&t, TC_TOKEN, 0);
    rpc_call call;
    echo_start(&t, &call, 1); /* a call that goes through grows the windows */
    cr_assert(rpc_call_wait(&call) == 0, "%s", call.errmsg);
    rpc_call_fini(&call);

    tc_child_signal(0, SIGSTOP, false);
    pthread_t th;
    tcom_kill_after(T.child[0], 300, &th);
    double t0 = tc_now_ms();
    echo_start(&t, &call, 2);
    int rc = rpc_call_wait(&call);
    double took = tc_now_ms() - t0;
    pthread_join(th, NULL);
    tc_child_signal(0, SIGKILL, true);
    cr_assert(rc != 0, "a call to a killed worker succeeded");
    cr_assert(call.errmsg && strstr(call.errmsg, T.target[0]), "%s: %s",
              ferry_err_name(rc), call.errmsg);
    cr_assert(took < TC_WAIT_MS, "the call took %.0f ms", took);
    cr_log_info("call to a killed worker: %s after %.0f ms: %s", ferry_err_name(rc), took,
                call.errmsg);
    rpc_call_fini(&call);
    tc_pw_close(&t);
}

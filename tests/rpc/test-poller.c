/* tests/rpc — a poller shared by a server and a client whose calls complete
 * on its thread, under the owner's guard. */
#include "harness.h"

#include <pthread.h>
#include <string.h>

TestSuite(rpc_poller, .init = h_setup_bare, .fini = h_teardown, .timeout = 60);

/* The owner's side of a client on a poller: a mutex as the guard, and what
 * the callbacks saw. */
typedef struct owner {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool inside;       /* between enter and leave */
    int enters, leaves;
    int completed, failed, outside;
    pthread_t cb_thread;
    bool cb_thread_set, two_threads;
} owner;

static void enter(void *arg)
{
    owner *o = arg;
    pthread_mutex_lock(&o->mu);
    o->inside = true;
    o->enters++;
}

static void leave(void *arg)
{
    owner *o = arg;
    o->inside = false;
    o->leaves++;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
}

static void on_done(rpc_call *call)
{
    owner *o = call->data;
    if (!o->inside)
        o->outside++;
    if (!o->cb_thread_set) {
        o->cb_thread = pthread_self();
        o->cb_thread_set = true;
    } else if (!pthread_equal(o->cb_thread, pthread_self())) {
        o->two_threads = true;
    }
    o->completed++;
    if (call->result || call->reply.payload_len != 5 ||
        memcmp(call->reply.payload, "hello", 5) != 0)
        o->failed++;
    rpc_call_fini(call);
}

static void start_server_on(rpc_poller *p, rpc_server **out)
{
    const rpc_method *m;
    size_t n = h_methods(&m);
    rpc_server_opts so = {.listen = "127.0.0.1:0", .poller = p};
    int rc = rpc_server_create(&so, m, n, out);
    cr_assert(rc == 0, "rpc_server_create: %s", ferry_err_name(rc));
}

H_TEST(rpc_poller, a_client_on_a_poller_completes_every_call_on_its_thread_guarded)
{
    enum { N = 40 };
    cr_assert(rpc_poller_create(&H.poller) == 0);
    start_server_on(H.poller, &H.server);
    char target[64];
    snprintf(target, sizeof target, "127.0.0.1:%d", rpc_server_port(H.server));

    owner o = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    rpc_guard g = {enter, leave, &o};
    rpc_client *c;
    cr_assert(rpc_client_create_on(H.poller, &g, &c) == 0);
    rpc_channel *ch;
    pthread_mutex_lock(&o.mu);
    cr_assert(rpc_channel_create(c, target, NULL, &ch) == 0);
    static rpc_call calls[N];
    for (int i = 0; i < N; i++) {
        Ferry__CallRequest req;
        proto_raw req_head;
        rpc_msg_out out;
        h_msg_out(&out, &req, &req_head, "poll", "f", "hello", 5, RPC_CODEC_RAW);
        calls[i].data = &o;
        /* Inline on the server's side too: the same thread answers. */
        int rc = rpc_call_start(ch, &calls[i], i % 2 ? H_ECHO : H_ECHO_POOL, &out,
                                H_CALL_TIMEOUT_MS, on_done);
        cr_assert(rc == 0, "start %d: %s", i, ferry_err_name(rc));
    }
    /* Only callbacks complete such a call. */
    cr_assert(rpc_call_wait(&calls[0]) == FERRY_EINVAL);
    double end = h_now_ms() + H_WAIT_MS;
    while (o.completed < N && h_now_ms() < end) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&o.cv, &o.mu, &ts);
    }
    int completed = o.completed;
    rpc_channel_destroy(ch);
    rpc_client_close(c); /* nothing in flight: freed at once */
    pthread_mutex_unlock(&o.mu);

    cr_assert(completed == N, "%d of %d calls completed", completed, N);
    cr_assert(o.failed == 0, "%d calls failed or came back wrong", o.failed);
    cr_assert(o.outside == 0, "%d callbacks ran outside the guard", o.outside);
    cr_assert(o.enters == N && o.leaves == N, "enter ran %d times, leave %d, for %d calls",
              o.enters, o.leaves, N);
    cr_assert(!o.two_threads, "callbacks ran on more than one thread");
    cr_assert(!pthread_equal(o.cb_thread, pthread_self()),
              "a callback ran on the thread that started the calls");
}

H_TEST(rpc_poller, a_client_on_a_poller_needs_a_whole_guard)
{
    cr_assert(rpc_poller_create(&H.poller) == 0);
    owner o = {.mu = PTHREAD_MUTEX_INITIALIZER};
    rpc_client *c = (rpc_client *)&o;
    rpc_guard half = {enter, NULL, &o};
    cr_assert(rpc_client_create_on(H.poller, &half, &c) == FERRY_EINVAL);
    cr_assert(c == NULL, "*out was left set on failure");
    cr_assert(rpc_client_create_on(H.poller, NULL, &c) == FERRY_EINVAL);
    cr_assert(rpc_client_create_on(NULL, &(rpc_guard){enter, leave, &o}, &c) ==
              FERRY_EINVAL);
}

H_TEST(rpc_poller, a_server_that_goes_leaves_its_shared_poller_serving_the_other)
{
    cr_assert(rpc_poller_create(&H.poller) == 0);
    start_server_on(H.poller, &H.server);
    start_server_on(H.poller, &H.extra_server);
    snprintf(H.target, sizeof H.target, "127.0.0.1:%d", rpc_server_port(H.extra_server));
    h_channel_open(NULL);
    rpc_call call;
    int rc = h_call(H.ch, &call, H_ECHO, "a", "f", "hello", 5, RPC_CODEC_RAW,
                    H_CALL_TIMEOUT_MS);
    cr_assert(rc == 0, "before: %s", call.errmsg);
    rpc_call_fini(&call);

    rpc_server_destroy(H.server);
    H.server = NULL;
    rc = h_call(H.ch, &call, H_ECHO_POOL, "a", "f", "hello", 5, RPC_CODEC_RAW,
                H_CALL_TIMEOUT_MS);
    cr_assert(rc == 0, "after the other server went: %s", call.errmsg);
    rpc_call_fini(&call);
}

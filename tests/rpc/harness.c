/* tests/rpc — the shared fixture and the server's test handlers. */
#include "harness.h"
#include "tcommon.h"
#include "proto/raw.h"

#include <grpc/grpc.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

harness H;
h_stats HS;

static uv_timer_t tick;
static bool tick_open;

/* ---- peers seen by H_ECHO_POOL ------------------------------------------ */

#define MAX_PEERS 64
static pthread_mutex_t peers_lock = PTHREAD_MUTEX_INITIALIZER;
static char *peers[MAX_PEERS];
static size_t n_peers;
static size_t n_peers_overflow;

static void peer_seen(const char *peer)
{
    pthread_mutex_lock(&peers_lock);
    bool found = false;
    for (size_t i = 0; i < n_peers; i++) {
        if (strcmp(peers[i], peer ? peer : "(null)") == 0) {
            found = true;
            break;
        }
    }
    if (!found) {
        if (n_peers < MAX_PEERS)
            peers[n_peers++] = strdup(peer ? peer : "(null)");
        else
            n_peers_overflow++;
    }
    pthread_mutex_unlock(&peers_lock);
}

size_t h_distinct_peers(void)
{
    pthread_mutex_lock(&peers_lock);
    size_t n = n_peers + n_peers_overflow;
    pthread_mutex_unlock(&peers_lock);
    return n;
}

static void peers_reset(void)
{
    pthread_mutex_lock(&peers_lock);
    for (size_t i = 0; i < n_peers; i++)
        free(peers[i]);
    n_peers = 0;
    n_peers_overflow = 0;
    pthread_mutex_unlock(&peers_lock);
}

/* ---- threads started by H_SLOW, joined in teardown ---------------------- */

#define MAX_SLOW 256
static pthread_mutex_t slow_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t slow_threads[MAX_SLOW];
static size_t n_slow;

static void slow_join_all(void)
{
    for (;;) {
        pthread_mutex_lock(&slow_lock);
        if (n_slow == 0) {
            pthread_mutex_unlock(&slow_lock);
            return;
        }
        pthread_t t = slow_threads[--n_slow];
        pthread_mutex_unlock(&slow_lock);
        pthread_join(t, NULL);
    }
}

/* ---- handlers ------------------------------------------------------------ */

static void echo_reply(rpc_srv_call *sc, rpc_msg *req)
{
    ProtobufCMessage *head = NULL;
    if (proto_raw_unpack(&ferry__call_request__descriptor, req->head, req->head_len,
                         &head) != 0) {
        rpc_srv_fail(sc, FERRY_EPROTO, "echo: request head is not a CallRequest");
        return;
    }
    rpc_msg_out out = {
        .head_bytes = req->head, /* forwarded as it came */
        .head_len = req->head_len,
        .payload = req->payload,
        .payload_len = req->payload_len,
        .codec = req->codec,
    };
    int rc = rpc_srv_reply(sc, &out);
    if (rc != 0)
        fprintf(stderr, "echo: rpc_srv_reply: %s\n", ferry_err_name(rc));
    protobuf_c_message_free_unpacked(head, NULL);
}

static void h_echo(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    (void)data;
    atomic_fetch_add(&HS.handled, 1);
    echo_reply(sc, req);
}

static void h_echo_pool(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    (void)data;
    atomic_fetch_add(&HS.handled, 1);
    peer_seen(rpc_srv_peer(sc));
    echo_reply(sc, req);
}

static void h_fail(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    (void)data;
    atomic_fetch_add(&HS.handled, 1);
    Ferry__CallRequest *r = NULL;
    if (proto_raw_unpack(&ferry__call_request__descriptor, req->head, req->head_len,
                         (ProtobufCMessage **)&r) != 0) {
        rpc_srv_fail(sc, FERRY_EPROTO, "fail: request head is not a CallRequest");
        return;
    }
    rpc_srv_fail(sc, FERRY_ENOENT, "no module %s", r->function);
    protobuf_c_message_free_unpacked(&r->base, NULL);
}

typedef struct slow_job {
    rpc_srv_call *sc;
    rpc_msg *req;
} slow_job;

static void *slow_main(void *arg)
{
    slow_job job = *(slow_job *)arg;
    free(arg);
    int now = atomic_fetch_add(&HS.slow_running, 1) + 1;
    for (int peak = atomic_load(&HS.slow_peak);
         now > peak && !atomic_compare_exchange_weak(&HS.slow_peak, &peak, now);)
        ;
    usleep(H_SLOW_MS * 1000);
    atomic_fetch_sub(&HS.slow_running, 1);
    Ferry__CallRequest *r = NULL;
    if (proto_raw_unpack(&ferry__call_request__descriptor, job.req->head,
                         job.req->head_len, (ProtobufCMessage **)&r) == 0 &&
        strcmp(r->function, "fail") == 0)
        rpc_srv_fail(job.sc, FERRY_EINVAL, "slow handler failed on purpose");
    else
        echo_reply(job.sc, job.req);
    if (r)
        protobuf_c_message_free_unpacked(&r->base, NULL);
    return NULL;
}

static void h_slow(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    (void)data;
    atomic_fetch_add(&HS.handled, 1);
    slow_job *job = malloc(sizeof *job);
    job->sc = sc;
    job->req = req;
    pthread_mutex_lock(&slow_lock);
    if (n_slow == MAX_SLOW ||
        pthread_create(&slow_threads[n_slow], NULL, slow_main, job)) {
        pthread_mutex_unlock(&slow_lock);
        free(job);
        rpc_srv_fail(sc, FERRY_EAGAIN, "slow: could not start a thread");
        return;
    }
    n_slow++;
    pthread_mutex_unlock(&slow_lock);
}

static void h_block(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    (void)req;
    (void)data;
    atomic_fetch_add(&HS.handled, 1);
    atomic_fetch_add(&HS.block_started, 1);
    for (int i = 0; i < 10000 && !rpc_srv_cancelled(sc); i++)
        usleep(1000);
    if (rpc_srv_cancelled(sc)) {
        atomic_fetch_add(&HS.block_cancelled, 1);
        rpc_srv_fail(sc, FERRY_ECANCELED, "block: cancelled");
    } else {
        rpc_srv_fail(sc, FERRY_ETIMEDOUT, "block: never cancelled");
    }
}

static void h_sized(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    (void)data;
    atomic_fetch_add(&HS.handled, 1);
    Ferry__CallRequest *r = NULL;
    if (proto_raw_unpack(&ferry__call_request__descriptor, req->head, req->head_len,
                         (ProtobufCMessage **)&r) != 0) {
        rpc_srv_fail(sc, FERRY_EPROTO, "sized: request head is not a CallRequest");
        return;
    }
    size_t n = strtoull(r->function, NULL, 10);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    uint8_t *buf = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)(i * 7 + 3);
    Ferry__CallReply rep = FERRY__CALL_REPLY__INIT;
    proto_raw out_head = proto_raw_pack(&rep.base);
    rpc_msg_out out = {.head_bytes = out_head.data,
                       .head_len = out_head.len,
                       .payload = buf,
                       .payload_len = n};
    int rc = rpc_srv_reply(sc, &out);
    atomic_store(&HS.sized_reply_rc, rc);
    free(buf);
}

static void h_info(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    (void)req;
    (void)data;
    atomic_fetch_add(&HS.handled, 1);
    size_t tlen = 0;
    const char *tok = rpc_srv_metadata(sc, RPC_TOKEN_KEY, &tlen);
    char token[256];
    if (tok) {
        if (tlen >= sizeof token)
            tlen = sizeof token - 1;
        memcpy(token, tok, tlen);
        token[tlen] = 0;
    } else {
        strcpy(token, "(none)");
    }
    const char *peer = rpc_srv_peer(sc);
    char *functions[2] = {(char *)(peer ? peer : "(null)"), token};
    Ferry__LoadModuleReply rep = FERRY__LOAD_MODULE_REPLY__INIT;
    rep.task_name = (char *)rpc_srv_method(sc);
    rep.n_functions = 2;
    rep.functions = functions;
    proto_raw out_head = proto_raw_pack(&rep.base);
    rpc_msg_out out = {.head_bytes = out_head.data, .head_len = out_head.len};
    rpc_srv_reply(sc, &out);
}

static void h_forward(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    (void)data;
    atomic_fetch_add(&HS.handled, 1);
    rpc_msg_out out = {
        .head_bytes = req->head,
        .head_len = req->head_len,
        .payload = req->payload,
        .payload_len = req->payload_len,
        .codec = req->codec,
    };
    rpc_srv_reply(sc, &out);
}

void *h_ping_data;

static const rpc_method methods_tmpl[] = {
    {H_ECHO, h_echo, NULL, RPC_METHOD_INLINE, 0},
    {H_ECHO_POOL, h_echo_pool, NULL, 0, 0},
    {H_FAIL, h_fail, NULL, RPC_METHOD_INLINE, 0},
    {H_SLOW, h_slow, NULL, RPC_METHOD_INLINE, 0},
    {H_BLOCK, h_block, NULL, 0, 0},
    {H_SIZED, h_sized, NULL, 0, 0},
    {H_INFO, h_info, NULL, RPC_METHOD_INLINE, 0},
    {H_FORWARD, h_forward, NULL, 0, 0},
    {PROTO_METHOD_PING, rt_ping_handler, NULL, RPC_METHOD_INLINE, 0},
};
#define N_METHODS (sizeof methods_tmpl / sizeof methods_tmpl[0])
static rpc_method methods[N_METHODS];

size_t h_methods(const rpc_method **out)
{
    memcpy(methods, methods_tmpl, sizeof methods);
    methods[N_METHODS - 1].data = h_ping_data;
    *out = methods;
    return N_METHODS;
}

/* ---- fixture ------------------------------------------------------------- */

static void tick_cb(uv_timer_t *t)
{
    (void)t;
}

static void stats_reset(void)
{
    atomic_store(&HS.block_started, 0);
    atomic_store(&HS.block_cancelled, 0);
    atomic_store(&HS.sized_reply_rc, 1);
    atomic_store(&HS.handled, 0);
    peers_reset();
}

void h_server_start(size_t max_payload)
{
    const rpc_method *m;
    size_t n = h_methods(&m);
    rpc_server_opts o = {.listen = "127.0.0.1:0", .max_payload = max_payload};
    int rc = rpc_server_create(&o, m, n, &H.server);
    cr_assert(rc == 0, "rpc_server_create: %s", ferry_err_name(rc));
    H.port = rpc_server_port(H.server);
    cr_assert(H.port > 0 && H.port < 65536, "rpc_server_port returned %d", H.port);
    snprintf(H.target, sizeof H.target, "127.0.0.1:%d", H.port);
}

void h_channel_open(const rpc_channel_opts *opts)
{
    int rc = rpc_channel_create(H.client, H.target, opts, &H.ch);
    cr_assert(rc == 0, "rpc_channel_create(%s): %s", H.target, ferry_err_name(rc));
}

static void setup_common(void)
{
    memset(&H, 0, sizeof H);
    h_ping_data = NULL;
    stats_reset();
}

static void setup_client(void)
{
    setup_common();
    cr_assert(uv_loop_init(&H.loop) == 0);
    H.loop_open = true;
    cr_assert(uv_timer_init(&H.loop, &tick) == 0);
    tick_open = true;
    int rc = rpc_client_create(&H.loop, &H.client);
    cr_assert(rc == 0, "rpc_client_create: %s", ferry_err_name(rc));
}

void h_setup(void)
{
    setup_client();
    h_server_start(0);
    h_channel_open(NULL);
}

void h_setup_bare(void)
{
    setup_client();
}

void h_setup_grpc(void)
{
    setup_common();
    grpc_init();
    H.grpc_inited = true;
}

/* Releases everything the test left; returns uv_loop_close's result. */
static int release_all(void)
{
    if (H.ch)
        rpc_channel_destroy(H.ch);
    H.ch = NULL;
    for (size_t i = 0; i < sizeof H.extra / sizeof H.extra[0]; i++) {
        if (H.extra[i])
            rpc_channel_destroy(H.extra[i]);
        H.extra[i] = NULL;
    }
    if (H.client)
        rpc_client_close(H.client);
    H.client = NULL;
    if (tick_open)
        uv_close((uv_handle_t *)&tick, NULL);
    tick_open = false;
    int rc = 0;
    if (H.loop_open)
        uv_run(&H.loop, UV_RUN_DEFAULT);
    slow_join_all();
    rpc_server_destroy(H.server);
    H.server = NULL;
    rpc_server_destroy(H.extra_server);
    H.extra_server = NULL;
    rpc_poller_destroy(H.poller);
    H.poller = NULL;
    rpc_buf_trim();
    peers_reset();
    if (H.loop_open) {
        rc = uv_loop_close(&H.loop);
        if (rc != 0)
            uv_print_all_handles(&H.loop, stderr);
        else
            H.loop_open = false;
    }
    if (H.grpc_inited)
        grpc_shutdown();
    H.grpc_inited = false;
    return rc;
}

void h_finish(void)
{
    int rc = release_all();
    H.finished = true;
    cr_assert(rc == 0, "uv_loop_close: %s (a handle was left open)", uv_err_name(rc));
    tcom_assert_no_leaks();
}

void h_teardown(void)
{
    if (!H.finished)
        release_all();
}

/* ---- running the loop ---------------------------------------------------- */

double h_now_ms(void)
{
    return (double)uv_hrtime() / 1e6;
}

static bool run_until(bool (*pred)(const void *), const void *arg, int ms)
{
    double end = h_now_ms() + ms;
    uv_timer_start(&tick, tick_cb, 1, 1);
    while (!pred(arg) && h_now_ms() < end)
        uv_run(&H.loop, UV_RUN_ONCE);
    uv_timer_stop(&tick);
    return pred(arg);
}

static bool pred_flag(const void *a)
{
    return *(const bool *)a;
}

bool h_run_until_flag(const bool *flag, int ms)
{
    return run_until(pred_flag, flag, ms);
}

typedef struct count_arg {
    const int *c;
    int n;
} count_arg;

static bool pred_count(const void *a)
{
    const count_arg *ca = a;
    return *ca->c >= ca->n;
}

bool h_run_until_count(const int *counter, int n, int ms)
{
    count_arg ca = {counter, n};
    return run_until(pred_count, &ca, ms);
}

typedef struct atomic_arg {
    atomic_int *a;
    int n;
} atomic_arg;

static bool pred_atomic(const void *a)
{
    const atomic_arg *aa = a;
    return atomic_load(aa->a) >= aa->n;
}

bool h_run_until_atomic(atomic_int *a, int n, int ms)
{
    atomic_arg aa = {a, n};
    return run_until(pred_atomic, &aa, ms);
}

static bool pred_never(const void *a)
{
    (void)a;
    return false;
}

void h_run_for(int ms)
{
    run_until(pred_never, NULL, ms);
}

/* ---- calls --------------------------------------------------------------- */

void h_done_cb(rpc_call *call)
{
    h_done *d = call->data;
    d->completions++;
    d->done = true;
}

void h_msg_out(rpc_msg_out *out, Ferry__CallRequest *req, proto_raw *head,
               const char *sha256, const char *function, const void *payload, size_t len,
               rpc_codec codec)
{
    ferry__call_request__init(req);
    req->sha256 = (char *)sha256;
    req->function = (char *)function;
    *head = proto_raw_pack(&req->base);
    memset(out, 0, sizeof *out);
    out->head_bytes = head->data;
    out->head_len = head->len;
    out->payload = payload;
    out->payload_len = len;
    out->codec = codec;
}

int h_call(rpc_channel *ch, rpc_call *call, const char *method, const char *sha256,
           const char *function, const void *payload, size_t len, rpc_codec codec,
           int64_t timeout_ms)
{
    Ferry__CallRequest req;
    proto_raw head;
    rpc_msg_out out;
    h_msg_out(&out, &req, &head, sha256, function, payload, len, codec);
    h_done d = {0};
    memset(call, 0, sizeof *call);
    call->data = &d;
    int rc = rpc_call_start(ch, call, method, &out, timeout_ms, h_done_cb);
    cr_assert(rc == 0, "rpc_call_start(%s): %s", method, ferry_err_name(rc));
    cr_assert(h_run_until_flag(&d.done, H_WAIT_MS), "%s never completed", method);
    uv_run(&H.loop, UV_RUN_NOWAIT);
    cr_assert(d.completions == 1, "callback ran %d times", d.completions);
    call->data = NULL;
    return call->result;
}

Ferry__CallRequest *h_reply_callreq(const rpc_msg *m)
{
    ProtobufCMessage *p = NULL;
    int rc = proto_raw_unpack(&ferry__call_request__descriptor, m->head, m->head_len, &p);
    cr_assert(rc == 0, "reply head does not unpack as CallRequest: %s",
              ferry_err_name(rc));
    return (Ferry__CallRequest *)p;
}

/* ---- data ---------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void h_fill_random(void *buf, size_t len, uint64_t seed)
{
    uint8_t *p = buf;
    uint64_t s = seed;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t v = splitmix(&s);
        memcpy(p + i, &v, 8);
    }
    uint64_t v = splitmix(&s);
    for (; i < len; i++, v >>= 8)
        p[i] = (uint8_t)v;
}

/* 90%-zero float32-like data: one random word per 64-byte line. */
void h_fill_sparse(void *buf, size_t len, uint64_t seed)
{
    uint8_t *p = buf;
    uint64_t s = seed;
    memset(p, 0, len);
    for (size_t i = 0; i + 4 <= len; i += 64) {
        uint32_t v = (uint32_t)splitmix(&s);
        memcpy(p + i, &v, 4);
    }
}

int h_dead_port(void)
{
    return tcom_free_port();
}

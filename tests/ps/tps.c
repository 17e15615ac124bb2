/* tests/ps — the shared fixture. */
#include "tps.h"
#include "tcommon.h"
#include "proto/raw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

tps_world T;

/* ---- fixture ------------------------------------------------------------------- */

void tps_setup(void)
{
    memset(&T, 0, sizeof T);
}

static int release_all(void)
{
    for (int i = 0; i < TPS_MAX_CLIENTS; i++) {
        rt_ps_client_destroy(T.clients[i]);
        T.clients[i] = NULL;
    }
    for (int i = 0; i < TPS_MAX_RANKS; i++) {
        if (T.r[i].ch)
            rpc_channel_destroy(T.r[i].ch);
        T.r[i].ch = NULL;
    }
    for (size_t i = 0; i < sizeof T.extra / sizeof T.extra[0]; i++) {
        if (T.extra[i])
            rpc_channel_destroy(T.extra[i]);
        T.extra[i] = NULL;
    }
    if (T.client)
        rpc_client_close(T.client);
    T.client = NULL;
    int rc = 0;
    if (T.loop_open) {
        uv_run(&T.loop, UV_RUN_DEFAULT);
        for (size_t i = 0; i < sizeof T.calls / sizeof T.calls[0]; i++) {
            if (T.call_used[i])
                rpc_call_fini(&T.calls[i]);
            T.call_used[i] = false;
        }
        rc = uv_loop_close(&T.loop);
        if (rc != 0)
            uv_print_all_handles(&T.loop, stderr);
        else
            T.loop_open = false;
    }
    /* A parked pull holds its server's shutdown until answered. */
    for (int i = 0; i < TPS_MAX_RANKS; i++)
        rt_ps_store_shutdown(T.r[i].store);
    for (int i = 0; i < TPS_MAX_RANKS; i++) {
        rpc_server_destroy(T.r[i].server);
        T.r[i].server = NULL;
    }
    for (int i = 0; i < TPS_MAX_RANKS; i++) {
        rt_ps_store_destroy(T.r[i].store);
        T.r[i].store = NULL;
    }
    rt_worker_destroy(T.worker, 0);
    T.worker = NULL;
    if (T.dir[0])
        tcom_rm_tree(T.dir);
    T.dir[0] = 0;
    for (size_t i = 0; i < sizeof T.allocs / sizeof T.allocs[0]; i++) {
        free(T.allocs[i]);
        T.allocs[i] = NULL;
    }
    rpc_buf_trim();
    return rc;
}

void tps_teardown(void)
{
    if (!T.finished)
        release_all();
}

void tps_finish(void)
{
    int rc = release_all();
    T.finished = true;
    cr_assert(rc == 0, "uv_loop_close: %s (a handle was left open)", uv_err_name(rc));
    tcom_assert_no_leaks();
}

static int serve(int rank, const char *listen)
{
    /* As the worker registers them: on the pool, the store as data. The
     * name strings are literals, so they outlive the server. */
    rpc_method m[2] = {
        {PROTO_METHOD_PUSH, rt_ps_push_handler, T.r[rank].store, 0, 0},
        {PROTO_METHOD_PULL, rt_ps_pull_handler, T.r[rank].store, 0, 0},
    };
    rpc_server_opts so = {.listen = listen, .handler_threads = 4};
    return rpc_server_create(&so, m, 2, &T.r[rank].server);
}

int tps_restart_server(int rank)
{
    return serve(rank, T.r[rank].addr);
}

void tps_start(int world)
{
    cr_assert(world >= 1 && world <= TPS_MAX_RANKS);
    T.world = world;
    for (int i = 0; i < world; i++) {
        int rc = rt_ps_store_create(&T.r[i].store);
        cr_assert(rc == 0, "rt_ps_store_create: %s", ferry_err_name(rc));
        rc = serve(i, "127.0.0.1:0");
        cr_assert(rc == 0, "rpc_server_create: %s", ferry_err_name(rc));
        int port = rpc_server_port(T.r[i].server);
        cr_assert(port > 0 && port < 65536, "rpc_server_port returned %d", port);
        snprintf(T.r[i].addr, sizeof T.r[i].addr, "127.0.0.1:%d", port);
        T.peers[i] = T.r[i].addr;
    }
}

double tps_stop_server(int rank)
{
    double t0 = tps_now_ms();
    rpc_server_destroy(T.r[rank].server);
    T.r[rank].server = NULL;
    return tps_now_ms() - t0;
}

int tps_open(int rank, const tps_sess *s, char *err, size_t errlen)
{
    rt_optim_opts opt = {.kind = RT_OPT_SGD, .lr = s->lr, .momentum = 0};
    rt_optim_defaults(&opt);
    rt_ps_session_opts o = {.session = s->session,
                            .rank = rank,
                            .world = T.world,
                            .shards = s->shards,
                            .staleness = s->staleness,
                            .algo = s->algo,
                            .optim = &opt,
                            .schedule_samples = s->schedule_samples,
                            .batch = s->batch ? s->batch : TPS_BATCH,
                            .push_steps = s->push_steps ? s->push_steps : TPS_PUSH_STEPS,
                            .init = s->init,
                            .n = s->n,
                            .secret = TPS_SECRET};
    return rt_ps_open(T.r[rank].store, &o, err, errlen);
}

void tps_open_all(const tps_sess *s)
{
    for (int i = 0; i < T.world; i++) {
        char err[TPS_ERRLEN] = "";
        int rc = tps_open(i, s, err, sizeof err);
        cr_assert(rc == 0, "rank %d: rt_ps_open: %s: %s", i, ferry_err_name(rc), err);
    }
}

rt_ps_client *tps_client(int rank, const tps_sess *s, const char *const *peers,
                         int64_t timeout_ms)
{
    rt_ps_client_opts o = {.session = s->session,
                           .rank = rank,
                           .world = T.world,
                           .shards = s->shards,
                           .n = s->n,
                           .peers = peers ? peers : T.peers,
                           .timeout_ms = timeout_ms,
                           .secret = TPS_SECRET};
    char err[TPS_ERRLEN] = "";
    rt_ps_client *c = NULL;
    int rc = rt_ps_client_create(&o, &c, err, sizeof err);
    cr_assert(rc == 0, "rank %d: rt_ps_client_create: %s: %s", rank, ferry_err_name(rc),
              err);
    for (int i = 0; i < TPS_MAX_CLIENTS; i++)
        if (!T.clients[i]) {
            T.clients[i] = c;
            return c;
        }
    rt_ps_client_destroy(c);
    cr_assert_fail("tps_client: more than %d clients", TPS_MAX_CLIENTS);
    return NULL;
}

/* ---- hand-made Push and Pull --------------------------------------------------- */

static void open_loop(void)
{
    if (T.loop_open)
        return;
    cr_assert(uv_loop_init(&T.loop) == 0);
    T.loop_open = true;
    int rc = rpc_client_create(&T.loop, &T.client);
    cr_assert(rc == 0, "rpc_client_create: %s", ferry_err_name(rc));
}

rpc_channel *tps_channel(int rank)
{
    cr_assert(rank >= 0 && rank < T.world);
    if (T.r[rank].ch)
        return T.r[rank].ch;
    open_loop();
    int rc = rpc_channel_create(T.client, T.r[rank].addr, NULL, &T.r[rank].ch);
    cr_assert(rc == 0, "rpc_channel_create(%s): %s", T.r[rank].addr, ferry_err_name(rc));
    return T.r[rank].ch;
}

rpc_channel *tps_channel_to(const char *addr, const char *token)
{
    open_loop();
    rpc_channel_opts o = {.token = token};
    for (size_t i = 0; i < sizeof T.extra / sizeof T.extra[0]; i++)
        if (!T.extra[i]) {
            int rc = rpc_channel_create(T.client, addr, &o, &T.extra[i]);
            cr_assert(rc == 0, "rpc_channel_create(%s): %s", addr, ferry_err_name(rc));
            return T.extra[i];
        }
    cr_assert_fail("tps_channel_to: too many channels");
    return NULL;
}

/* Fills `out` from a completed call: the error text, or the reply's head
 * (PullReply or PushReply) and payload. */
static int take(rpc_call *call, bool pull, float *vals, size_t cap, tps_reply *out)
{
    memset(out, 0, sizeof *out);
    out->rc = call->result;
    if (call->result) {
        snprintf(out->err, sizeof out->err, "%s", call->errmsg ? call->errmsg : "");
        return out->rc;
    }
    ProtobufCMessage *m = NULL;
    const ProtobufCMessageDescriptor *d =
        pull ? &ferry__pull_reply__descriptor : &ferry__push_reply__descriptor;
    cr_assert(proto_raw_unpack(d, call->reply.head, call->reply.head_len, &m) == 0,
              "the reply is not a %s", d->short_name);
    if (pull) {
        Ferry__PullReply *p = (Ferry__PullReply *)m;
        out->version = p->shard_version;
        out->samples = p->samples;
        out->min_clock = p->min_clock;
    } else {
        Ferry__PushReply *p = (Ferry__PushReply *)m;
        out->version = p->shard_version;
        out->samples = p->samples;
        out->staleness = p->staleness;
        out->min_clock = p->min_clock;
    }
    cr_assert(call->reply.payload_len % sizeof(float) == 0);
    out->n = call->reply.payload_len / sizeof(float);
    if (vals && out->n) {
        cr_assert(out->n <= cap, "the reply carried %zu floats, room for %zu", out->n,
                  cap);
        memcpy(vals, call->reply.payload, out->n * sizeof(float));
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}

static rpc_call *call_start(int rank, const char *method, const rpc_msg_out *m,
                            int64_t timeout_ms)
{
    rpc_channel *ch = tps_channel(rank);
    for (size_t i = 0; i < sizeof T.calls / sizeof T.calls[0]; i++) {
        if (T.call_used[i])
            continue;
        rpc_call *call = &T.calls[i];
        memset(call, 0, sizeof *call);
        int rc = rpc_call_start(ch, call, method, m, timeout_ms, NULL);
        cr_assert(rc == 0, "rpc_call_start: %s", ferry_err_name(rc));
        T.call_used[i] = true;
        return call;
    }
    cr_assert_fail("too many calls in flight");
    return NULL;
}

static int call_finish(rpc_call *call, bool pull, float *vals, size_t cap, tps_reply *out)
{
    rpc_call_wait(call);
    int rc = take(call, pull, vals, cap, out);
    rpc_call_fini(call);
    for (size_t i = 0; i < sizeof T.calls / sizeof T.calls[0]; i++)
        if (&T.calls[i] == call)
            T.call_used[i] = false;
    return rc;
}

/* The session's secret, unless the request names one of its own. */
static ProtobufCBinaryData secret_or_own(ProtobufCBinaryData own)
{
    return own.len || own.data ? own
                               : (ProtobufCBinaryData){.len = RT_PS_SECRET_BYTES,
                                                       .data = (uint8_t *)TPS_SECRET};
}

rpc_call *tps_pull_start(int rank, const Ferry__PullRequest *rq, int64_t timeout_ms)
{
    Ferry__PullRequest keyed = *rq;
    keyed.secret = secret_or_own(rq->secret);
    proto_raw m_head = proto_raw_pack(&keyed.base);
    rpc_msg_out m = {.head_bytes = m_head.data, .head_len = m_head.len};
    return call_start(rank, PROTO_METHOD_PULL, &m, timeout_ms);
}

int tps_pull_finish(rpc_call *call, float *vals, size_t cap, tps_reply *out)
{
    return call_finish(call, true, vals, cap, out);
}

rpc_call *tps_push_start(int rank, const Ferry__PushRequest *rq, const float *vals,
                         size_t n, int64_t timeout_ms)
{
    Ferry__PushRequest keyed = *rq;
    keyed.secret = secret_or_own(rq->secret);
    proto_raw m_head = proto_raw_pack(&keyed.base);
    rpc_msg_out m = {.head_bytes = m_head.data,
                     .head_len = m_head.len,
                     .payload = vals,
                     .payload_len = n * sizeof(float),
                     .codec = RPC_CODEC_RAW};
    return call_start(rank, PROTO_METHOD_PUSH, &m, timeout_ms);
}

int tps_push_finish(rpc_call *call, float *vals, size_t cap, tps_reply *out)
{
    return call_finish(call, false, vals, cap, out);
}

int tps_pull_raw(int rank, const Ferry__PullRequest *rq, float *vals, size_t cap,
                 tps_reply *out)
{
    return tps_pull_finish(tps_pull_start(rank, rq, TPS_TIMEOUT_MS), vals, cap, out);
}

int tps_push_raw(int rank, const Ferry__PushRequest *rq, const float *vals, size_t n,
                 size_t bytes, tps_reply *out)
{
    rpc_channel *ch = tps_channel(rank);
    Ferry__PushRequest keyed = *rq;
    keyed.secret = secret_or_own(rq->secret);
    proto_raw m_head = proto_raw_pack(&keyed.base);
    rpc_msg_out m = {.head_bytes = m_head.data,
                     .head_len = m_head.len,
                     .payload = vals,
                     .payload_len = bytes ? bytes : n * sizeof(float),
                     .codec = RPC_CODEC_RAW};
    rpc_call call = {0};
    int rc = rpc_call_start(ch, &call, PROTO_METHOD_PUSH, &m, TPS_TIMEOUT_MS, NULL);
    cr_assert(rc == 0, "rpc_call_start: %s", ferry_err_name(rc));
    rpc_call_wait(&call);
    rc = take(&call, false, NULL, 0, out);
    rpc_call_fini(&call);
    return rc;
}

int tps_call_bytes(rpc_channel *ch, const char *method, const void *head, size_t head_len,
                   const void *payload, size_t len, tps_reply *out)
{
    rpc_msg_out m = {.head_bytes = head,
                     .head_len = head_len,
                     .payload = payload,
                     .payload_len = len,
                     .codec = RPC_CODEC_RAW};
    rpc_call call = {0};
    int rc = rpc_call_start(ch, &call, method, &m, TPS_TIMEOUT_MS, NULL);
    cr_assert(rc == 0, "rpc_call_start: %s", ferry_err_name(rc));
    rpc_call_wait(&call);
    memset(out, 0, sizeof *out);
    out->rc = call.result;
    snprintf(out->err, sizeof out->err, "%s",
             call.result && call.errmsg ? call.errmsg : "");
    rpc_call_fini(&call);
    return out->rc;
}

void tps_snapshot(int rank, uint64_t session, int shard, float *vals, size_t cap,
                  uint64_t *version, uint64_t *samples)
{
    Ferry__PullRequest rq = FERRY__PULL_REQUEST__INIT;
    rq.job = session;
    rq.shard = (uint32_t)shard;
    rq.from_rank = (uint32_t)rank;
    tps_reply r;
    int rc = tps_pull_raw(rank, &rq, vals, cap, &r);
    cr_assert(rc == 0, "reading shard %d of session %llu on rank %d: %s: %s", shard,
              (unsigned long long)session, rank, ferry_err_name(rc), r.err);
    if (version)
        *version = r.version;
    if (samples)
        *samples = r.samples;
}

static void stop_loop(uv_timer_t *t)
{
    *(bool *)t->data = true;
}

void tps_run_loop_ms(int ms)
{
    open_loop();
    bool fired = false;
    uv_timer_t t;
    uv_timer_init(&T.loop, &t);
    t.data = &fired;
    /* The loop's clock stopped when it last ran: a timer armed from it may
     * fire at the top of the next iteration, which would then block in
     * poll with nothing left to wake it. */
    uv_update_time(&T.loop);
    uv_timer_start(&t, stop_loop, (uint64_t)ms, 0);
    while (!fired)
        uv_run(&T.loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&T.loop, UV_RUN_NOWAIT);
}

/* ---- a real worker ------------------------------------------------------------------
 */

void tps_start_worker(void)
{
    snprintf(T.dir, sizeof T.dir, "/tmp/ferry-tps-XXXXXX");
    cr_assert(mkdtemp(T.dir), "mkdtemp failed");
    char state[128];
    snprintf(state, sizeof state, "%s/state", T.dir);
    rt_worker_opts o = {.listen = "127.0.0.1:0",
                        .state_dir = state,
                        .token = TPS_TOKEN,
                        .rank = 0,
                        .threads = 4,
                        .device = "cpu"};
    int rc = rt_worker_create(&o, &T.worker);
    cr_assert(rc == 0, "rt_worker_create: %s", ferry_err_name(rc));
    snprintf(T.worker_addr, sizeof T.worker_addr, "127.0.0.1:%d",
             rt_worker_port(T.worker));
}

/* ---- data and time
 * --------------------------------------------------------------------- */

void *tps_alloc(size_t len)
{
    void *p = calloc(1, len ? len : 1);
    cr_assert(p, "no memory for %zu bytes of test data", len);
    for (size_t i = 0; i < sizeof T.allocs / sizeof T.allocs[0]; i++)
        if (!T.allocs[i]) {
            T.allocs[i] = p;
            return p;
        }
    free(p);
    cr_assert_fail("tps_alloc: more than %zu live allocations",
                   sizeof T.allocs / sizeof T.allocs[0]);
    return NULL;
}

void tps_free(void *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < sizeof T.allocs / sizeof T.allocs[0]; i++)
        if (T.allocs[i] == p)
            T.allocs[i] = NULL;
    free(p);
}

double tps_now_ms(void)
{
    return (double)uv_hrtime() / 1e6;
}

void tps_sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

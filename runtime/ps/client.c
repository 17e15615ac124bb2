/* A worker's side of a parameter-server session: one channel to each peer
 * that holds a shard, opened once for the session, and the round trips of
 * a step — every shard's pull, or every shard's push, in flight at once.
 *
 * The client's libuv loop runs only inside its calls, on the caller's
 * thread (the trainer's), so a round trip costs no thread hand-off beyond
 * gRPC's own. A 20 ms timer polls the caller's cancellation while a pull
 * is parked by the staleness bound.
 *
 * A push lends the caller's values to gRPC without a copy (rpc.h): a round
 * trip returns only once gRPC has let go of every span it lent, whatever
 * became of the calls, since the caller reuses the buffer next step. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "proto/train_spec.h"
#include "ps_int.h"
#include "runtime/where.h"

#define TICK_MS           20
#define DEFAULT_TIMEOUT   PROTO_TRAIN_WORKER_TIMEOUT_MS
#define RETRY_FIRST_MS    2
#define RETRY_MAX_MS      100

struct rt_ps_client {
    uint64_t session;
    int rank, world, shards;
    size_t n;
    char **peers;
    char *token; /* for the channels a reconnect opens */
    int64_t timeout_ms;
    uint8_t secret[RT_PS_SECRET_BYTES];
    uv_loop_t loop;
    rpc_client *rpc;
    rpc_channel **ch; /* by rank; NULL for ranks that hold no shard */
    bool *answered;   /* by rank: has answered once (connected) */
    uint64_t *version; /* by shard: at the last pull */
    rpc_call *calls;   /* by shard */
    bool *pending;     /* by shard: still to do in this round trip */
    bool *started;     /* by shard: a call of this round is in c->calls */
    /* Spans of the caller's values that gRPC still holds, released from
     * gRPC's threads. */
    pthread_mutex_t lent_mu;
    pthread_cond_t lent_cv;
    int lent;
};

/* gRPC is done with a pushed span (any thread). */
static void lent_release(void *payload, void *arg)
{
    (void)payload;
    rt_ps_client *c = arg;
    pthread_mutex_lock(&c->lent_mu);
    if (--c->lent == 0)
        pthread_cond_signal(&c->lent_cv);
    pthread_mutex_unlock(&c->lent_mu);
}

static void wait_lent(rt_ps_client *c)
{
    pthread_mutex_lock(&c->lent_mu);
    while (c->lent)
        pthread_cond_wait(&c->lent_cv, &c->lent_mu);
    pthread_mutex_unlock(&c->lent_mu);
}

static void client_free(rt_ps_client *c)
{
    if (c->rpc) {
        for (int r = 0; r < c->world; r++)
            rpc_channel_destroy(c->ch[r]);
        rpc_client_close(c->rpc);
        uv_run(&c->loop, UV_RUN_DEFAULT);
        uv_loop_close(&c->loop);
    }
    wait_lent(c);
    pthread_cond_destroy(&c->lent_cv);
    pthread_mutex_destroy(&c->lent_mu);
    for (int r = 0; c->peers && r < c->world; r++)
        free(c->peers[r]);
    free(c->peers);
    free(c->token);
    free(c->ch);
    free(c->answered);
    free(c->version);
    free(c->calls);
    free(c->pending);
    free(c->started);
    OPENSSL_cleanse(c->secret, sizeof c->secret);
    free(c);
}

void rt_ps_client_destroy(rt_ps_client *c)
{
    if (c)
        client_free(c);
}

/* A channel to each rank that holds a shard. */
static int open_channels(rt_ps_client *c, char *err, size_t errlen)
{
    rpc_channel_opts co = {.token = c->token, .version = PROTO_VERSION};
    int rc = 0;
    for (int sh = 0; rc == 0 && sh < c->shards; sh++) {
        int r = rt_ps_shard_rank(sh, c->world);
        if (!c->ch[r] && (rc = rpc_channel_create(c->rpc, c->peers[r], &co, &c->ch[r])))
            snprintf(err, errlen, "cannot open a channel to rank %d (%s): %s", r,
                     c->peers[r], ferry_strerror(rc));
    }
    return rc;
}

int rt_ps_client_reconnect(rt_ps_client *c, char *err, size_t errlen)
{
    for (int r = 0; r < c->world; r++) {
        if (c->ch[r])
            rpc_channel_destroy(c->ch[r]);
        c->ch[r] = NULL;
        c->answered[r] = false;
    }
    uv_run(&c->loop, UV_RUN_NOWAIT);
    return open_channels(c, err, errlen);
}

int rt_ps_client_create(const rt_ps_client_opts *o, rt_ps_client **out, char *err,
                        size_t errlen)
{
    *out = NULL;
    if (o->world < 1 || o->rank < 0 || o->rank >= o->world || !o->peers || o->n == 0 ||
        !o->secret) {
        snprintf(err, errlen, "bad parameter-server client: rank %d of %d%s", o->rank,
                 o->world, o->secret ? "" : " without its secret");
        return FERRY_EINVAL;
    }
    rt_ps_client *c = calloc(1, sizeof *c);
    if (!c)
        return FERRY_ENOMEM;
    pthread_mutex_init(&c->lent_mu, NULL);
    pthread_cond_init(&c->lent_cv, NULL);
    c->session = o->session;
    c->rank = o->rank;
    c->world = o->world;
    c->shards = o->shards > 0 ? o->shards : o->world;
    c->n = o->n;
    memcpy(c->secret, o->secret, sizeof c->secret);
    c->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : DEFAULT_TIMEOUT;
    size_t w = (size_t)c->world, s = (size_t)c->shards;
    c->peers = calloc(w, sizeof *c->peers);
    c->ch = calloc(w, sizeof *c->ch);
    c->answered = calloc(w, sizeof *c->answered);
    c->version = calloc(s, sizeof *c->version);
    c->calls = calloc(s, sizeof *c->calls);
    c->pending = calloc(s, sizeof *c->pending);
    c->started = calloc(s, sizeof *c->started);
    int rc = c->peers && c->ch && c->answered && c->version && c->calls && c->pending &&
                         c->started
                 ? 0
                 : FERRY_ENOMEM;
    for (int r = 0; rc == 0 && r < c->world; r++)
        if (!(c->peers[r] = strdup(o->peers[r])))
            rc = FERRY_ENOMEM;
    if (rc == 0 && o->token && !(c->token = strdup(o->token)))
        rc = FERRY_ENOMEM;
    if (rc) {
        client_free(c);
        snprintf(err, errlen, "no memory for a parameter-server client");
        return rc;
    }
    uv_loop_init(&c->loop);
    if ((rc = rpc_client_create(&c->loop, &c->rpc))) {
        uv_loop_close(&c->loop);
        client_free(c);
        snprintf(err, errlen, "cannot create an rpc client: %s", ferry_strerror(rc));
        return rc;
    }
    if ((rc = open_channels(c, err, errlen))) {
        client_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* ---- one round trip to every shard ---------------------------------------------------- */

typedef struct trip {
    rt_ps_client *c;
    bool pull;     /* a Pull */
    bool and_pull; /* a Push that pulls too */
    bool rejoin;   /* a Pull that takes the rank back in */
    uint64_t until;
    uint32_t samples;
    size_t running;
    bool (*cancelled)(void *);
    void *arg;
    bool cancel_sent;
} trip;

static void on_done(rpc_call *call)
{
    trip *t = call->data;
    t->running--;
}

static void on_tick(uv_timer_t *tm)
{
    trip *t = tm->data;
    if (t->cancel_sent || !t->cancelled || !t->cancelled(t->arg))
        return;
    t->cancel_sent = true;
    for (int s = 0; s < t->c->shards; s++)
        if (t->c->started[s] && !t->c->calls[s].done)
            rpc_call_cancel(&t->c->calls[s]);
}

static int start(rt_ps_client *c, trip *t, int s, const float *values, int kind,
                 uint64_t step)
{
    rt_ps_span sp = rt_ps_shard_span(c->n, c->shards, s);
    rpc_call *call = &c->calls[s];
    call->data = t;
    int r = rt_ps_shard_rank(s, c->world);
    proto_blob secret = {.data = c->secret, .len = sizeof c->secret};
    proto_bytes head = {0};
    if (t->pull) {
        proto_pull_req rq = {.job = c->session,
                             .shard = (uint32_t)s,
                             .worker_step = step,
                             .from_rank = (uint32_t)c->rank,
                             .until_samples = t->until,
                             .secret = secret,
                             .rejoin = t->rejoin};
        int rc = proto_pull_req_pack(&rq, &head);
        rpc_msg_out m = {.head_bytes = head.data, .head_len = head.len};
        if (rc == 0)
            rc = rpc_call_start(c->ch[r], call, PROTO_METHOD_PULL, &m, c->timeout_ms,
                                on_done);
        proto_bytes_fini(&head);
        return rc;
    }
    proto_push_req rq = {.job = c->session,
                         .shard = (uint32_t)s,
                         .worker_step = step,
                         .from_rank = (uint32_t)c->rank,
                         .version = c->version[s],
                         .kind = (uint32_t)kind,
                         .samples = t->samples,
                         .pull = t->and_pull,
                         .until_samples = t->and_pull ? t->until : 0,
                         .secret = secret};
    if (proto_push_req_pack(&rq, &head))
        return FERRY_ENOMEM;
    rpc_msg_out m = {.head_bytes = head.data,
                     .head_len = head.len,
                     .payload = values + sp.lo,
                     .payload_len = (sp.hi - sp.lo) * sizeof(float),
                     .codec = RPC_CODEC_RAW,
                     .payload_free = lent_release,
                     .free_arg = c};
    pthread_mutex_lock(&c->lent_mu);
    c->lent++;
    pthread_mutex_unlock(&c->lent_mu);
    int rc = rpc_call_start(c->ch[r], call, PROTO_METHOD_PUSH, &m, c->timeout_ms, on_done);
    proto_bytes_fini(&head);
    /* A start that failed before encoding lent nothing; one that failed
     * after (FERRY_EINTERNAL) has released already. */
    if (rc && rc != FERRY_EINTERNAL)
        lent_release(NULL, c);
    return rc;
}

/* A pull's or a push's reply head: the shard's version and samples, and the
 * slowest rank's clock. */
static int read_head(const rpc_msg *reply, bool pull, uint64_t *version, uint64_t *samples,
                     uint64_t *clock)
{
    if (pull) {
        proto_pull_reply *p = NULL;
        int rc = proto_pull_reply_unpack(reply->head, reply->head_len, &p);
        if (rc == 0) {
            *version = p->shard_version;
            *samples = p->samples;
            *clock = p->min_clock;
        }
        proto_free(p);
        return rc;
    }
    proto_push_reply *p = NULL;
    int rc = proto_push_reply_unpack(reply->head, reply->head_len, &p);
    if (rc == 0) {
        *version = p->shard_version;
        *samples = p->samples;
        *clock = p->min_clock;
    }
    proto_free(p);
    return rc;
}

/* Takes what shard s answered; 0, or FERRY_EPROTO for a reply that does not
 * fit. */
static int take(rt_ps_client *c, const trip *t, int s, float *params, rt_ps_seen *seen,
                char *err, size_t errlen)
{
    rpc_call *call = &c->calls[s];
    rt_ps_span sp = rt_ps_shard_span(c->n, c->shards, s);
    int r = rt_ps_shard_rank(s, c->world);
    bool values = t->pull || t->and_pull;
    size_t want = values ? (sp.hi - sp.lo) * sizeof(float) : 0;
    uint64_t version = 0, samples = 0, clock = 0;
    int rc = call->reply.payload_len == want ? 0 : FERRY_EPROTO;
    if (rc == 0)
        rc = read_head(&call->reply, t->pull, &version, &samples, &clock);
    if (rc == 0 && !t->pull && !values)
        clock = UINT64_MAX; /* a push alone says nothing of the clocks */
    if (rc) {
        snprintf(err, errlen,
                 "shard %d on rank %d (%s) answered a %s with %zu bytes where %zu were "
                 "expected",
                 s, r, c->peers[r], t->pull ? "pull" : "push", call->reply.payload_len,
                 want);
        return FERRY_EPROTO;
    }
    if (values) {
        if (want)
            memcpy(params + sp.lo, call->reply.payload, want);
        c->version[s] = version;
    }
    if (samples > seen->samples)
        seen->samples = samples;
    if (clock < seen->min_clock)
        seen->min_clock = clock;
    return 0;
}

/* The first shard still not answered, for the stall inspector. */
static void say_where(const rt_ps_client *c, bool pull)
{
    for (int s = 0; s < c->shards; s++)
        if (c->started[s] && !c->calls[s].done) {
            char phase[48];
            snprintf(phase, sizeof phase, "%s shard %d", pull ? "pull from" : "push to",
                     s);
            rt_where_waiting(phase, rt_ps_shard_rank(s, c->world));
            return;
        }
}

static int trip_run(rt_ps_client *c, trip t, float *params, const float *values, int kind,
                    uint64_t step, rt_ps_seen *seen, char *err, size_t errlen)
{
    bool pull = t.pull;
    *seen = (rt_ps_seen){.min_clock = UINT64_MAX};
    uv_timer_t tick;
    uv_timer_init(&c->loop, &tick);
    tick.data = &t;
    uv_timer_start(&tick, on_tick, TICK_MS, TICK_MS);
    for (int s = 0; s < c->shards; s++) {
        rt_ps_span sp = rt_ps_shard_span(c->n, c->shards, s);
        c->pending[s] = sp.hi > sp.lo;
    }
    uint64_t deadline = uv_hrtime() + (uint64_t)c->timeout_ms * 1000000ull;
    int backoff = RETRY_FIRST_MS, rc = 0, todo = 1;
    while (todo && rc == 0) {
        for (int s = 0; s < c->shards && rc == 0; s++) {
            if (!c->pending[s])
                continue;
            if ((rc = start(c, &t, s, values, kind, step))) {
                snprintf(err, errlen, "cannot start a %s of shard %d: %s",
                         pull ? "pull" : "push", s, ferry_strerror(rc));
            } else {
                c->started[s] = true;
                t.running++;
            }
        }
        while (t.running) {
            say_where(c, pull);
            uv_run(&c->loop, UV_RUN_ONCE);
        }
        todo = 0;
        for (int s = 0; s < c->shards; s++) {
            if (!c->started[s])
                continue;
            c->started[s] = false;
            rpc_call *call = &c->calls[s];
            int r = rt_ps_shard_rank(s, c->world);
            int res = call->result;
            /* Not there yet: the holder has not opened the session, or its
             * server is still coming up. Once a peer has answered, either
             * means it is gone (or came back as a new process without the
             * session). */
            bool early = !c->answered[r] && (res == FERRY_ENOENT || res == FERRY_EUNAVAIL);
            if (res == 0) {
                c->answered[r] = true;
                c->pending[s] = false;
                if (rc == 0)
                    rc = take(c, &t, s, params, seen, err, errlen);
            } else if (early && !t.cancel_sent && uv_hrtime() < deadline) {
                todo++;
            } else if (rc == 0) {
                rc = t.cancel_sent ? FERRY_ECANCELED : res;
                if (rc == FERRY_ETIMEDOUT)
                    snprintf(err, errlen,
                             "shard %d on rank %d (%s) did not answer a %s within %.1f s",
                             s, r, c->peers[r], pull ? "pull" : "push",
                             (double)c->timeout_ms / 1e3);
                else if (rc == FERRY_ECANCELED)
                    snprintf(err, errlen, "cancelled while waiting for shard %d", s);
                else
                    snprintf(err, errlen, "shard %d on rank %d (%s): %s", s, r, c->peers[r],
                             call->errmsg ? call->errmsg : ferry_strerror(res));
            }
            rpc_call_fini(call);
        }
        if (todo && rc == 0) {
            uv_sleep((unsigned)backoff);
            backoff = backoff * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : backoff * 2;
        }
    }
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(&c->loop, UV_RUN_NOWAIT);
    rt_where_phase(pull ? "pulled from the shards" : "pushed to the shards", -1);
    wait_lent(c);
    return rc;
}

int rt_ps_pull(rt_ps_client *c, float *params, uint64_t worker_step, uint64_t until_samples,
               rt_ps_seen *seen, bool (*cancelled)(void *), void *arg, char *err,
               size_t errlen)
{
    trip t = {.c = c, .pull = true, .until = until_samples, .cancelled = cancelled, .arg = arg};
    return trip_run(c, t, params, NULL, 0, worker_step, seen, err, errlen);
}

int rt_ps_rejoin(rt_ps_client *c, float *params, rt_ps_seen *seen,
                 bool (*cancelled)(void *), void *arg, char *err, size_t errlen)
{
    trip t = {.c = c, .pull = true, .rejoin = true, .cancelled = cancelled, .arg = arg};
    return trip_run(c, t, params, NULL, 0, 0, seen, err, errlen);
}

int rt_ps_push(rt_ps_client *c, const float *values, int kind, uint64_t worker_step,
               uint32_t samples, rt_ps_seen *seen, bool (*cancelled)(void *), void *arg,
               char *err, size_t errlen)
{
    trip t = {.c = c, .samples = samples, .cancelled = cancelled, .arg = arg};
    return trip_run(c, t, NULL, values, kind, worker_step, seen, err, errlen);
}

int rt_ps_push_pull(rt_ps_client *c, const float *values, int kind, uint64_t worker_step,
                    uint32_t samples, float *params, uint64_t until_samples,
                    rt_ps_seen *seen, bool (*cancelled)(void *), void *arg, char *err,
                    size_t errlen)
{
    trip t = {.c = c,
              .and_pull = true,
              .until = until_samples,
              .samples = samples,
              .cancelled = cancelled,
              .arg = arg};
    return trip_run(c, t, params, values, kind, worker_step, seen, err, errlen);
}

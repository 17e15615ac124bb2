/* The built-in functions of a module with a model: a master trains it on a
 * worker by calling "ferry.train.begin", then "ferry.train.epoch" once an
 * epoch (each reply is a progress line), then "ferry.train.end". They run on
 * the worker's executor like any task function, so deadlines, cancellation,
 * crash records and diagnosis apply to training as they do to calls.
 *
 * A worker trains one session at a time, and the session has an owner: the
 * submitter that began it (named by the begin's `submitter` and the peer
 * address it called from). A second begin while the session lives is
 * refused with a message naming both. A session whose owner is gone is
 * reclaimed by the next begin: one left idle (no call of its own) for its
 * `idle_ms` (30 s by default: epochs follow each other within milliseconds
 * while a submitter lives), or one whose last epoch failed or was cancelled
 * (a submitter never goes on with a session after that: sync mode stops
 * with the step, async mode drops the worker, and a caller that hung up is
 * gone). A begin for the same session id is its owner's and replaces it.
 *
 * A start that fails leaves nothing behind: a begin polls its caller while
 * it waits for its peers (rank 0's initial parameters in sync mode, every
 * rank's shards in async mode: no begin returns before the others have
 * got that far), so a caller who hung up
 * or a run that failed on another rank (the master cancels the other
 * begins) ends it within a tick and frees its session; an end for a session
 * that a begin or an epoch still holds stops that call first, so that the
 * master's cleanup reaches every rank. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <uv.h>

#include "ferry.pb-c.h"
#include "runtime/runtime_int.h"
#include "train.h"

#define FN_BEGIN "ferry.train.begin"
#define FN_EPOCH "ferry.train.epoch"
#define FN_END   "ferry.train.end"
#define FN_LEAVE "ferry.train.leave"

#define IDLE_MS_DEFAULT 30000
/* How long a begin waits for a begin or an epoch whose caller has gone to
 * end, and an end for the call it stopped: such a call sees it within a
 * tick of its collective (20 ms) or a step. */
#define ORPHAN_WAIT_MS 5000

typedef struct rt_train_session {
    uint64_t id;
    const rt_module *m;
    rt_trainer *t;
    rt_comm *comm; /* sync mode: the collectives between the ranks */
    bool busy;     /* a begin or an epoch is running; under the worker's train_lock */
    bool starting; /* that call is its begin; under train_lock */
    ferry_ctx_t *holder; /* the call that holds it busy; under train_lock */
    atomic_bool stop;    /* an end asked the call that holds it to stop */
    /* Ownership, under train_lock: who began it, when it last finished a
     * call of its own, how long it may idle, whether its owner hung up. */
    char owner[512];
    uint64_t idle_since_ns, started_ns;
    uint32_t idle_ms;
    bool abandoned;
} rt_train_session;

static void session_free(rt_train_session *s)
{
    if (!s)
        return;
    /* The session first: ops a failed step left running still use the
     * trainer's reduction buffer until it is gone. */
    rt_comm_destroy(s->comm);
    rt_trainer_destroy(s->t);
    free(s);
}

void rt_train_session_free(rt_worker *w)
{
    session_free(w->session);
    w->session = NULL;
}

static void free_peers(char **peers, int n)
{
    for (int i = 0; peers && i < n; i++)
        free(peers[i]);
    free(peers);
}

/* Packs `msg` as the call's result. */
static int reply(ferry_ctx_t *ctx, const ProtobufCMessage *msg, ferry_bytes_t *out)
{
    size_t len = protobuf_c_message_get_packed_size(msg);
    void *buf = ctx->ops->result(ctx, out, len);
    if (!buf)
        return ctx->ops->fail(ctx, FERRY_ENOMEM, "no memory for a reply of %zu bytes",
                              len);
    protobuf_c_message_pack(msg, buf);
    return 0;
}

/* A peer the collectives lost is this function's failure, not the
 * master's link to this worker: UNAVAILABLE or DEADLINE_EXCEEDED on the
 * reply would read as "worker N connection lost" at the master. The text
 * names the peer. */
static int as_function_error(int rc)
{
    return rc == FERRY_EUNAVAIL || rc == FERRY_ETIMEDOUT ? FERRY_EPIPE : rc;
}

/* Whether `s`, not running a call, may be taken by another begin; else
 * fails the call with a text naming the session and its owner. Under
 * train_lock. */
static int may_reclaim(ferry_ctx_t *ctx, const rt_train_session *s, uint64_t id)
{
    if (!s || s->id == id)
        return 0;
    uint64_t now = uv_hrtime();
    double idle_s = (double)(now - s->idle_since_ns) / 1e9;
    if (!s->busy && (s->abandoned || idle_s * 1000 >= s->idle_ms))
        return 0;
    char state[96];
    if (s->busy && s->starting)
        snprintf(state, sizeof state,
                 "still starting (loading its data, or waiting for its peers)");
    else if (s->busy)
        snprintf(state, sizeof state, "running an epoch");
    else
        snprintf(state, sizeof state, "between epochs, idle %.1f s of the %.0f s after which "
                                      "it is reclaimed",
                 idle_s, s->idle_ms / 1000.0);
    return ctx->ops->fail(ctx, FERRY_EBUSY,
                          "this worker is training %s for another submitter: session "
                          "%016llx, begun %.0f s ago by %s; %s",
                          s->m->name, (unsigned long long)s->id,
                          (double)(now - s->started_ns) / 1e9, s->owner, state);
}

/* Whether the call holding `s` is ending: its caller hung up, or an end
 * asked it to stop. Under train_lock. */
static bool holder_leaving(const rt_train_session *s)
{
    return s->busy && s->holder &&
           (s->holder->ops->cancelled(s->holder) || atomic_load(&s->stop));
}

/* A begin or an epoch whose caller has hung up (a submit killed, or a
 * start that failed elsewhere) is ending: a begin from its successor waits
 * for it rather than refuse. Called and returns with train_lock held. */
static void wait_for_orphaned_call(rt_worker *w, uint64_t id)
{
    uint64_t until = uv_hrtime() + ORPHAN_WAIT_MS * 1000000ull;
    for (;;) {
        rt_train_session *s = w->session;
        if (!s || s->id == id || !holder_leaving(s) || uv_hrtime() >= until)
            return;
        pthread_mutex_unlock(&w->train_lock);
        usleep(5000);
        pthread_mutex_lock(&w->train_lock);
    }
}

/* An end for session `id` while a begin or an epoch holds it: the master
 * ends a run that failed elsewhere, and nothing is to go on with it. That
 * call is asked to stop and waited for, so that the end frees the session
 * instead of being refused as busy. Called and returns with train_lock
 * held. */
static void stop_holder(rt_worker *w, uint64_t id)
{
    rt_train_session *s = w->session;
    if (!s || s->id != id || !s->busy)
        return;
    atomic_store(&s->stop, true);
    s->abandoned = true;
    uint64_t until = uv_hrtime() + ORPHAN_WAIT_MS * 1000000ull;
    while ((s = w->session) && s->id == id && s->busy && uv_hrtime() < until) {
        pthread_mutex_unlock(&w->train_lock);
        usleep(5000);
        pthread_mutex_lock(&w->train_lock);
    }
}

/* What a begin or an epoch polls while it waits: its caller gone, or an
 * end for its session. */
typedef struct holder_check {
    ferry_ctx_t *ctx;
    rt_train_session *s;
} holder_check;

static bool holder_cancelled(void *arg)
{
    holder_check *h = arg;
    return h->ctx->ops->cancelled(h->ctx) || atomic_load(&h->s->stop);
}

static int bad_argument(ferry_ctx_t *ctx, const char *what)
{
    return ctx->ops->fail(ctx, FERRY_EINVAL, "the argument is not a %s message", what);
}

static int train_begin(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    rt_worker *w = rt_call_worker(ctx);
    const rt_module *m = rt_call_module(ctx);
    Ferry__TrainBegin *a = ferry__train_begin__unpack(NULL, in->len, in->data);
    if (!a)
        return bad_argument(ctx, "TrainBegin");
    int rc = 0;
    char data_dir[4096];
    snprintf(data_dir, sizeof data_dir, "%s", a->data_dir);
    rt_train_opts o = {
        .batch = (int)(a->batch > 1 << 20 ? 1 << 20 : a->batch),
        .optim = {.kind = a->optimizer[0] ? rt_optim_parse(a->optimizer) : RT_OPT_SGD,
                  .lr = a->lr,
                  .momentum = a->momentum,
                  .weight_decay = a->weight_decay},
        .seed = a->seed,
        .rank = 0,
        .world = 1,
        .data_dir = data_dir[0] ? data_dir : NULL,
        .eval_batch = (int)(a->eval_batch > 1 << 16 ? 1 << 16 : a->eval_batch),
    };
    o.epochs = (int)(a->epochs > 1000000 ? 1000000 : a->epochs);
    if (a->precision[0] && rt_precision_parse(a->precision, &o.precision) != 0)
        rc = ctx->ops->fail(ctx, FERRY_EINVAL, "unknown precision '%s' (fp32, tf32 or bf16)",
                            a->precision);
    o.cosine = strcmp(a->schedule, "cosine") == 0;
    if (a->schedule[0] && !o.cosine && strcmp(a->schedule, "constant") != 0)
        rc = ctx->ops->fail(ctx, FERRY_EINVAL,
                            "unknown schedule '%s' (constant or cosine)", a->schedule);
    uint64_t id = a->session;
    /* Sync mode: the collective session is named by the training session's
     * id, and every rank gets the same chunk size from the master. */
    rt_comm_opts co = {.session = id,
                       .rank = (int)a->rank,
                       .world = a->world > 1 ? (int)a->world : 1,
                       .chunk_bytes = a->chunk_bytes,
                       .compress = (rt_compress)rt_compress_parse(a->grad_compression),
                       .timeout_ms = a->timeout_ms};
    /* The master's secret for the run's chunks: a begin without one starts
     * no collective session (rt_comm_create says so). */
    uint8_t secret[RT_COMM_SECRET_BYTES];
    _Static_assert(RT_COMM_SECRET_BYTES == RT_PS_SECRET_BYTES,
                   "one secret keys a run's chunks and its shards");
    if (a->secret.len == sizeof secret) {
        memcpy(secret, a->secret.data, sizeof secret);
        co.secret = secret;
    }
    if (a->secret.len)
        OPENSSL_cleanse(a->secret.data, a->secret.len);
    size_t bucket_bytes = a->bucket_bytes;
    bool async = strcmp(a->mode, "async") == 0;
    if (rc == 0 && a->mode[0] && !async && strcmp(a->mode, "sync") != 0)
        rc = ctx->ops->fail(ctx, FERRY_EINVAL, "unknown mode '%s' (sync or async)", a->mode);
    int algo = rt_ps_algo_parse(a->algo);
    if (rc == 0 && async && algo < 0)
        rc = ctx->ops->fail(ctx, FERRY_EINVAL,
                            "unknown algorithm '%s' (downpour, dynsgd or easgd)", a->algo);
    if (rc == 0 && async && (a->ps_shards > RT_PS_MAX_SHARDS || a->alpha < 0 || a->alpha >= 1))
        rc = ctx->ops->fail(ctx, FERRY_EINVAL,
                            "%u shards, alpha %g: at most %d shards, alpha in [0, 1)",
                            a->ps_shards, a->alpha, RT_PS_MAX_SHARDS);
    char **peers = NULL;
    if (rc == 0 && co.world > 1) {
        if (a->n_peers != (size_t)co.world || a->rank >= a->world)
            rc = ctx->ops->fail(ctx, FERRY_EINVAL,
                                "rank %u of %u workers with %zu peer addresses", a->rank,
                                a->world, a->n_peers);
        else if (a->batch && a->batch < a->world)
            rc = ctx->ops->fail(ctx, FERRY_EINVAL,
                                "the global batch of %u is smaller than the %u workers: "
                                "each needs at least one sample a step",
                                a->batch, a->world);
        else if (a->chunk_bytes && a->chunk_bytes < RT_TRAIN_MIN_CHUNK_BYTES)
            rc = ctx->ops->fail(ctx, FERRY_EINVAL,
                                "all-reduce chunks of %u bytes: at least %d (each chunk "
                                "is one call between workers)",
                                a->chunk_bytes, RT_TRAIN_MIN_CHUNK_BYTES);
        else if ((int)co.compress < 0)
            rc = ctx->ops->fail(ctx, FERRY_EINVAL,
                                "unknown gradient compression '%s' (none, lz4 or fp16)",
                                a->grad_compression);
        else if (!(peers = calloc(a->n_peers, sizeof *peers)))
            rc = FERRY_ENOMEM;
        for (size_t i = 0; rc == 0 && i < a->n_peers; i++)
            if (!(peers[i] = strdup(a->peers[i])))
                rc = FERRY_ENOMEM;
    }
    if (!o.optim.kind)
        rc = ctx->ops->fail(ctx, FERRY_EINVAL, "unknown optimizer '%s' (sgd or adam)",
                            a->optimizer);
    uint32_t ps_shards = a->ps_shards, push_every = a->push_every,
             pull_every = a->pull_every, tau = a->tau;
    int staleness = a->staleness;
    float alpha = a->alpha;
    uint32_t idle_ms = a->idle_ms ? a->idle_ms : IDLE_MS_DEFAULT;
    char submitter[256];
    const char *who = a->submitter[0] ? a->submitter : "an unnamed submitter";
    rpc_escape(submitter, sizeof submitter, who, strlen(who)); /* from the wire */
    ferry__train_begin__free_unpacked(a, NULL);
    if (rc) {
        free_peers(peers, co.world);
        OPENSSL_cleanse(secret, sizeof secret);
        return rc;
    }

    pthread_mutex_lock(&w->train_lock);
    wait_for_orphaned_call(w, id);
    rt_train_session *old = w->session;
    if (old && old->busy && old->id == id) {
        pthread_mutex_unlock(&w->train_lock);
        free_peers(peers, co.world);
        OPENSSL_cleanse(secret, sizeof secret);
        return ctx->ops->fail(ctx, FERRY_EBUSY, "session %016llx is busy",
                              (unsigned long long)id);
    }
    if ((rc = may_reclaim(ctx, old, id))) {
        pthread_mutex_unlock(&w->train_lock);
        free_peers(peers, co.world);
        OPENSSL_cleanse(secret, sizeof secret);
        return rc;
    }
    /* Marked busy while the new one is built, so that no other begin or
     * epoch slips in; the old one goes first, freeing its memory. */
    rt_train_session *s = calloc(1, sizeof *s);
    if (!s) {
        pthread_mutex_unlock(&w->train_lock);
        free_peers(peers, co.world);
        OPENSSL_cleanse(secret, sizeof secret);
        return FERRY_ENOMEM;
    }
    uint64_t now = uv_hrtime();
    *s = (rt_train_session){.id = id,
                            .m = m,
                            .busy = true,
                            .starting = true,
                            .holder = ctx,
                            .idle_ms = idle_ms,
                            .started_ns = now,
                            .idle_since_ns = now};
    atomic_init(&s->stop, false);
    holder_check hc = {ctx, s};
    snprintf(s->owner, sizeof s->owner, "%s from %s", submitter, rt_call_peer(ctx));
    w->session = s;
    pthread_mutex_unlock(&w->train_lock);
    co.token = w->token; /* peers check it like any caller's */
    if (old)
        ctx->ops->log(ctx, FERRY_LOG_WARN, "session %016llx of %s (%s) reclaimed: %s",
                      (unsigned long long)old->id, old->m->name, old->owner,
                      old->id == id        ? "its owner began it again"
                      : old->abandoned     ? "its last epoch failed or was cancelled"
                                           : "it was left idle");
    session_free(old);

    char err[1024] = "";
    o.cancelled = holder_cancelled;
    o.cancel_arg = &hc;
    if (co.world > 1 && async) {
        o.rank = co.rank;
        o.world = co.world;
        o.ps_store = w->ps;
        o.session = id;
        o.peers = (const char *const *)peers;
        o.token = w->token;
        o.secret = co.secret;
        o.timeout_ms = co.timeout_ms;
        o.ps_shards = (int)ps_shards;
        o.staleness = staleness;
        o.push_every = (int)push_every;
        o.pull_every = (int)pull_every;
        o.algo = (rt_ps_algo)algo;
        o.alpha = alpha;
        o.tau = (int)tau;
    } else if (co.world > 1) {
        co.peers = (const char *const *)peers;
        rc = rt_comm_create(w->hub, &co, &s->comm, err, sizeof err);
        o.rank = co.rank;
        o.world = co.world;
        o.comm = s->comm;
        o.bucket_bytes = bucket_bytes;
    }
    OPENSSL_cleanse(secret, sizeof secret);
    if (rc == 0)
        rc = rt_trainer_create(m->task->model, ctx->device, &o, &s->t, err, sizeof err);
    free_peers(peers, co.world);
    /* Async ranks start on their own: a begin that returned before the
     * others could leave its session to idle out if the submit were killed
     * meanwhile. As in sync mode (whose start ends with rank 0's
     * broadcast), no begin returns before every rank has its data and its
     * shards, so that a submit killed in the start finds every begin still
     * running, and each frees its session as it sees its caller gone. */
    if (rc == 0 && async && co.world > 1) {
        ctx->ops->log(ctx, FERRY_LOG_INFO,
                      "session %016llx: rank %d has its data and shards, and waits for "
                      "every rank's",
                      (unsigned long long)id, co.rank);
        rc = rt_trainer_peers_ready(s->t, holder_cancelled, &hc, err, sizeof err);
    }
    /* A caller who hung up once everything was built would leave the
     * session to idle out: it is nobody's. */
    if (rc == 0 && holder_cancelled(&hc)) {
        rc = FERRY_ECANCELED;
        snprintf(err, sizeof err, "%s",
                 atomic_load(&s->stop) ? "the session was ended while it started"
                                       : "the caller hung up while the session started");
    }
    /* Read while the session is still this call's: once it is not busy, an
     * end (or a begin of the same id) may free it at once. */
    Ferry__TrainBeginReply r = FERRY__TRAIN_BEGIN_REPLY__INIT;
    if (rc == 0) {
        r.params = rt_model_param_count(m->task->model);
        r.train_samples = rt_trainer_dataset(s->t, true)->n;
        r.test_samples = rt_trainer_dataset(s->t, false)->n;
        r.device = (char *)ctx->device->description;
        r.steps_per_epoch = rt_trainer_steps(s->t);
        r.rank = (uint32_t)o.rank;
        r.world = (uint32_t)o.world;
        r.buckets = (uint32_t)rt_trainer_buckets(s->t);
    }
    pthread_mutex_lock(&w->train_lock);
    s->busy = false;
    s->starting = false;
    s->holder = NULL;
    s->idle_since_ns = uv_hrtime();
    if (rc) {
        w->session = NULL;
        pthread_mutex_unlock(&w->train_lock);
        session_free(s);
        return ctx->ops->fail(ctx, as_function_error(rc), "%s", err);
    }
    pthread_mutex_unlock(&w->train_lock);
    return reply(ctx, &r.base, out);
}

/* The session `id`, marked busy; NULL with the call failed when there is none
 * or it is busy. */
static rt_train_session *take(ferry_ctx_t *ctx, uint64_t id, int *rc)
{
    rt_worker *w = rt_call_worker(ctx);
    pthread_mutex_lock(&w->train_lock);
    rt_train_session *s = w->session;
    if (!s || s->id != id || s->busy) {
        pthread_mutex_unlock(&w->train_lock);
        *rc =
            s && s->id == id
                ? ctx->ops->fail(ctx, FERRY_EBUSY, "session %llu is busy",
                                 (unsigned long long)id)
                : ctx->ops->fail(ctx, FERRY_ENOENT,
                                 "no training session %llu on this worker (it ended, was "
                                 "replaced, or the worker restarted)",
                                 (unsigned long long)id);
        return NULL;
    }
    s->busy = true;
    s->holder = ctx;
    pthread_mutex_unlock(&w->train_lock);
    return s;
}

static void give_back(ferry_ctx_t *ctx, rt_train_session *s, bool failed)
{
    rt_worker *w = rt_call_worker(ctx);
    pthread_mutex_lock(&w->train_lock);
    s->busy = false;
    s->holder = NULL;
    s->idle_since_ns = uv_hrtime();
    /* A failed epoch ends the run for its submitter; a caller that hung up
     * or gave up never goes on with the session either. */
    s->abandoned |= failed || ctx->ops->cancelled(ctx);
    pthread_mutex_unlock(&w->train_lock);
}

static int train_epoch(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    Ferry__TrainEpoch *a = ferry__train_epoch__unpack(NULL, in->len, in->data);
    if (!a)
        return bad_argument(ctx, "TrainEpoch");
    uint64_t id = a->session;
    ferry__train_epoch__free_unpacked(a, NULL);
    int rc;
    rt_train_session *s = take(ctx, id, &rc);
    if (!s)
        return rc;
    rt_epoch_stats st;
    char err[1024] = "";
    holder_check hc = {ctx, s};
    rc = rt_trainer_epoch(s->t, &st, holder_cancelled, &hc, err, sizeof err);
    give_back(ctx, s, rc != 0);
    if (rc)
        return ctx->ops->fail(ctx, as_function_error(rc), "%s", err);
    Ferry__TrainEpochReply r = FERRY__TRAIN_EPOCH_REPLY__INIT;
    r.epoch = (uint32_t)st.epoch;
    r.train_loss = st.train_loss;
    r.test_loss = st.test_loss;
    r.test_accuracy = st.test_accuracy;
    r.samples = st.samples;
    r.train_s = st.train_s;
    r.eval_s = st.eval_s;
    r.samples_per_s = st.samples_per_s;
    r.allreduce_s = st.allreduce_s;
    r.compute_s = st.compute_s;
    r.local_samples = st.local_samples;
    r.eval_samples = st.eval_samples;
    r.pushes = st.pushes;
    r.ps_wait_s = st.ps_wait_s;
    r.steps = st.steps;
    if (st.shard.pushes) {
        r.n_staleness = RT_PS_STALE_BUCKETS;
        r.staleness = st.shard.staleness;
    }
    Ferry__ModelMetric mm[FERRY_MODEL_METRICS_MAX], *mp[FERRY_MODEL_METRICS_MAX];
    for (int i = 0; i < st.n_metrics; i++) {
        ferry__model_metric__init(&mm[i]);
        mm[i].name = st.metrics[i].name;
        mm[i].value = st.metrics[i].value;
        mp[i] = &mm[i];
    }
    r.n_metrics = (size_t)st.n_metrics;
    r.metrics = mp;
    return reply(ctx, &r.base, out);
}

static int train_end(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    rt_worker *w = rt_call_worker(ctx);
    Ferry__TrainEnd *a = ferry__train_end__unpack(NULL, in->len, in->data);
    if (!a)
        return bad_argument(ctx, "TrainEnd");
    uint64_t id = a->session;
    bool discard = a->discard;
    ferry__train_end__free_unpacked(a, NULL);
    pthread_mutex_lock(&w->train_lock);
    stop_holder(w, id);
    pthread_mutex_unlock(&w->train_lock);
    int rc;
    rt_train_session *s = take(ctx, id, &rc);
    if (!s)
        return rc;
    pthread_mutex_lock(&w->train_lock);
    w->session = NULL;
    pthread_mutex_unlock(&w->train_lock);

    Ferry__TrainEndReply r = FERRY__TRAIN_END_REPLY__INIT;
    if (discard) {
        session_free(s);
        return reply(ctx, &r.base, out);
    }
    size_t n = rt_trainer_params_len(s->t);
    float *host = malloc(n * sizeof *host);
    char hex[RT_SHA256_HEX];
    rc = host ? rt_trainer_params(s->t, host) : FERRY_ENOMEM;
    if (rc == 0)
        rt_sha256_hex(host, n * sizeof *host, hex);
    free(host);
    size_t params = rt_model_param_count(s->m->task->model);
    session_free(s);
    if (rc)
        return ctx->ops->fail(ctx, rc, "cannot read the parameters back: %s",
                              ferry_strerror(rc));
    r.params_sha256 = hex;
    r.params = params;
    return reply(ctx, &r.base, out);
}

static int train_leave(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    rt_worker *w = rt_call_worker(ctx);
    Ferry__TrainLeave *a = ferry__train_leave__unpack(NULL, in->len, in->data);
    if (!a)
        return bad_argument(ctx, "TrainLeave");
    uint64_t id = a->session;
    int rank = (int)(a->rank > 1u << 20 ? 1u << 20 : a->rank);
    ferry__train_leave__free_unpacked(a, NULL);
    /* Not through take(): the session is busy with the epoch the lost
     * rank's absence holds up. */
    if (rt_ps_leave(w->ps, id, rank))
        return ctx->ops->fail(ctx, FERRY_ENOENT,
                              "no parameter-server session %llu with a rank %d here",
                              (unsigned long long)id, rank);
    Ferry__TrainLeaveReply r = FERRY__TRAIN_LEAVE_REPLY__INIT;
    return reply(ctx, &r.base, out);
}

static const ferry_function_t builtins[] = {
    {FN_BEGIN, train_begin},
    {FN_EPOCH, train_epoch},
    {FN_END, train_end},
    {FN_LEAVE, train_leave},
};

ferry_fn_t rt_builtin_function(const rt_module *m, const char *name)
{
    if (!m->task->model)
        return NULL;
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (strcmp(builtins[i].name, name) == 0)
            return builtins[i].fn;
    return NULL;
}

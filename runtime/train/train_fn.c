/* The built-in functions of a module with a model: a master trains it on a
 * worker by calling "ferry.train.begin", then "ferry.train.epoch" once an
 * epoch (each reply is a progress line), then "ferry.train.end". They run on
 * the worker's executor like any task function, so deadlines, cancellation,
 * crash records and diagnosis apply to training as they do to calls.
 *
 * A worker trains one session at a time, owned by the submitter that began
 * it (session.c says when another may take it): left idle for its
 * `idle_ms` (30 s by default: epochs follow each other within milliseconds
 * while a submitter lives), or after a failed or cancelled epoch (sync
 * mode stops with the step, async mode drops the worker, and a caller that
 * hung up is gone), it is reclaimed by the next begin.
 *
 * A start that fails leaves nothing behind: a begin polls its caller while
 * it waits for its peers (rank 0's initial parameters in sync mode, every
 * rank's shards in async mode: no begin returns before the others have
 * got that far), so a caller who hung up
 * or a run that failed on another rank (the master cancels the other
 * begins) ends it within a tick and frees its session; an end for a session
 * that a begin or an epoch still holds stops that call first, so that the
 * master's cleanup reaches every rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "proto/proto.h"
#include "checkpoint.h"
#include "session.h"
#include "tensors.h"
#include "timeline.h"

#define FN_BEGIN "ferry.train.begin"
#define FN_EPOCH "ferry.train.epoch"
#define FN_END   "ferry.train.end"
#define FN_LEAVE "ferry.train.leave"

#define IDLE_MS_DEFAULT 30000

static void free_peers(char **peers, int n)
{
    for (int i = 0; peers && i < n; i++)
        free(peers[i]);
    free(peers);
}

/* Hands the packed head `b` back as the call's result; rc is its pack's. */
static int reply(ferry_ctx_t *ctx, int rc, proto_bytes *b, ferry_bytes_t *out)
{
    size_t len = b->len;
    void *buf = rc ? NULL : ctx->ops->result(ctx, out, len);
    if (buf && len)
        memcpy(buf, b->data, len);
    proto_bytes_fini(b);
    if (!buf)
        return ctx->ops->fail(ctx, rc ? rc : FERRY_ENOMEM,
                              "no memory for a reply of %zu bytes", len);
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

static bool call_cancelled(void *ctx)
{
    return ((ferry_ctx_t *)ctx)->ops->cancelled(ctx);
}

static int bad_argument(ferry_ctx_t *ctx, const char *what)
{
    return ctx->ops->fail(ctx, FERRY_EINVAL, "the argument is not a %s message", what);
}

/* A begin's arguments, unpacked and checked. */
typedef struct begin_args {
    proto_train_begin *msg; /* freed when the begin returns */
    uint64_t id;
    rt_train_opts o;
    rt_comm_opts co;
    char data_dir[4096];
    char shipped[4][4096]; /* the data files --ship-data sent, where they are here */
    rt_data_source src; /* a user's own files: borrows msg's strings */
    /* The master's secret for the run's chunks or pushes and pulls, wiped
     * in one place (train_begin) once the collective session or the shards
     * have their own copy. */
    uint8_t secret[RT_COMM_SECRET_BYTES];
    _Static_assert(RT_COMM_SECRET_BYTES == RT_PS_SECRET_BYTES,
                   "one secret keys a run's chunks and its shards");
    char **peers; /* co.world of them, with world > 1 */
    rt_tensors init; /* --init-from's, borrowing msg's */
    bool async;
    int algo;
    uint32_t idle_ms;
    char submitter[256];
} begin_args;

/* The trainer's options (`m`'s): the ones every mode has. A wrong one fails the call (the
 * last failure's text is the one the caller reads). */
static int parse_trainer(ferry_ctx_t *ctx, const proto_train_begin *m, begin_args *ba)
{
    const proto_train_spec *sp = &m->spec;
    int rc = 0;
    snprintf(ba->data_dir, sizeof ba->data_dir, "%s", sp->data_dir);
    ba->o = (rt_train_opts){
        .batch = (int)(sp->batch > 1 << 20 ? 1 << 20 : sp->batch),
        .optim = {.kind = sp->optimizer[0] ? rt_optim_parse(sp->optimizer) : RT_OPT_SGD,
                  .lr = sp->lr,
                  .momentum = sp->momentum,
                  .weight_decay = sp->weight_decay},
        .seed = sp->seed,
        .rank = 0,
        .world = 1,
        .data_dir = ba->data_dir[0] ? ba->data_dir : NULL,
        .data = rt_data_source_from_spec(sp, &ba->src) ? &ba->src : NULL,
        .eval_batch = (int)(m->eval_batch > 1 << 16 ? 1 << 16 : m->eval_batch),
    };
    rt_train_opts *o = &ba->o;
    o->epochs = (int)(sp->epochs > 1000000 ? 1000000 : sp->epochs);
    if (sp->precision[0] && rt_precision_parse(sp->precision, &o->precision) != 0)
        rc = ctx->ops->fail(ctx, FERRY_EINVAL,
                            "unknown precision '%s' (fp32, tf32 or bf16)", sp->precision);
    o->ckpt_dir = sp->checkpoint_dir[0] ? sp->checkpoint_dir : NULL;
    o->ckpt_every = sp->checkpoint_every[0] ? sp->checkpoint_every : NULL;
    o->ckpt_keep = (int)(sp->keep > 10000 ? 10000 : sp->keep);
    o->resume = sp->resume[0] ? sp->resume : NULL;
    o->cosine = strcmp(sp->schedule, "cosine") == 0;
    o->timeline = m->run.timeline;
    if (sp->schedule[0] && !o->cosine && strcmp(sp->schedule, "constant") != 0)
        rc = ctx->ops->fail(ctx, FERRY_EINVAL,
                            "unknown schedule '%s' (constant or cosine)", sp->schedule);
    return rc;
}

/* The ranks' options: the mode, the collective session's (sync) and the
 * parameter server's (async), and the peers' addresses. Checked only when
 * nothing failed before (`rc`). */
static int parse_ranks(ferry_ctx_t *ctx, const proto_train_begin *m, begin_args *ba,
                       int rc)
{
    const proto_train_spec *sp = &m->spec;
    const proto_train_begin_run *run = &m->run;
    /* Sync mode: the collective session is named by the training session's
     * id, and every rank gets the same chunk size from the master. */
    ba->co =
        (rt_comm_opts){.session = ba->id,
                       .rank = (int)run->rank,
                       .world = run->world > 1 ? (int)run->world : 1,
                       .chunk_bytes = (uint32_t)sp->chunk_bytes,
                       .compress = (rt_compress)rt_compress_parse(sp->grad_compression),
                       .timeout_ms = (uint32_t)sp->timeout_ms};
    /* A begin without a secret starts no collective session (rt_comm_create
     * says so). */
    if (run->secret_len == sizeof ba->secret) {
        memcpy(ba->secret, run->secret, sizeof ba->secret);
        ba->co.secret = ba->secret;
    }
    ba->async = strcmp(sp->mode, "async") == 0;
    if (rc == 0 && sp->mode[0] && !ba->async && strcmp(sp->mode, "sync") != 0)
        rc = ctx->ops->fail(ctx, FERRY_EINVAL, "unknown mode '%s' (sync or async)",
                            sp->mode);
    ba->algo = rt_ps_algo_parse(sp->algo);
    if (rc == 0 && ba->async && ba->algo < 0)
        rc = ctx->ops->fail(ctx, FERRY_EINVAL,
                            "unknown algorithm '%s' (downpour, dynsgd or easgd)",
                            sp->algo);
    if (rc == 0 && ba->async &&
        (sp->ps_shards > RT_PS_MAX_SHARDS || sp->alpha < 0 || sp->alpha >= 1))
        rc = ctx->ops->fail(ctx, FERRY_EINVAL,
                            "%ld shards, alpha %g: at most %d shards, alpha in [0, 1)",
                            sp->ps_shards, sp->alpha, RT_PS_MAX_SHARDS);
    if (rc || ba->co.world <= 1)
        return rc;
    if (run->n_peers != (size_t)ba->co.world || run->rank >= run->world)
        rc = ctx->ops->fail(ctx, FERRY_EINVAL,
                            "rank %u of %u workers with %zu peer addresses", run->rank,
                            run->world, run->n_peers);
    else if (sp->batch && sp->batch < run->world)
        rc = ctx->ops->fail(ctx, FERRY_EINVAL,
                            "the global batch of %ld is smaller than the %u workers: "
                            "each needs at least one sample a step",
                            sp->batch, run->world);
    else if (sp->chunk_bytes && sp->chunk_bytes < RT_TRAIN_MIN_CHUNK_BYTES)
        rc = ctx->ops->fail(ctx, FERRY_EINVAL,
                            "all-reduce chunks of %ld bytes: at least %d (each chunk "
                            "is one call between workers)",
                            sp->chunk_bytes, RT_TRAIN_MIN_CHUNK_BYTES);
    else if ((int)ba->co.compress < 0)
        rc = ctx->ops->fail(ctx, FERRY_EINVAL,
                            "unknown gradient compression '%s' (none, lz4 or fp16)",
                            sp->grad_compression);
    else if (!(ba->peers = calloc(run->n_peers, sizeof *ba->peers)))
        rc = FERRY_ENOMEM;
    for (size_t i = 0; rc == 0 && i < run->n_peers; i++)
        if (!(ba->peers[i] = strdup(run->peers[i])))
            rc = FERRY_ENOMEM;
    return rc;
}

/* The data options that name files shipped to this worker's data cache
 * ("ferry-data:..."), pointed at where they are. A file the cache no
 * longer holds fails the call. */
static int resolve_shipped(ferry_ctx_t *ctx, proto_train_spec *sp, begin_args *ba)
{
    const char **paths[] = {&sp->data_dir, &sp->labels, &sp->test_data, &sp->test_labels};
    rt_datacache *cache = rt_call_worker(ctx)->datacache;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        const char *p = *paths[i];
        if (!p || strncmp(p, RT_DATA_REF_PREFIX, strlen(RT_DATA_REF_PREFIX)) != 0)
            continue;
        char why[512];
        int rc = rt_datacache_resolve(cache, p, ba->shipped[i], sizeof ba->shipped[i],
                                      why, sizeof why);
        if (rc)
            return ctx->ops->fail(ctx, rc, "%s", why);
        *paths[i] = ba->shipped[i];
    }
    return 0;
}

/* Unpacks and checks a TrainBegin into `ba` (zeroed first). A wrong
 * argument fails the call. */
static int parse_begin(ferry_ctx_t *ctx, const ferry_bytes_t *in, begin_args *ba)
{
    memset(ba, 0, sizeof *ba);
    if (proto_train_begin_unpack(in->data, in->len, &ba->msg))
        return bad_argument(ctx, "TrainBegin");
    int rc = resolve_shipped(ctx, &ba->msg->spec, ba);
    if (rc)
        return rc;
    const proto_train_begin *a = ba->msg;
    ba->id = a->run.session;
    rc = parse_trainer(ctx, a, ba);
    rc = parse_ranks(ctx, a, ba, rc);
    if (!ba->o.optim.kind)
        rc = ctx->ops->fail(ctx, FERRY_EINVAL, "unknown optimizer '%s' (sgd or adam)",
                            a->spec.optimizer);
    ba->idle_ms = a->idle_ms ? a->idle_ms : IDLE_MS_DEFAULT;
    const char *who = a->run.submitter[0] ? a->run.submitter : "an unnamed submitter";
    base_escape(ba->submitter, sizeof ba->submitter, who,
                strlen(who)); /* from the wire */
    return rc;
}

/* The mode's part of the trainer's options; in sync mode, the collective
 * session between the ranks. The secret keys the collective session's
 * chunks, or the async shards' pushes and pulls. */
static int begin_ranks(ferry_ctx_t *ctx, begin_args *ba, rt_train_session *s, char *err,
                       size_t errlen)
{
    rt_worker *w = rt_call_worker(ctx);
    rt_train_opts *o = &ba->o;
    if (ba->co.world <= 1)
        return 0;
    o->rank = ba->co.rank;
    o->world = ba->co.world;
    if (ba->async) {
        o->ps_store = w->ps;
        o->session = ba->id;
        o->peers = (const char *const *)ba->peers;
        o->token = w->token;
        o->secret = ba->co.secret; /* the shards copy it */
        o->timeout_ms = ba->co.timeout_ms;
        o->ps_shards = (int)ba->msg->spec.ps_shards;
        o->staleness = (int)ba->msg->spec.staleness;
        o->push_every = (int)ba->msg->spec.push_every;
        o->pull_every = (int)ba->msg->spec.pull_every;
        o->algo = (rt_ps_algo)ba->algo;
        o->alpha = (float)ba->msg->spec.alpha;
        o->tau = (int)ba->msg->spec.tau;
        o->rejoin_epoch = (int)ba->msg->run.rejoin_epoch;
        return 0;
    }
    ba->co.token = w->token; /* peers check it like any caller's */
    ba->co.peers = (const char *const *)ba->peers;
    int rc = rt_comm_create(w->hub, &ba->co, &s->comm, err, errlen);
    o->comm = s->comm;
    o->bucket_bytes = (size_t)ba->msg->spec.bucket_bytes;
    return rc;
}

/* The parameters a begin brings to start from (--init-from): the trainer
 * lays them out once the model has its shape, if they are its own. */
static int init_from(begin_args *ba, char *err, size_t errlen)
{
    const proto_train_begin_run *run = &ba->msg->run;
    if (ba->msg->init_malformed) {
        snprintf(err, errlen, "the parameters to start from are malformed: %zu names for "
                              "their shapes and values",
                 run->init.n);
        return FERRY_EINVAL;
    }
    ba->init = run->init;
    ba->o.init_tensors = run->init.n ? &ba->init : NULL;
    return 0;
}

/* Builds the session's trainer, polling the caller and an end for the
 * session while it waits for its peers. Async ranks start on their own: a
 * begin that returned before the others could leave its session to idle
 * out if the submit were killed meanwhile. As in sync mode (whose start
 * ends with rank 0's broadcast), no begin returns before every rank has
 * its data and its shards, so that a submit killed in the start finds
 * every begin still running, and each frees its session as it sees its
 * caller gone. */
static int begin_trainer(ferry_ctx_t *ctx, begin_args *ba, rt_train_session *s, char *err,
                         size_t errlen)
{
    int rc = init_from(ba, err, errlen);
    if (rc)
        return rc;
    rt_holder_check hc = {ctx, s};
    ba->o.ckpt_model = s->m->task->name;
    ba->o.cancelled = rt_holder_cancelled;
    ba->o.cancel_arg = &hc;
    rc = rt_trainer_create(s->m->task->model, ctx->device, &ba->o, &s->t, err, errlen);
    if (rc == 0 && ba->async && ba->co.world > 1) {
        ctx->ops->log(ctx, FERRY_LOG_INFO,
                      "session %016llx: rank %d has its data and shards, and waits for "
                      "every rank's",
                      (unsigned long long)ba->id, ba->co.rank);
        rc = rt_trainer_peers_ready(s->t, rt_holder_cancelled, &hc, err, errlen);
    }
    /* A caller who hung up once everything was built would leave the
     * session to idle out: it is nobody's. */
    if (rc == 0 && rt_holder_cancelled(&hc)) {
        rc = FERRY_ECANCELED;
        snprintf(err, errlen, "%s",
                 atomic_load(&s->stop) ? "the session was ended while it started"
                                       : "the caller hung up while the session started");
    }
    return rc;
}

static void log_reclaimed(ferry_ctx_t *ctx, const rt_train_session *old, uint64_t id)
{
    ctx->ops->log(ctx, FERRY_LOG_WARN, "session %016llx of %s (%s) reclaimed: %s",
                  (unsigned long long)old->id, old->m->name, old->owner,
                  old->id == id    ? "its owner began it again"
                  : old->abandoned ? "its last epoch failed or was cancelled"
                  : !old->held     ? "its master never held it"
                                   : "it was left idle");
}

/* A start that fails leaves nothing behind: a begin polls its caller while
 * it waits for its peers (rank 0's initial parameters in sync mode, every
 * rank's shards in async mode: no begin returns before the others have got
 * that far), so a caller who hung up or a run that failed on another rank
 * (the master cancels the other begins) ends it within a tick and frees
 * its session. */
static int train_begin(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    begin_args ba;
    rt_train_session *s = NULL, *old = NULL;
    char err[1024] = "";
    int rc = parse_begin(ctx, in, &ba);
    if (rc == 0)
        rc = rt_session_claim(ctx, ba.id, ba.submitter, ba.idle_ms, ba.co.secret, &s, &old);
    if (old)
        log_reclaimed(ctx, old, ba.id);
    rt_session_free(old);
    if (s)
        rc = begin_ranks(ctx, &ba, s, err, sizeof err);
    if (s && rc == 0)
        rc = begin_trainer(ctx, &ba, s, err, sizeof err);
    OPENSSL_cleanse(ba.secret, sizeof ba.secret);
    free_peers(ba.peers, ba.co.world);
    const char *norm = rt_data_norm_kind(ba.src.normalize, ba.o.data != NULL);
    proto_train_begin_free(ba.msg);
    if (!s) /* refused: the call says why */
        return rc;
    /* Read while the session is still this call's: once it is not busy, an
     * end (or a begin of the same id) may free it at once. */
    proto_train_begin_reply r = {0};
    if (rc == 0) {
        r.params = rt_model_param_count(s->m->task->model);
        r.train_samples = rt_trainer_dataset(s->t, true)->n;
        r.test_samples = rt_trainer_dataset(s->t, false)->n;
        r.device = (char *)ctx->device->description;
        r.steps_per_epoch = rt_trainer_steps(s->t);
        r.rank = (uint32_t)ba.o.rank;
        r.world = (uint32_t)ba.o.world;
        r.buckets = (uint32_t)rt_trainer_buckets(s->t);
        r.data_about = rt_trainer_dataset(s->t, true)->about;
        rt_predict_saved_data(s->m->task->model, rt_trainer_dataset(s->t, true), norm, &r);
    }
    rt_session_started(ctx, s, rc);
    if (rc)
        return ctx->ops->fail(ctx, as_function_error(rc), "%s", err);
    proto_bytes b;
    return reply(ctx, proto_train_begin_reply_pack(&r, &b), &b, out);
}

/* What the metrics endpoint says of training (runtime/metrics). */
static void count_epoch(rt_stats *s, const rt_epoch_stats *st, size_t steps)
{
    atomic_fetch_add(&s->train_epochs, 1);
    atomic_fetch_add(&s->train_steps, steps);
    atomic_fetch_add(&s->train_samples, st->local_samples);
    double rate = st->train_s > 0 ? (double)st->local_samples / st->train_s : 0;
    uint64_t bits;
    memcpy(&bits, &rate, sizeof bits);
    atomic_store(&s->train_rate_bits, bits);
}

/* The epoch's timeline events into its reply (none without a timeline). */
static void put_timeline(proto_train_epoch_reply *r, const rt_timeline_events *tv)
{
    r->n_timeline_what = r->n_timeline_start_ns = r->n_timeline_dur_ns = tv->n;
    r->timeline_what = (uint32_t *)tv->what;
    r->timeline_start_ns = (uint64_t *)tv->start_ns;
    r->timeline_dur_ns = (uint64_t *)tv->dur_ns;
    r->timeline_dropped = tv->dropped;
}

static int train_epoch(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    proto_train_epoch *a;
    if (proto_train_epoch_unpack(in->data, in->len, &a))
        return bad_argument(ctx, "TrainEpoch");
    uint64_t id = a->session;
    proto_free(a);
    int rc;
    rt_train_session *s = rt_session_take(ctx, id, &rc);
    if (!s)
        return rc;
    rt_epoch_stats st;
    char err[1024] = "";
    rt_holder_check hc = {ctx, s};
    rc = rt_trainer_epoch(s->t, &st, rt_holder_cancelled, &hc, err, sizeof err);
    size_t steps =
        st.steps ? st.steps : rt_trainer_steps(s->t); /* async counts its own */
    rt_timeline_events tv = {0};
    void *tl_copy = rc ? NULL : rt_timeline_copy(rt_trainer_timeline(s->t), &tv);
    char written[4160];
    rt_ckpt_take_written(s->t, written, sizeof written);
    rt_session_give_back(ctx, s, rc != 0);
    if (rc)
        return ctx->ops->fail(ctx, as_function_error(rc), "%s", err);
    count_epoch(&rt_call_worker(ctx)->stats, &st, steps);
    proto_train_epoch_reply r = {0};
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
    proto_model_metric mm[FERRY_MODEL_METRICS_MAX];
    for (int i = 0; i < st.n_metrics; i++)
        mm[i] = (proto_model_metric){.name = st.metrics[i].name,
                                     .value = st.metrics[i].value};
    r.n_metrics = (size_t)st.n_metrics;
    r.metrics = mm;
    r.n_loss_curve = (size_t)st.curve.n;
    r.loss_curve = st.curve.loss;
    r.loss_curve_every = st.curve.every;
    r.n_lr_curve = (size_t)st.lr_curve.n;
    r.lr_curve = st.lr_curve.loss;
    put_timeline(&r, &tv);
    r.checkpoint = written;
    proto_bytes b;
    rc = reply(ctx, proto_train_epoch_reply_pack(&r, &b), &b, out);
    free(tl_copy);
    return rc;
}

static int train_end(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    rt_worker *w = rt_call_worker(ctx);
    proto_train_end *a;
    if (proto_train_end_unpack(in->data, in->len, &a))
        return bad_argument(ctx, "TrainEnd");
    uint64_t id = a->session;
    bool discard = a->discard, with_params = a->with_params;
    proto_free(a);
    rt_session_stop_holder(w, id);
    int rc;
    rt_train_session *s = rt_session_take(ctx, id, &rc);
    if (!s)
        return rc;
    rt_session_detach(w, s);

    proto_train_end_reply r = {0};
    proto_bytes b;
    if (discard) {
        rt_session_free(s);
        return reply(ctx, proto_train_end_reply_pack(&r, &b), &b, out);
    }
    size_t n = rt_trainer_params_len(s->t);
    float *host = malloc(n * sizeof *host);
    char hex[RT_SHA256_HEX];
    /* Async: read from the shards, given up if this call's caller hangs
     * up meanwhile. */
    rc = host ? rt_trainer_params_polled(s->t, host, call_cancelled, ctx) : FERRY_ENOMEM;
    if (rc == 0)
        rt_sha256_hex(host, n * sizeof *host, hex);
    const ferry_model_t *m = s->m->task->model;
    rt_tensors t = {0};
    if (rc == 0 && with_params)
        rc = rt_trainer_tensors(s->t, host, &t);
    free(host);
    size_t params = rt_model_param_count(m);
    if (rc) {
        rt_session_free(s);
        return ctx->ops->fail(ctx, rc, "cannot read the parameters back: %s",
                              ferry_strerror(rc));
    }
    r.params_sha256 = hex;
    r.params = params;
    r.n_tensor_names = t.n;
    r.tensor_names = (char **)t.names;
    r.n_tensor_shapes = 4 * t.n;
    r.tensor_shapes = (uint32_t *)t.shapes;
    r.tensor_values = (proto_blob){(uint8_t *)t.values, t.floats * sizeof(float)};
    rc = reply(ctx, proto_train_end_reply_pack(&r, &b), &b, out);
    rt_tensors_free(&t); /* its names are the model's: freed after the reply */
    rt_session_free(s);
    return rc;
}

static int train_leave(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    rt_worker *w = rt_call_worker(ctx);
    proto_train_leave *a;
    if (proto_train_leave_unpack(in->data, in->len, &a))
        return bad_argument(ctx, "TrainLeave");
    uint64_t id = a->session;
    int rank = (int)(a->rank > 1u << 20 ? 1u << 20 : a->rank);
    proto_free(a);
    /* Not through take(): the session is busy with the epoch the lost
     * rank's absence holds up. */
    if (rt_ps_leave(w->ps, id, rank))
        return ctx->ops->fail(ctx, FERRY_ENOENT,
                              "no parameter-server session %llu with a rank %d here",
                              (unsigned long long)id, rank);
    /* TrainLeaveReply is empty: no bytes. */
    proto_bytes b = {0};
    return reply(ctx, 0, &b, out);
}

static bool has_model(const rt_module *m)
{
    return m->task->model != NULL;
}

static const ferry_function_t functions[] = {
    {FN_BEGIN, train_begin},
    {FN_EPOCH, train_epoch},
    {FN_END, train_end},
    {FN_LEAVE, train_leave},
    {"ferry.train.predict", rt_train_predict_fn},
};

const rt_builtins rt_train_builtins = {
    .serves = has_model,
    .functions = functions,
    .n = sizeof functions / sizeof functions[0],
};

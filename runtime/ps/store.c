/* A worker's shards, by session: the Push and Pull handlers find theirs
 * here, and a sweeper thread ends the pulls parked by the staleness bound
 * whose callers gave up (a deadline or a cancel), since only a reply or a
 * failure ends a server call.
 *
 * A handler holds a reference to its session while it works on a shard; a
 * session leaves the list first and is freed once its last handler is
 * done, so no push lands in freed memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <uv.h>

#include "ps_int.h"
#include "base/cond_wait.h"
#include "runtime/device/device.h"

#define SWEEP_MS 100

struct rt_ps_store {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a session's refs dropped; the sweeper's sleep */
    rt_ps_sess *list;
    ferry_device_t *cpu; /* opened with the first session */
    pthread_t sweeper;
    bool sweeping, stopping, shut;
};

static void sess_free(rt_ps_sess *s)
{
    for (int i = 0; s->held && i < s->n_held; i++)
        rt_shard_fini(&s->held[i]);
    free(s->held);
    OPENSSL_cleanse(s->secret, sizeof s->secret);
    free(s);
}

static void *sweep_main(void *arg)
{
    rt_ps_store *st = arg;
    pthread_mutex_lock(&st->mu);
    while (!st->stopping) {
        base_cond_wait_ms(&st->cv, &st->mu, CLOCK_MONOTONIC, SWEEP_MS);
        uint64_t now = uv_hrtime();
        for (rt_ps_sess **p = &st->list; *p;) {
            rt_ps_sess *s = *p;
            if (s->close_at && now >= s->close_at && s->refs == 0) {
                *p = s->next;
                sess_free(s);
                continue;
            }
            for (int i = 0; i < s->n_held; i++)
                rt_shard_sweep(&s->held[i], st->shut);
            p = &s->next;
        }
    }
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

int rt_ps_store_create(rt_ps_store **out)
{
    rt_ps_store *st = calloc(1, sizeof *st);
    if (!st)
        return FERRY_ENOMEM;
    pthread_mutex_init(&st->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&st->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&st->sweeper, NULL, sweep_main, st) != 0) {
        pthread_cond_destroy(&st->cv);
        pthread_mutex_destroy(&st->mu);
        free(st);
        return FERRY_ENOMEM;
    }
    st->sweeping = true;
    *out = st;
    return 0;
}

void rt_ps_store_shutdown(rt_ps_store *st)
{
    if (!st)
        return;
    pthread_mutex_lock(&st->mu);
    st->shut = true;
    for (rt_ps_sess *s = st->list; s; s = s->next)
        for (int i = 0; i < s->n_held; i++)
            rt_shard_sweep(&s->held[i], true);
    pthread_mutex_unlock(&st->mu);
}

void rt_ps_store_destroy(rt_ps_store *st)
{
    if (!st)
        return;
    pthread_mutex_lock(&st->mu);
    st->stopping = true;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
    if (st->sweeping)
        pthread_join(st->sweeper, NULL);
    while (st->list) {
        rt_ps_sess *s = st->list;
        st->list = s->next;
        sess_free(s);
    }
    rt_device_close(st->cpu);
    pthread_cond_destroy(&st->cv);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

static rt_ps_sess *find(rt_ps_store *st, uint64_t id)
{
    for (rt_ps_sess *s = st->list; s; s = s->next)
        if (s->id == id)
            return s;
    return NULL;
}

int rt_ps_open(rt_ps_store *st, const rt_ps_session_opts *o, char *err, size_t errlen)
{
    int shards = o->shards > 0 ? o->shards : o->world;
    if (o->world < 1 || o->rank < 0 || o->rank >= o->world || !o->init || o->n == 0 ||
        (o->algo != RT_PS_EASGD && !o->optim) || o->batch < 1 || o->push_steps < 1 ||
        !o->secret) {
        snprintf(err, errlen,
                 "bad parameter-server session: rank %d of %d, %zu floats, batch %u, %u "
                 "step(s) a push%s",
                 o->rank, o->world, o->n, o->batch, o->push_steps,
                 o->secret ? "" : ", without its secret");
        return FERRY_EINVAL;
    }
    rt_ps_sess *s = calloc(1, sizeof *s);
    if (!s)
        return FERRY_ENOMEM;
    *s = (rt_ps_sess){.id = o->session,
                      .rank = o->rank,
                      .world = o->world,
                      .shards = shards,
                      .staleness = o->staleness,
                      .algo = o->algo,
                      .lr = o->optim ? o->optim->lr : 0,
                      .schedule_samples = o->schedule_samples,
                      .batch = o->batch,
                      .push_steps = o->push_steps};
    memcpy(s->secret, o->secret, sizeof s->secret);
    for (int i = o->rank; i < shards; i += o->world)
        s->n_held++;
    s->held = calloc((size_t)(s->n_held ? s->n_held : 1), sizeof *s->held);
    int rc = s->held ? 0 : FERRY_ENOMEM;
    pthread_mutex_lock(&st->mu);
    if (rc == 0 && !st->cpu) {
        char why[256] = "";
        rc = rt_device_open("cpu", &st->cpu, why, sizeof why);
    }
    ferry_device_t *cpu = st->cpu;
    pthread_mutex_unlock(&st->mu);
    for (int k = 0; rc == 0 && k < s->n_held; k++)
        rc = rt_shard_init(&s->held[k], s, o->rank + k * o->world, cpu, o->optim, o->init,
                           o->n);
    for (int k = 0; rc == 0 && k < s->n_held; k++)
        for (int j = 0; rc == 0 && j < o->n_resume; j++)
            if (o->resume[j].index == s->held[k].index)
                rc = rt_shard_restore(&s->held[k], &o->resume[j]);
    if (rc) {
        snprintf(err, errlen, "cannot hold %d shard%s of %zu floats: %s", s->n_held,
                 s->n_held == 1 ? "" : "s", o->n, ferry_strerror(rc));
        sess_free(s);
        return rc;
    }
    pthread_mutex_lock(&st->mu);
    if (find(st, o->session))
        rc = FERRY_EEXIST;
    else {
        s->next = st->list;
        st->list = s;
    }
    pthread_mutex_unlock(&st->mu);
    if (rc) {
        snprintf(err, errlen, "parameter-server session %llu is already open here",
                 (unsigned long long)o->session);
        sess_free(s);
    }
    return rc;
}

void rt_ps_close(rt_ps_store *st, uint64_t session, int64_t linger_ms)
{
    if (!st)
        return;
    pthread_mutex_lock(&st->mu);
    if (linger_ms > 0) {
        rt_ps_sess *s = find(st, session);
        if (s)
            s->close_at = uv_hrtime() + (uint64_t)linger_ms * 1000000ull;
        pthread_mutex_unlock(&st->mu);
        return;
    }
    rt_ps_sess *s = NULL;
    for (rt_ps_sess **p = &st->list; *p; p = &(*p)->next)
        if ((*p)->id == session) {
            s = *p;
            *p = s->next;
            break;
        }
    while (s && s->refs > 0)
        pthread_cond_wait(&st->cv, &st->mu);
    pthread_mutex_unlock(&st->mu);
    if (s)
        sess_free(s);
}

int rt_ps_leave(rt_ps_store *st, uint64_t session, int rank)
{
    pthread_mutex_lock(&st->mu);
    rt_ps_sess *s = find(st, session);
    int rc = s && rank >= 0 && rank < s->world ? 0 : FERRY_ENOENT;
    for (int i = 0; rc == 0 && i < s->n_held; i++)
        rt_shard_leave(&s->held[i], rank);
    pthread_mutex_unlock(&st->mu);
    return rc;
}

int rt_ps_take_stats(rt_ps_store *st, uint64_t session, rt_ps_shard_stats *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&st->mu);
    rt_ps_sess *s = find(st, session);
    for (int i = 0; s && i < s->n_held; i++) {
        rt_shard *sh = &s->held[i];
        pthread_mutex_lock(&sh->mu);
        out->pushes += sh->stats.pushes;
        for (int b = 0; b < RT_PS_STALE_BUCKETS; b++)
            out->staleness[b] += sh->stats.staleness[b];
        memset(&sh->stats, 0, sizeof sh->stats);
        pthread_mutex_unlock(&sh->mu);
    }
    pthread_mutex_unlock(&st->mu);
    return s ? 0 : FERRY_ENOENT;
}

int rt_ps_snapshot(rt_ps_store *st, uint64_t session, int k, rt_ps_shard_state *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&st->mu);
    rt_ps_sess *s = find(st, session);
    int rc =
        s && k >= 0 && k < s->n_held ? rt_shard_snapshot(&s->held[k], out) : FERRY_ENOENT;
    pthread_mutex_unlock(&st->mu);
    return rc;
}

/* ---- the handlers ------------------------------------------------------------------ */

/* Whether `secret` is session s's. In constant time: how much of a guess
 * matched must not show in how long the refusal took. */
static bool keyed(const rt_ps_sess *s, const proto_blob *secret)
{
    return secret->len == sizeof s->secret &&
           CRYPTO_memcmp(secret->data, s->secret, sizeof s->secret) == 0;
}

/* The shard `index` of session `id` held here, with a reference taken; NULL
 * with the call failed otherwise. */
static rt_shard *acquire(rt_ps_store *st, rpc_srv_call *sc, const char *method, uint64_t id,
                         uint32_t index, uint32_t from, const proto_blob *secret)
{
    pthread_mutex_lock(&st->mu);
    rt_ps_sess *s = find(st, id);
    if (s && !keyed(s, secret)) {
        /* Before anything else: such a caller is not a rank of the session,
         * and is told nothing of it (its ranks, its shards). */
        pthread_mutex_unlock(&st->mu);
        rpc_srv_fail(sc, FERRY_EACCES,
                     "%s from %.64s for session %llu does not carry the session's secret: "
                     "only its ranks, told it by their master, use its shards",
                     method, rpc_srv_peer(sc), (unsigned long long)id);
        return NULL;
    }
    rt_shard *sh = NULL;
    for (int i = 0; s && i < s->n_held; i++)
        if (s->held[i].index == (int)index)
            sh = &s->held[i];
    if (sh && from >= (uint32_t)s->world) {
        pthread_mutex_unlock(&st->mu);
        rpc_srv_fail(sc, FERRY_EINVAL, "%s: rank %u of session %llu, which has %d ranks",
                     method, from, (unsigned long long)id, s->world);
        return NULL;
    }
    if (!sh) {
        pthread_mutex_unlock(&st->mu);
        if (!s)
            rpc_srv_fail(sc, FERRY_ENOENT, "%s: no parameter-server session %llu on this "
                                           "worker",
                         method, (unsigned long long)id);
        else
            rpc_srv_fail(sc, FERRY_ENOENT,
                         "%s: shard %u of session %llu is not held here (rank %d of %d "
                         "holds shards %d, %d + %d, ... of %d)",
                         method, index, (unsigned long long)id, s->rank, s->world, s->rank,
                         s->rank, s->world, s->shards);
        return NULL;
    }
    s->refs++;
    pthread_mutex_unlock(&st->mu);
    return sh;
}

static void release_ref(rt_ps_store *st, rt_shard *sh)
{
    pthread_mutex_lock(&st->mu);
    if (--sh->sess->refs == 0)
        pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

/* Whether rt_ps_store_shutdown has run: reads that could park are refused. */
static bool store_shut(rt_ps_store *st)
{
    pthread_mutex_lock(&st->mu);
    bool shut = st->shut;
    pthread_mutex_unlock(&st->mu);
    return shut;
}

void rt_ps_push_handler(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    rt_ps_store *st = data;
    proto_push_req *in = NULL;
    if (proto_push_req_unpack(req->head, req->head_len, &in)) {
        rpc_srv_fail(sc, FERRY_EINVAL, "Push: the request is not a PushRequest");
        return;
    }
    rt_shard *sh = acquire(st, sc, "Push", in->job, in->shard, in->from_rank, &in->secret);
    if (sh) {
        bool shut = store_shut(st);
        if (req->payload_len % sizeof(float))
            rpc_srv_fail(sc, FERRY_EINVAL, "Push: %zu payload bytes is not whole floats",
                         req->payload_len);
        else if (shut && in->pull)
            rpc_srv_fail(sc, FERRY_EUNAVAIL, "Push: this worker is shutting down");
        else
            rt_shard_push(sh, sc,
                          &(rt_push_in){.from = (int)in->from_rank,
                                        .kind = (int)in->kind,
                                        .step = in->worker_step,
                                        .version = in->version,
                                        .samples = in->samples,
                                        .pull = in->pull,
                                        .until = in->until_samples,
                                        .values = req->payload,
                                        .n = req->payload_len / sizeof(float)});
        release_ref(st, sh);
    }
    OPENSSL_cleanse(in->secret.data, in->secret.len);
    proto_free(in);
}

void rt_ps_pull_handler(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    rt_ps_store *st = data;
    proto_pull_req *in = NULL;
    if (proto_pull_req_unpack(req->head, req->head_len, &in)) {
        rpc_srv_fail(sc, FERRY_EINVAL, "Pull: the request is not a PullRequest");
        return;
    }
    rt_shard *sh = acquire(st, sc, "Pull", in->job, in->shard, in->from_rank, &in->secret);
    if (sh) {
        if (store_shut(st))
            rpc_srv_fail(sc, FERRY_EUNAVAIL, "Pull: this worker is shutting down");
        else if (in->rejoin)
            rt_shard_rejoin(sh, sc, (int)in->from_rank);
        else
            rt_shard_pull(sh, sc, (int)in->from_rank, in->worker_step, in->until_samples);
        release_ref(st, sh);
    }
    OPENSSL_cleanse(in->secret.data, in->secret.len);
    proto_free(in);
}

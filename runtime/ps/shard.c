/* One shard of a session: its slice of the parameters, the optimizer state
 * for that slice, a version that counts the pushes applied, every rank's
 * clock (the worker_step of its last push) and the pulls the staleness
 * bound holds back.
 *
 * Everything happens under the shard's mutex, replies included: a pull's
 * reply copies the slice inside rpc_srv_reply, so it never sees half a
 * step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ps_int.h"

int rt_shard_init(rt_shard *sh, rt_ps_sess *s, int index, ferry_device_t *cpu,
                  const rt_optim_opts *optim, const float *init, size_t n)
{
    memset(sh, 0, sizeof *sh);
    sh->sess = s;
    sh->index = index;
    sh->cpu = cpu;
    sh->span = rt_ps_shard_span(n, s->shards, index);
    pthread_mutex_init(&sh->mu, NULL);
    size_t len = sh->span.hi - sh->span.lo;
    sh->values = cpu->ops->alloc(cpu, (len ? len : 1) * sizeof(float));
    sh->clock = calloc((size_t)s->world, sizeof *sh->clock);
    sh->gone = calloc((size_t)s->world, sizeof *sh->gone);
    sh->pushed = calloc((size_t)s->world, sizeof *sh->pushed);
    if (!sh->values || !sh->clock || !sh->gone || !sh->pushed)
        return FERRY_ENOMEM;
    memcpy(sh->values, init + sh->span.lo, len * sizeof(float));
    if (s->algo != RT_PS_EASGD && len > 0)
        return rt_optim_create(cpu, optim, len, &sh->opt);
    return 0;
}

void rt_shard_fini(rt_shard *sh)
{
    if (!sh->sess)
        return;
    rt_shard_sweep(sh, true);
    rt_optim_destroy(sh->opt);
    sh->cpu->ops->free(sh->cpu, sh->values);
    free(sh->clock);
    free(sh->gone);
    free(sh->pushed);
    pthread_mutex_destroy(&sh->mu);
    sh->sess = NULL;
}

/* The slowest live rank's clock; UINT64_MAX when every rank has left. */
static uint64_t min_clock(const rt_shard *sh)
{
    uint64_t m = UINT64_MAX;
    for (int r = 0; r < sh->sess->world; r++)
        if (!sh->gone[r] && sh->clock[r] < m)
            m = sh->clock[r];
    return m;
}

static bool may_read(const rt_shard *sh, uint64_t step, uint64_t until)
{
    int k = sh->sess->staleness;
    /* step <= k takes in step 0, which never waits; step - k, not
     * min_clock + k, which wraps once every rank has left. */
    return k < 0 || step <= (uint64_t)k || step - (uint64_t)k <= min_clock(sh) ||
           (until > 0 && sh->samples >= until);
}

/* Sends a reply head, with the shard's values as its payload when `values`. */
static void answer(rt_shard *sh, rpc_srv_call *sc, int packed, proto_bytes *head,
                   bool values)
{
    rpc_msg_out reply = {.head_bytes = head->data, .head_len = head->len};
    if (values) {
        reply.payload = sh->values;
        reply.payload_len = (sh->span.hi - sh->span.lo) * sizeof(float);
        reply.codec = RPC_CODEC_RAW;
    }
    if (packed)
        rpc_srv_fail(sc, FERRY_ENOMEM, "no memory for the reply");
    else
        rpc_srv_reply(sc, &reply);
    proto_bytes_fini(head);
}

static void answer_pull(rt_shard *sh, rpc_srv_call *sc)
{
    uint64_t mc = min_clock(sh);
    proto_pull_reply out = {.shard_version = sh->version,
                            .samples = sh->samples,
                            .min_clock = mc == UINT64_MAX ? 0 : mc};
    proto_bytes head = {0};
    answer(sh, sc, proto_pull_reply_pack(&out, &head), &head, true);
}

/* A push's reply: what it saw when applied and, when it pulls too, the
 * values as they are now. */
static void answer_push(rt_shard *sh, rpc_srv_call *sc, uint64_t version, uint64_t samples,
                        uint64_t staleness, bool values)
{
    uint64_t mc = min_clock(sh);
    proto_push_reply out = {.shard_version = values ? sh->version : version,
                            .samples = values ? sh->samples : samples,
                            .staleness = staleness,
                            .min_clock = mc == UINT64_MAX ? 0 : mc};
    proto_bytes head = {0};
    answer(sh, sc, proto_push_reply_pack(&out, &head), &head, values);
}

/* Answers every parked pull the bound now lets go. */
static void release(rt_shard *sh)
{
    for (rt_parked **p = &sh->parked; *p;) {
        rt_parked *pk = *p;
        if (!may_read(sh, pk->step, pk->until)) {
            p = &pk->next;
            continue;
        }
        *p = pk->next;
        if (pk->push)
            answer_push(sh, pk->sc, pk->version, pk->samples, pk->staleness, true);
        else
            answer_pull(sh, pk->sc);
        free(pk);
    }
}

/* The cosine schedule over the samples applied, then dynsgd's division by
 * the push's staleness. */
static float step_lr(const rt_shard *sh, uint64_t staleness)
{
    const rt_ps_sess *s = sh->sess;
    double lr = s->lr;
    if (s->schedule_samples) {
        double frac = fmin((double)sh->samples / (double)s->schedule_samples, 1.0);
        lr *= 0.5 * (1.0 + cos(M_PI * frac));
    }
    if (s->algo == RT_PS_DYNSGD)
        lr /= (double)(staleness + 1);
    return (float)lr;
}

/* Parks `sc` until the bound lets step `step` read; false without memory
 * (the call is failed). */
static bool park(rt_shard *sh, rpc_srv_call *sc, const rt_parked *what)
{
    rt_parked *pk = malloc(sizeof *pk);
    if (!pk) {
        rpc_srv_fail(sc, FERRY_ENOMEM, "no memory to wait for the slowest rank");
        return false;
    }
    *pk = *what;
    pk->sc = sc;
    pk->next = sh->parked;
    sh->parked = pk;
    return true;
}

/* Whether push `in` claims no more samples than its sender can have
 * computed: its slice of the global batch a local step, push_steps steps
 * a push, and `step` steps in all (the pusher's clock counts the batches
 * it computed, and its pushes together carry each sample once). An epoch
 * ends on the samples the shards count: one that was never computed
 * would end it early. Under the shard's mutex; a refusal goes to `sc`. */
static bool samples_fit(rt_shard *sh, rpc_srv_call *sc, const rt_push_in *in)
{
    const rt_ps_sess *s = sh->sess;
    uint64_t w = (uint64_t)s->world, slice = s->batch / w + ((uint64_t)in->from < s->batch % w);
    uint64_t per_push = slice * s->push_steps, done = sh->pushed[in->from];
    bool ok = in->samples <= per_push && in->step <= UINT64_MAX / (slice ? slice : 1) &&
              done + in->samples <= in->step * slice;
    if (!ok)
        rpc_srv_fail(sc, FERRY_EINVAL,
                     "Push: %u samples from rank %d (%s) at its local step %llu: rank %d "
                     "computes at most %llu a step (its slice of a global batch of %u) and "
                     "%u step(s) a push, and its pushes to shard %d claimed %llu already",
                     in->samples, in->from, rpc_srv_peer(sc), (unsigned long long)in->step,
                     in->from, (unsigned long long)slice, s->batch, s->push_steps, sh->index,
                     (unsigned long long)done);
    return ok;
}

void rt_shard_push(rt_shard *sh, rpc_srv_call *sc, const rt_push_in *in)
{
    const rt_ps_sess *s = sh->sess;
    int want_kind = s->algo == RT_PS_EASGD ? PROTO_PUSH_ELASTIC
                                           : PROTO_PUSH_GRADIENT;
    size_t len = sh->span.hi - sh->span.lo;
    pthread_mutex_lock(&sh->mu);
    uint64_t version =
        sh->restored && in->version > sh->version ? sh->version : in->version;
    if (in->kind != want_kind || in->n != len || version > sh->version) {
        uint64_t have = sh->version;
        pthread_mutex_unlock(&sh->mu);
        if (in->kind != want_kind)
            rpc_srv_fail(sc, FERRY_EINVAL, "Push: shard %d of session %llu takes %s pushes",
                         sh->index, (unsigned long long)s->id,
                         want_kind ? "elastic (easgd)" : "gradient");
        else if (in->n != len)
            rpc_srv_fail(sc, FERRY_EINVAL,
                         "Push: shard %d of session %llu holds %zu floats, the push "
                         "carries %zu",
                         sh->index, (unsigned long long)s->id, len, in->n);
        else
            rpc_srv_fail(sc, FERRY_EINVAL,
                         "Push: version %llu of shard %d is ahead of the shard's %llu",
                         (unsigned long long)in->version, sh->index,
                         (unsigned long long)have);
        return;
    }
    if (!samples_fit(sh, sc, in)) {
        pthread_mutex_unlock(&sh->mu);
        return;
    }
    uint64_t staleness = sh->version - version;
    if (len > 0) {
        if (sh->opt) {
            rt_optim_set_lr(sh->opt, step_lr(sh, staleness));
            rt_optim_step(sh->opt, sh->values, in->values);
        } else {
            for (size_t i = 0; i < len; i++)
                sh->values[i] += in->values[i];
        }
    }
    sh->version++;
    sh->samples += in->samples;
    sh->pushed[in->from] += in->samples;
    if (in->step > sh->clock[in->from])
        sh->clock[in->from] = in->step;
    sh->stats.pushes++;
    sh->stats.staleness[staleness < RT_PS_STALE_BUCKETS - 1 ? staleness
                                                            : RT_PS_STALE_BUCKETS - 1]++;
    /* This push may be what parked pulls wait for: they go first, so a
     * pull of this round never waits behind the pusher's own next read. */
    release(sh);
    if (!in->pull || may_read(sh, in->step, in->until))
        answer_push(sh, sc, sh->version, sh->samples, staleness, in->pull);
    else
        park(sh, sc,
             &(rt_parked){.step = in->step,
                          .until = in->until,
                          .from = in->from,
                          .push = true,
                          .version = sh->version,
                          .samples = sh->samples,
                          .staleness = staleness});
    pthread_mutex_unlock(&sh->mu);
}

void rt_shard_pull(rt_shard *sh, rpc_srv_call *sc, int from, uint64_t step, uint64_t until)
{
    pthread_mutex_lock(&sh->mu);
    if (may_read(sh, step, until))
        answer_pull(sh, sc);
    else
        park(sh, sc, &(rt_parked){.step = step, .until = until, .from = from});
    pthread_mutex_unlock(&sh->mu);
}

void rt_shard_rejoin(rt_shard *sh, rpc_srv_call *sc, int rank)
{
    pthread_mutex_lock(&sh->mu);
    sh->gone[rank] = true; /* out of min_clock while it is computed */
    uint64_t mc = min_clock(sh);
    if (mc != UINT64_MAX)
        sh->clock[rank] = mc;
    sh->gone[rank] = false;
    sh->pushed[rank] = 0;
    answer_pull(sh, sc);
    pthread_mutex_unlock(&sh->mu);
}

void rt_shard_leave(rt_shard *sh, int rank)
{
    pthread_mutex_lock(&sh->mu);
    sh->gone[rank] = true;
    release(sh);
    pthread_mutex_unlock(&sh->mu);
}

void rt_shard_sweep(rt_shard *sh, bool all)
{
    pthread_mutex_lock(&sh->mu);
    for (rt_parked **p = &sh->parked; *p;) {
        rt_parked *pk = *p;
        if (!all && !rpc_srv_cancelled(pk->sc)) {
            p = &pk->next;
            continue;
        }
        *p = pk->next;
        rpc_srv_fail(pk->sc, FERRY_ECANCELED,
                     "%s: shard %d of session %llu stopped waiting for the slowest rank "
                     "(%s)",
                     pk->push ? "Push" : "Pull", sh->index, (unsigned long long)sh->sess->id,
                     all ? "the session ended on this worker" : "the caller gave up");
        free(pk);
    }
    pthread_mutex_unlock(&sh->mu);
}

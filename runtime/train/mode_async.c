/* Async mode: asynchronous data parallelism. Each rank loops on its own
 * slice of the data without waiting for the others, talking only to the
 * parameter server's shards (runtime/ps).
 *
 *   downpour, dynsgd  pull every shard (every pull_every steps), compute a
 *                     gradient, push it to every shard (summed over
 *                     push_every batches); the shards step their optimizer
 *   easgd             keep local parameters stepped by the local optimizer;
 *                     every tau steps pull the centre variable, move the
 *                     local copy alpha of the way towards it and push the
 *                     same elastic difference to the centre
 *
 * Each rank's gradient is weighted by its share of the global batch, as in
 * sync mode: the pushes of one round add up to the global batch's gradient,
 * so with K = 0 and plain SGD the shards take sync's steps.
 *
 * An epoch is a training set's worth of samples taken by the shards from
 * all the ranks together: a rank stops when a reply says the shards have
 * reached it, so a slow rank contributes less and holds nobody back. When a
 * rank's own slice of the data runs out it goes on with its slice of the
 * next shuffle. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "trainer_int.h"

#define DEFAULT_TAU PROTO_TRAIN_WORKER_TAU
/* How long a rank's shards outlive its session, so that every rank can
 * read the final values when the run ends. */
#define LINGER_MS 10000

typedef struct rt_async rt_async;

struct rt_async {
    rt_ps_client *client;
    rt_ps_store *store;
    uint64_t session;
    bool opened;      /* shards held in the store */
    bool on_host;     /* the device's memory is the host's (the cpu) */
    float *host;      /* pulled values: the parameters themselves on the cpu */
    float *acc;       /* the push being gathered (host) */
    float *grad_host; /* the gradient, downloaded (not on the cpu) */
    float *centre;    /* easgd: the centre variable, on the device, to evaluate */
    float *centre_host;
    uint64_t clock;  /* local steps so far: the staleness bound's clock */
    uint64_t pulled; /* the clock of the last pull + 1 (0: none yet) */
    uint64_t seen;   /* samples the shards have taken, as last heard */
    uint64_t acc_samples;
    int acc_batches;
    int data_epoch;   /* the loader's shuffle this rank is in */
    size_t data_step; /* global batches of it handed out */
    bool data_started;
    rt_ps_algo algo;
    int push_every, pull_every, tau;
    float alpha;
    uint64_t target; /* the samples that end the running epoch */
    uint64_t run;    /* the samples of the whole run (easgd's schedule) */
    rt_timeline *tl; /* the trainer's */
    rt_ckpt_async *ck; /* this rank's shards' checkpoints (NULL: none) */
    uint64_t ck_steps; /* the set last written (global steps) */
    uint64_t skip;     /* batches of the first shuffle a continued run took */
    bool broken;       /* a round trip failed: the epoch may be run again */
};

static void *host_floats(size_t n)
{
    void *p = aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64);
    if (p)
        memset(p, 0, n * sizeof(float));
    return p;
}

/* Opens this rank's shards from `init` (host, the whole flat buffer) and
 * the client to every shard. */
static int async_begin(rt_trainer *t, const float *init, char *err, size_t errlen)
{
    const rt_train_opts *o = &t->o;
    rt_async *a = calloc(1, sizeof *a);
    if (!a)
        return FERRY_ENOMEM;
    t->ms = a;
    a->store = o->ps_store;
    a->tl = t->tl;
    a->session = o->session;
    a->algo = o->algo;
    a->push_every = o->push_every > 0 ? o->push_every : 1;
    a->pull_every = o->pull_every > 0 ? o->pull_every : 1;
    a->tau = o->tau > 0 ? o->tau : DEFAULT_TAU;
    a->alpha = o->alpha > 0 ? o->alpha : 0.9f / (float)o->world;
    a->on_host = t->dev->kind == FERRY_DEVICE_CPU;
    size_t n = t->plen;
    a->host = a->on_host && a->algo != RT_PS_EASGD ? t->params : host_floats(n);
    a->acc = host_floats(n);
    if (!a->on_host)
        a->grad_host = host_floats(n);
    if (a->algo == RT_PS_EASGD) {
        a->centre_host = host_floats(n);
        a->centre =
            a->on_host ? a->centre_host : t->dev->ops->alloc(t->dev, n * sizeof(float));
    }
    if (!a->host || !a->acc || (!a->on_host && !a->grad_host) ||
        (a->algo == RT_PS_EASGD && (!a->centre_host || !a->centre))) {
        snprintf(err, errlen, "no memory for async training's buffers");
        return FERRY_ENOMEM;
    }
    rt_ckpt_async_start start = {0};
    int rc = rt_ckpt_async_setup(t, &a->ck, err, errlen);
    if (rc == 0 && o->resume && *o->resume &&
        (rc = rt_ckpt_async_load(t, &start, err, errlen)) == 0) {
        a->data_epoch = start.data_epoch;
        a->skip = start.data_step;
        a->ck_steps = t->steps_done;
    }
    if (o->rejoin_epoch > 0) {
        /* Back in a session the others went on with (its shards, if it
         * holds any, from `resume`): the others' values are read at the
         * first pull, the data goes on with a new shuffle. */
        t->epoch = o->rejoin_epoch;
        a->data_epoch = o->rejoin_epoch;
        a->skip = 0;
    }
    if (rc)
        return rc;
    rt_ps_session_opts so = {
        .session = o->session,
        .rank = o->rank,
        .world = o->world,
        .shards = o->ps_shards,
        .staleness = o->staleness,
        .algo = o->algo,
        .optim = &t->o.optim,
        .schedule_samples =
            o->cosine && o->epochs > 0 ? (uint64_t)o->epochs * t->set[0]->n : 0,
        .batch = (uint32_t)rt_trainer_global_batch(t, 0),
        /* The last push of an epoch carries fewer. */
        .push_steps = (uint32_t)(a->algo == RT_PS_EASGD ? a->tau : a->push_every),
        .init = init,
        .n = n,
        .secret = o->secret,
        .resume = start.shards,
        .n_resume = start.n,
    };
    rc = rt_ps_open(a->store, &so, err, errlen);
    rt_ckpt_async_start_free(&start);
    if (rc)
        return rc;
    a->opened = true;
    rt_ps_client_opts co = {.session = o->session,
                            .rank = o->rank,
                            .world = o->world,
                            .shards = o->ps_shards,
                            .n = n,
                            .peers = o->peers,
                            .token = o->token,
                            .secret = o->secret,
                            .timeout_ms = o->timeout_ms};
    return rt_ps_client_create(&co, &a->client, err, errlen);
}

static int upload(rt_trainer *t, float *dev, const float *host);

/* A restarted rank's first pull takes it back into the session: its clock
 * the slowest live rank's, so that it holds nobody back, and the model the
 * shards' values (easgd: the centre's) as they are now. */
static int rejoin(rt_trainer *t, rt_async *a, bool (*cancelled)(void *), void *arg,
                  char *err, size_t errlen)
{
    float *into = a->algo == RT_PS_EASGD ? a->centre_host : a->host;
    rt_ps_seen seen;
    int rc = rt_ps_rejoin(a->client, into, &seen, cancelled, arg, err, errlen);
    if (rc)
        return rc;
    a->clock = seen.min_clock == UINT64_MAX ? 0 : seen.min_clock;
    a->pulled = a->clock + 1;
    a->seen = seen.samples;
    return upload(t, t->params, into);
}

static int async_ready(rt_trainer *t, bool (*cancelled)(void *), void *arg, char *err,
                       size_t errlen)
{
    rt_async *a = t->ms;
    if (t->o.rejoin_epoch > 0)
        return rejoin(t, a, cancelled, arg, err, errlen);
    /* Into the push accumulator, empty until the first step: the pull only
     * asks every shard whether it is there. */
    rt_ps_seen seen;
    int rc = rt_ps_pull(a->client, a->acc, 0, 0, &seen, cancelled, arg, err, errlen);
    memset(a->acc, 0, t->plen * sizeof(float));
    return rc;
}

static void async_destroy(rt_trainer *t)
{
    rt_async *a = t->ms;
    if (!a)
        return;
    rt_ps_client_destroy(a->client);
    if (a->opened)
        rt_ps_close(a->store, a->session, LINGER_MS);
    rt_ckpt_async_free(a->ck);
    if (a->host != t->params)
        free(a->host);
    free(a->acc);
    free(a->grad_host);
    if (a->centre != a->centre_host)
        t->dev->ops->free(t->dev, a->centre);
    free(a->centre_host);
    free(a);
    t->ms = NULL;
}

/* The next batch of this rank's endless stream of slices. */
static const rt_batch_host *next_batch(rt_trainer *t, rt_async *a, int *rc)
{
    for (int tries = 0; tries < 2; tries++) {
        if (!a->data_started) {
            if ((*rc = rt_loader_begin(t->train, a->data_epoch)))
                return NULL;
            a->data_started = true;
            a->data_step = 0;
            /* A continued run: where this rank's slice of the data was. */
            for (; a->skip > 0 && rt_loader_next(t->train); a->skip--)
                a->data_step++;
            a->skip = 0;
        }
        const rt_batch_host *hb = rt_loader_next(t->train);
        if (hb) {
            a->data_step++;
            return hb;
        }
        a->data_started = false;
        a->data_epoch++;
    }
    *rc = FERRY_EIO;
    return NULL;
}

static int upload(rt_trainer *t, float *dev, const float *host)
{
    if (dev == host)
        return 0;
    return t->dev->ops->upload(t->dev, dev, host, t->plen * sizeof(float));
}

/* The end of a round trip with the shards begun at `t0`: its wait counted,
 * its failure said ("pull at local step S: why"), and the samples the
 * shards have taken kept. */
static int trip_done(rt_async *a, int rc, double t0, const char *what, uint64_t step,
                     const rt_ps_seen *seen, const char *why, rt_epoch_run *r)
{
    r->st->ps_wait_s += rt_train_now() - t0;
    rt_timeline_since(a->tl, strcmp(what, "push") ? PROTO_TL_PULL : PROTO_TL_PUSH, 0, t0);
    if (rc) {
        a->broken = true;
        snprintf(r->err, r->errlen, "%s at local step %llu: %s", what,
                 (unsigned long long)step, why);
        return rc;
    }
    if (seen->samples > a->seen)
        a->seen = seen->samples;
    return 0;
}

/* Pulls every shard into the parameters (downpour) or the centre (easgd). */
static int pull(rt_async *a, float *host, uint64_t step, uint64_t until, rt_epoch_run *r)
{
    double t0 = rt_train_now();
    rt_ps_seen seen;
    char why[512] = "";
    int rc = rt_ps_pull(a->client, host, step, until, &seen, r->cancelled, r->arg, why,
                        sizeof why);
    return trip_done(a, rc, t0, "pull", step, &seen, why, r);
}

/* Pushes what was gathered; with `pull_into`, the same round trip also
 * pulls (the values the shards hold after it) as a pull at this clock. */
static int push(rt_trainer *t, rt_async *a, int kind, float *pull_into, uint64_t until,
                rt_epoch_run *r)
{
    bool (*cancelled)(void *) = r->cancelled;
    void *arg = r->arg;
    double t0 = rt_train_now();
    rt_ps_seen seen;
    char why[512] = "";
    int rc =
        pull_into
            ? rt_ps_push_pull(a->client, a->acc, kind, a->clock, (uint32_t)a->acc_samples,
                              pull_into, until, &seen, cancelled, arg, why, sizeof why)
            : rt_ps_push(a->client, a->acc, kind, a->clock, (uint32_t)a->acc_samples,
                         &seen, cancelled, arg, why, sizeof why);
    if ((rc = trip_done(a, rc, t0, "push", a->clock, &seen, why, r)))
        return rc;
    if (pull_into) {
        a->pulled = a->clock + 1;
        if ((rc = upload(t, t->params, pull_into)))
            return rc;
    }
    r->st->pushes++;
    a->acc_samples = 0;
    a->acc_batches = 0;
    memset(a->acc, 0, t->plen * sizeof(float));
    return 0;
}

/* EASGD's exchange: the local parameters move alpha of the way to the
 * centre and the centre as far towards them (Zhang et al. 2015, the
 * asynchronous form). The first exchange copies the centre outright, so
 * every rank starts from the shards' values. */
static int exchange(rt_trainer *t, rt_async *a, uint64_t until, rt_epoch_run *r)
{
    int rc = pull(a, a->centre_host, a->clock, until, r);
    if (rc)
        return rc;
    size_t n = t->plen;
    float *x = a->on_host ? t->params : a->host;
    if (!a->on_host &&
        (rc = t->dev->ops->download(t->dev, x, t->params, n * sizeof(float))))
        return rc;
    if (a->clock == 0) {
        memcpy(x, a->centre_host, n * sizeof(float));
        return upload(t, t->params, x);
    }
    float alpha = a->alpha;
    for (size_t i = 0; i < n; i++) {
        float d = alpha * (x[i] - a->centre_host[i]);
        x[i] -= d;
        a->acc[i] = d;
    }
    if ((rc = upload(t, t->params, x)))
        return rc;
    return push(t, a, 1, NULL, 0, r);
}

/* Adds this batch's gradient, weighted by its share of the global batch,
 * to the push being gathered. */
static int gather(rt_trainer *t, rt_async *a, const rt_batch_host *hb)
{
    const float *g = t->grad;
    if (!a->on_host) {
        int rc =
            t->dev->ops->download(t->dev, a->grad_host, t->grad, t->plen * sizeof(float));
        if (rc)
            return rc;
        g = a->grad_host;
    }
    float w = (float)hb->n / (float)rt_trainer_global_batch(t, a->data_step - 1);
    for (size_t i = 0; i < t->plen; i++)
        a->acc[i] += w * g[i];
    return 0;
}

static int async_epoch_begin(rt_trainer *t, rt_epoch_run *r)
{
    rt_async *a = t->ms;
    /* After an epoch that failed (run again once a lost shard was
     * restored): what was gathered for a push that never went is dropped,
     * and after a failed round trip the shards' holders are reached anew
     * (a restarted one at its new process). */
    a->acc_samples = 0;
    a->acc_batches = 0;
    memset(a->acc, 0, t->plen * sizeof(float));
    if (a->broken) {
        a->broken = false;
        int rc = rt_ps_client_reconnect(a->client, r->err, r->errlen);
        if (rc)
            return rc;
    }
    a->target = (uint64_t)r->epoch * t->set[0]->n;
    a->run = (uint64_t)(t->o.epochs > 0 ? t->o.epochs : r->epoch) * t->set[0]->n;
    return 0;
}

/* The next batch, once the pull or the exchange that is due is done; none
 * once the shards have taken the epoch's samples. */
static int async_next(rt_trainer *t, rt_epoch_run *r, const rt_batch_host **hb)
{
    rt_async *a = t->ms;
    bool easgd = a->algo == RT_PS_EASGD;
    int rc;
    *hb = NULL;
    while (a->seen < a->target) {
        r->step = a->clock;
        if ((rc = rt_trainer_check_cancel(t, r)))
            return rc;
        bool pull_due =
            a->clock % (uint64_t)a->pull_every == 0 && a->pulled != a->clock + 1;
        if (easgd ? a->clock % (uint64_t)a->tau == 0 : pull_due) {
            rc = easgd ? exchange(t, a, a->target, r)
                       : pull(a, a->host, a->clock, a->target, r);
            if (rc == 0 && !easgd)
                rc = upload(t, t->params, a->host);
            if (rc)
                return rc;
            if (a->seen >= a->target)
                return 0;
        }
        double t0 = rt_train_now();
        const rt_batch_host *b = next_batch(t, a, &rc);
        rt_timeline_since(t->tl, PROTO_TL_DATA, 0, t0);
        if (!b) {
            snprintf(r->err, r->errlen, "epoch %d: no training batch: %s", r->epoch,
                     ferry_strerror(rc));
            return rc;
        }
        if (b->n > 0) {
            *hb = b;
            return 0;
        }
    }
    return 0;
}

/* Writes this rank's shards as set `steps` when it is newer than the last. */
static int checkpoint(rt_trainer *t, rt_async *a, uint64_t steps, rt_epoch_run *r)
{
    if (!a->ck || steps <= a->ck_steps)
        return 0;
    int rc = rt_ckpt_async_write(a->ck, t, steps, a->data_epoch, a->data_step, r->err,
                                 r->errlen);
    if (rc == 0)
        a->ck_steps = steps;
    return rc;
}

/* After the step: easgd steps the local parameters; downpour and dynsgd
 * gather the gradient and push every push_every steps. */
static int async_apply(rt_trainer *t, rt_epoch_run *r, const rt_batch_host *hb)
{
    rt_async *a = t->ms;
    int rc = 0;
    a->clock++;
    a->acc_samples += (uint64_t)hb->n;
    if (a->algo == RT_PS_EASGD) {
        rt_optim_set_lr(t->opt, rt_trainer_lr_at(t, (double)a->seen / (double)a->run));
        double t0 = rt_train_now();
        rt_optim_step(t->opt, t->params, t->grad);
        rt_timeline_since(t->tl, PROTO_TL_OPTIM, 0, t0);
    } else {
        if ((rc = gather(t, a, hb)))
            return rc;
        /* A pull due next step rides on this push's reply. */
        bool pull_next = a->clock % (uint64_t)a->pull_every == 0;
        if (++a->acc_batches >= a->push_every &&
            (rc = push(t, a, 0, pull_next ? a->host : NULL, a->target, r)))
            return rc;
    }
    r->st->steps++;
    /* Every N global steps the shards took: each rank reaches the same
     * multiples, so each writes its part of the same sets. */
    uint64_t every = rt_ckpt_async_every(a->ck), batch = (uint64_t)t->o.batch;
    if (every && batch)
        return checkpoint(t, a, a->seen / batch / every * every, r);
    return 0;
}

/* What this rank gathered belongs to the epoch that just ended. */
static int async_epoch_end(rt_trainer *t, rt_epoch_run *r)
{
    rt_async *a = t->ms;
    if (a->algo != RT_PS_EASGD && a->acc_batches > 0)
        return push(t, a, 0, NULL, 0, r);
    return 0;
}

/* The model is the shards' values: evaluated as they are now, on this
 * rank's slice of the test set, with this rank's own buffers (batch
 * normalisation's running statistics are never pushed: each rank keeps
 * its own, and the run saves the first live rank's, rank 0's). */
static int async_evaluate(rt_trainer *t, rt_epoch_run *r)
{
    rt_async *a = t->ms;
    bool easgd = a->algo == RT_PS_EASGD;
    float *eval = easgd ? a->centre : t->params;
    float *eval_host = easgd ? a->centre_host : a->host;
    int rc;
    if ((rc = pull(a, eval_host, 0, 0, r)) || (rc = upload(t, eval, eval_host)) ||
        (rc = rt_trainer_evaluate(t, eval, r->st, r->err, r->errlen)))
        return rc;
    rt_ps_take_stats(a->store, a->session, &r->st->shard);
    /* At each epoch's end: named by the global steps of the epochs done. */
    uint64_t batch = (uint64_t)t->o.batch;
    if (a->ck && !rt_ckpt_async_every(a->ck) && batch)
        return checkpoint(t, a, (a->target + batch - 1) / batch, r);
    return 0;
}

/* The model as the shards hold it (every rank reads the same once all
 * have stopped pushing). */
static int async_params(rt_trainer *t, float *host, bool (*cancelled)(void *), void *arg)
{
    rt_async *a = t->ms;
    rt_ps_seen seen;
    char why[512];
    return rt_ps_pull(a->client, host, 0, 0, &seen, cancelled, arg, why, sizeof why);
}

const rt_mode rt_mode_async = {
    .step_word = "local step",
    .own_checkpoints = true,
    /* Async steps have always run op by op; replaying them as graphs waits
     * for a check on a GPU (their pulls rewrite the parameters between
     * replays). */
    .graphs = false,
    .begin = async_begin,
    .ready = async_ready,
    .epoch_begin = async_epoch_begin,
    .next = async_next,
    .apply = async_apply,
    .epoch_end = async_epoch_end,
    .evaluate = async_evaluate,
    .params = async_params,
    .destroy = async_destroy,
};

/* A collective session: who does its work, its channels, the queue of
 * collectives callers start and the waits that end them.
 *
 * Callers, the ReduceChunk handler and gRPC file what they have under `mu`
 * and poke the session. Its work — sends, reductions, completions, the
 * tick — is done under `run`, by the thread that pokes when `run` is free
 * and otherwise by the one holding it, before it lets go: a chunk is
 * reduced and sent on by the poller thread that received it, a caller's
 * first chunks go out from the caller's thread, and no event waits for
 * another thread to wake up. */
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "coll_int.h"
#include "base/cond_wait.h"
#include "runtime/where.h"

#define TICK_MS 20

int rt_compress_parse(const char *name)
{
    if (!name || !name[0] || strcmp(name, "none") == 0)
        return RT_COMPRESS_NONE;
    if (strcmp(name, "lz4") == 0)
        return RT_COMPRESS_LZ4;
    if (strcmp(name, "fp16") == 0)
        return RT_COMPRESS_FP16;
    return -1;
}

const char *rt_compress_name(rt_compress c)
{
    return c == RT_COMPRESS_LZ4 ? "lz4" : c == RT_COMPRESS_FP16 ? "fp16" : "none";
}

static void vfail_locked(rt_comm *c, int rc, const char *fmt, va_list ap)
{
    if (c->error)
        return;
    c->error = rc;
    vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
}

void rt_comm_fail_locked(rt_comm *c, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail_locked(c, rc, fmt, ap);
    va_end(ap);
    pthread_cond_broadcast(&c->cv);
}

void rt_comm_fail(rt_comm *c, int rc, const char *fmt, ...)
{
    pthread_mutex_lock(&c->mu);
    va_list ap;
    va_start(ap, fmt);
    vfail_locked(c, rc, fmt, ap);
    va_end(ap);
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    rt_comm_poke(c);
}

/* ---- the session's work ---------------------------------------------------------- */

static rt_comm_op *find_active(rt_comm *c, uint64_t seq)
{
    for (rt_comm_op *op = c->active; op; op = op->next)
        if (op->seq == seq)
            return op;
    return NULL;
}

/* Feeds pending chunks to the ops they belong to. */
static void match_pending(rt_comm *c)
{
    for (rt_chunk **p = &c->pending; *p;) {
        rt_chunk *ch = *p;
        rt_comm_op *op = find_active(c, ch->h.seq);
        if (!op) {
            p = &ch->next;
            continue;
        }
        *p = ch->next;
        rt_ring_consume(c, op, ch);
    }
}

static void close_channels(rt_comm *c)
{
    for (int i = 0; c->to && i < c->world; i++) {
        if (c->to[i].ch)
            rpc_channel_destroy(c->to[i].ch);
        c->to[i].ch = NULL;
    }
}

/* Everything filed since last time, and the tick when it is due. Under
 * run. */
static void drain(rt_comm *c)
{
    if (atomic_exchange(&c->tick_due, false)) {
        if (!rt_comm_failed(c)) {
            uint64_t now = uv_hrtime();
            rt_ring_retry_due(c, now);
            rt_ring_check_progress(c, now);
        }
    }
    pthread_mutex_lock(&c->mu);
    rt_comm_op *started = c->queue;
    c->queue = NULL;
    c->queue_tail = &c->queue;
    rt_chunk *in = c->inbox;
    c->inbox = NULL;
    c->inbox_tail = &c->inbox;
    rt_release *released = c->released;
    c->released = NULL;
    bool stopping = c->stopping, failed = c->error != 0;
    pthread_mutex_unlock(&c->mu);

    /* Keeps arrival order, so that chunks are reduced as they came. */
    rt_chunk **tail = &c->pending;
    while (*tail)
        tail = &(*tail)->next;
    *tail = in;
    while (started) {
        rt_comm_op *op = started;
        started = op->next;
        op->next = c->active;
        c->active = op;
        if (!failed)
            rt_ring_start(c, op);
    }
    rt_ring_released(c, released);
    if (!failed)
        match_pending(c);
    if (failed && !c->failed_seen) {
        c->failed_seen = true;
        rt_ring_cancel_sends(c);
    }
    rt_ring_release(c);
    if (stopping && !c->closed) {
        c->closed = true;
        close_channels(c);
        rpc_client_close(c->client); /* freed with its last call */
        c->client = NULL;
    }
}

/* Lets go of run, first doing what was filed while it was held. */
static void run_unlock(rt_comm *c)
{
    for (;;) {
        pthread_mutex_unlock(&c->run);
        if (!atomic_load(&c->dirty) || pthread_mutex_trylock(&c->run) != 0)
            return;
        atomic_store(&c->dirty, false);
        drain(c);
    }
}

void rt_comm_poke(rt_comm *c)
{
    atomic_store(&c->dirty, true);
    if (pthread_mutex_trylock(&c->run) != 0)
        return; /* its holder looks again before it lets go */
    atomic_store(&c->dirty, false);
    drain(c);
    run_unlock(c);
}

/* The client's guard: a send's completion runs on the poller's thread as a
 * guest of the session, under run. */
static void guest_enter(void *arg)
{
    rt_comm *c = arg;
    atomic_fetch_add(&c->guests, 1);
    pthread_mutex_lock(&c->run);
}

static void guest_leave(void *arg)
{
    rt_comm *c = arg;
    run_unlock(c);
    atomic_fetch_sub(&c->guests, 1); /* the last touch of c */
}

/* The ticker: retries sends that wait and looks for silent peers. */
static void *ticker_main(void *arg)
{
    rt_comm *c = arg;
    pthread_setname_np(pthread_self(), "ferry-coll-tick");
    pthread_mutex_lock(&c->mu);
    while (!c->tick_stop) {
        base_cond_wait_ms(&c->tick_cv, &c->mu, CLOCK_MONOTONIC, TICK_MS);
        if (c->tick_stop)
            break;
        pthread_mutex_unlock(&c->mu);
        atomic_store(&c->tick_due, true);
        rt_comm_poke(c);
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* ---- create and destroy ------------------------------------------------------------ */

/* Kept chunks past this, freed with their session, are handed back to the
 * system: they are gRPC's buffers, allocated on the poller's thread, and
 * glibc keeps what is freed in that thread's arena otherwise (a flood's
 * 64 MiB stayed in the worker's RSS after its session ended). */
#define TRIM_AFTER ((size_t)16 << 20)

static void comm_free(rt_comm *c)
{
    while (c->pending) {
        rt_chunk *ch = c->pending;
        c->pending = ch->next;
        rt_chunk_free(ch);
    }
    while (c->inbox) {
        rt_chunk *ch = c->inbox;
        c->inbox = ch->next;
        rt_chunk_free(ch);
    }
    while (c->released) {
        rt_release *r = c->released;
        c->released = r->next;
        free(r);
    }
    if (c->box)
        rt_relbox_unref(c->box);
    for (int i = 0; c->peers && i < c->world; i++)
        free(c->peers[i]);
    free(c->peers);
    free(c->pins);
    free(c->to);
    free(c->token);
    OPENSSL_cleanse(c->secret, sizeof c->secret);
    pthread_cond_destroy(&c->cv);
    pthread_cond_destroy(&c->tick_cv);
    pthread_mutex_destroy(&c->run);
    pthread_mutex_destroy(&c->mu);
    bool trim = c->stats.held_peak >= TRIM_AFTER;
    free(c);
    if (trim)
        malloc_trim(0);
}

/* One channel to the right neighbour, and one to each exchange partner
 * in a world of 2^k ranks (the right neighbour among them). gRPC connects
 * a channel on its first call, so one the session never uses costs
 * nothing. */
static int open_channels(rt_comm *c, char *err, size_t errlen)
{
    if (c->world == 1)
        return 0;
    if (!(c->to = calloc((size_t)c->world, sizeof *c->to)))
        return FERRY_ENOMEM;
    c->rounds = rt_exchange_rounds(c->world);
    rpc_channel_opts co = {
        .max_payload = c->max_payload, .token = c->token, .version = PROTO_VERSION};
    for (int i = 0; i < c->world; i++) {
        bool partner = false;
        for (int k = 0; k < c->rounds; k++)
            partner |= i == rt_partner(c, (uint32_t)k);
        if (i != rt_right(c) && !partner)
            continue;
        int rc = rpc_channel_create(c->client, c->peers[i], &co, &c->to[i].ch);
        if (rc) {
            snprintf(err, errlen, "cannot open the channel to rank %d (%s): %s", i,
                     c->peers[i], ferry_strerror(rc));
            return rc;
        }
    }
    return 0;
}

int rt_comm_create(rt_hub *hub, const rt_comm_opts *o, rt_comm **out, char *err,
                   size_t errlen)
{
    /* Every failure below leaves a text; the caller's buffer may hold
     * anything on entry. */
    char none[1];
    if (!err || !errlen) {
        err = none;
        errlen = sizeof none;
    }
    err[0] = 0;
    *out = NULL;
    if (!hub || !o || o->world < 1 || o->rank < 0 || o->rank >= o->world ||
        (o->world > 1 && (!o->peers || !o->secret)) || o->compress > RT_COMPRESS_FP16) {
        snprintf(err, errlen, "bad collective session: rank %d of world %d%s%s%s",
                 o ? o->rank : -1, o ? o->world : 0,
                 o && o->world > 1 && !o->peers ? " without peer addresses" : "",
                 o && o->world > 1 && !o->secret ? " without its secret" : "",
                 hub ? "" : " without a hub");
        return FERRY_EINVAL;
    }
    rt_comm *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "no memory for collective session %llu",
                 (unsigned long long)o->session);
        return FERRY_ENOMEM;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->run, NULL);
    pthread_cond_init(&c->cv, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->tick_cv, &ca);
    pthread_condattr_destroy(&ca);
    c->hub = hub;
    c->session = o->session;
    c->rank = o->rank;
    c->world = o->world;
    size_t chunk = o->chunk_bytes ? (o->chunk_bytes + 63) / 64 * 64 : RT_COMM_DEFAULT_CHUNK;
    c->chunk = chunk / sizeof(float);
    c->compress = o->compress;
    if ((c->keyed = o->secret != NULL))
        memcpy(c->secret, o->secret, sizeof c->secret);
    c->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : RT_COMM_DEFAULT_TIMEOUT;
    c->max_payload = o->max_payload ? o->max_payload : RPC_DEFAULT_MAX_PAYLOAD;
    c->inbox_tail = &c->inbox;
    c->queue_tail = &c->queue;
    c->wire_max = RT_COMM_WIRE_CHUNKS * chunk;
    if ((c->box = calloc(1, sizeof *c->box))) {
        pthread_mutex_init(&c->box->mu, NULL);
        c->box->c = c;
        c->box->refs = 1;
    }
    int rc = FERRY_ENOMEM;
    if (o->token && !(c->token = strdup(o->token)))
        goto fail;
    if (!(c->peers = calloc((size_t)c->world, sizeof *c->peers)) ||
        !(c->pins = calloc((size_t)c->world, sizeof *c->pins)))
        goto fail;
    for (int i = 0; o->peers && i < c->world; i++) {
        if (!o->peers[i] || !o->peers[i][0]) {
            snprintf(err, errlen, "no address for rank %d", i);
            rc = FERRY_EINVAL;
            goto fail;
        }
        if (!(c->peers[i] = strdup(o->peers[i])))
            goto fail;
    }

    rpc_guard guard = {guest_enter, guest_leave, c};
    if ((rc = rpc_client_create_on(rt_hub_poller(hub), &guard, &c->client)))
        snprintf(err, errlen, "cannot create the session's rpc client: %s",
                 ferry_strerror(rc));
    if (rc == 0)
        rc = open_channels(c, err, errlen);
    if (rc == 0 && (rc = rt_hub_add(hub, c)))
        snprintf(err, errlen, "a collective session %llu exists already",
                 (unsigned long long)o->session);
    if (rc == 0 && pthread_create(&c->ticker, NULL, ticker_main, c) != 0) {
        rc = FERRY_ENOMEM;
        snprintf(err, errlen, "cannot start the ticker of collective session %llu",
                 (unsigned long long)o->session);
        rt_hub_remove(hub, c);
    }
    if (rc) { /* no call was started: the client goes at once */
        close_channels(c);
        if (c->client)
            rpc_client_close(c->client);
        goto fail;
    }
    *out = c;
    return 0;

fail:
    if (!err[0])
        snprintf(err, errlen, "collective session %llu: %s", (unsigned long long)o->session,
                 ferry_strerror(rc));
    comm_free(c);
    return rc;
}

void rt_comm_destroy(rt_comm *c)
{
    if (!c)
        return;
    rt_hub_remove(c->hub, c);
    if (c->box) { /* sends released from here on are not filed */
        pthread_mutex_lock(&c->box->mu);
        c->box->c = NULL;
        pthread_mutex_unlock(&c->box->mu);
    }
    pthread_mutex_lock(&c->mu);
    c->stopping = true;
    if (!c->error) {
        c->error = FERRY_ECANCELED;
        snprintf(c->errmsg, sizeof c->errmsg, "the collective session ended");
    }
    c->tick_stop = true;
    pthread_cond_signal(&c->tick_cv);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->ticker, NULL);

    /* Cancels the sends and closes the channels and the client; then waits
     * until the last send's completion has left the session, and gRPC has
     * let go of every byte lent (the buffer of an op nobody waited for is
     * the caller's again when this returns). */
    pthread_mutex_lock(&c->run);
    drain(c);
    run_unlock(c);
    for (;;) {
        pthread_mutex_lock(&c->run);
        bool idle = c->sends == NULL;
        run_unlock(c);
        if (idle && c->box) {
            pthread_mutex_lock(&c->box->mu);
            idle = c->box->refs == 1; /* no note unfired but the session's */
            pthread_mutex_unlock(&c->box->mu);
        }
        if (idle && atomic_load(&c->guests) == 0)
            break;
        usleep(200);
    }
    /* Ops nobody waited for, whatever list they were on. */
    while (c->owned) {
        rt_comm_op *op = c->owned;
        c->owned = op->owned;
        rt_ring_op_free(op);
    }
    comm_free(c);
}

int rt_comm_rank(const rt_comm *c)
{
    return c->rank;
}

int rt_comm_world(const rt_comm *c)
{
    return c->world;
}

/* ---- starting and waiting -------------------------------------------------------- */

static int start(rt_comm *c, int kind, float *buf, size_t n, int root, rt_comm_op **out)
{
    *out = NULL;
    if (root < 0 || root >= c->world || (n && !buf))
        return FERRY_EINVAL;
    rt_comm_op *op = calloc(1, sizeof *op);
    if (!op)
        return FERRY_ENOMEM;
    op->kind = kind;
    op->buf = buf;
    op->n = n;
    op->root = root;
    pthread_mutex_lock(&c->mu);
    int rc = c->error;
    if (rc == 0) {
        op->seq = ++c->next_seq;
        *c->queue_tail = op;
        c->queue_tail = &op->next;
        op->owned = c->owned;
        c->owned = op;
    }
    pthread_mutex_unlock(&c->mu);
    if (rc) {
        rt_ring_op_free(op);
        return rc;
    }
    rt_comm_poke(c); /* its first chunks go out from this thread */
    *out = op;
    return 0;
}

int rt_comm_allreduce_start(rt_comm *c, float *buf, size_t n, rt_comm_op **op)
{
    return start(c, RT_OP_ALLREDUCE, buf, n, 0, op);
}

int rt_comm_broadcast_start(rt_comm *c, float *buf, size_t n, int root, rt_comm_op **op)
{
    return start(c, RT_OP_BROADCAST, buf, n, root, op);
}

int rt_comm_wait(rt_comm *c, rt_comm_op *op, bool (*cancelled)(void *), void *arg,
                 char *err, size_t errlen)
{
    if (!op)
        return FERRY_EINVAL;
    pthread_mutex_lock(&c->mu);
    while (!op->done) {
        rt_where_waiting(rt_op_name(op), rt_ring_waits_for(c, op));
        base_cond_wait_ms(&c->cv, &c->mu, CLOCK_REALTIME, TICK_MS);
        if (!op->done && !c->error && cancelled && cancelled(arg)) {
            rt_comm_fail_locked(c, FERRY_ECANCELED,
                                "cancelled while waiting for %s %llu",
                                op->kind == RT_OP_ALLREDUCE ? "all-reduce" : "broadcast",
                                (unsigned long long)op->seq);
            pthread_mutex_unlock(&c->mu);
            rt_comm_poke(c);
            pthread_mutex_lock(&c->mu);
        }
    }
    int rc = op->result;
    /* Done waiting: an evaluation may follow. A failed wait keeps the rank
     * it waited for, to say where a lost peer left the run. */
    if (rc == 0)
        rt_where_waiting(rt_op_name(op), -1);
    if (rc && err)
        snprintf(err, errlen, "%s", c->errmsg);
    for (rt_comm_op **p = &c->owned; *p; p = &(*p)->owned)
        if (*p == op) {
            *p = op->owned;
            break;
        }
    pthread_mutex_unlock(&c->mu);
    rt_ring_op_free(op);
    return rc;
}

void rt_comm_abort(rt_comm *c, const char *why)
{
    rt_comm_fail(c, FERRY_ECANCELED, "%s", why);
}

/* Starts and waits: the blocking forms. */
static int run(rt_comm *c, int kind, float *buf, size_t n, int root,
               bool (*cancelled)(void *), void *arg, char *err, size_t errlen)
{
    rt_comm_op *op;
    int rc = start(c, kind, buf, n, root, &op);
    if (rc) {
        pthread_mutex_lock(&c->mu);
        snprintf(err, errlen, "%s", c->errmsg[0] ? c->errmsg : ferry_strerror(rc));
        pthread_mutex_unlock(&c->mu);
        return rc;
    }
    return rt_comm_wait(c, op, cancelled, arg, err, errlen);
}

int rt_comm_allreduce(rt_comm *c, float *buf, size_t n, bool (*cancelled)(void *),
                      void *arg, char *err, size_t errlen)
{
    return run(c, RT_OP_ALLREDUCE, buf, n, 0, cancelled, arg, err, errlen);
}

int rt_comm_broadcast(rt_comm *c, float *buf, size_t n, int root,
                      bool (*cancelled)(void *), void *arg, char *err, size_t errlen)
{
    return run(c, RT_OP_BROADCAST, buf, n, root, cancelled, arg, err, errlen);
}

void rt_comm_get_stats(rt_comm *c, rt_comm_stats *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->stats;
    pthread_mutex_unlock(&c->mu);
}

void rt_comm_set_timeline(rt_comm *c, struct rt_timeline *tl)
{
    if (c)
        c->tl = tl;
}

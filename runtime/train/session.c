/* The one training session a worker runs: who holds it busy, who owns it,
 * and when another begin may take its place (session.h). Everything here
 * runs on the executor's threads, under the worker's train_lock where the
 * session's fields say so. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <uv.h>

#include "session.h"

/* How long a begin waits for a begin or an epoch whose caller has gone to
 * end, and an end for the call it stopped: such a call sees it within a
 * tick of its collective (20 ms) or a step. */
#define ORPHAN_WAIT_MS 5000

void rt_session_free(rt_train_session *s)
{
    if (!s)
        return;
    rt_session_end_hold(s, 0, NULL);
    OPENSSL_cleanse(s->secret, sizeof s->secret);
    rt_comm_destroy(s->comm);
    rt_trainer_destroy(s->t);
    free(s);
}

void rt_train_session_free(rt_worker *w)
{
    rt_session_free(w->session);
    w->session = NULL;
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
    /* A master that died between two of its calls: its hold's caller is
     * gone (hold.c), or it never placed one. */
    if (!s->busy && rt_session_hold_gone(s))
        return 0;
    if (!s->busy && !s->held && idle_s * 1000 >= RT_HOLD_GRACE_MS)
        return 0;
    char state[96];
    if (s->busy && s->starting)
        snprintf(state, sizeof state,
                 "still starting (loading its data, or waiting for its peers)");
    else if (s->busy)
        snprintf(state, sizeof state, "running an epoch");
    else
        snprintf(state, sizeof state,
                 "between epochs, idle %.1f s of the %.0f s after which "
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

/* Waits, up to ORPHAN_WAIT_MS, while the worker's session is busy with a
 * call that is ending: session `id`'s (`same`: an end that stopped it) or
 * another's (a begin from the successor of a caller who hung up, which
 * waits for that call rather than refuse). Called and returns with
 * train_lock held; lets go of it while it sleeps. */
static void wait_while_leaving(rt_worker *w, uint64_t id, bool same)
{
    uint64_t until = uv_hrtime() + ORPHAN_WAIT_MS * 1000000ull;
    for (;;) {
        rt_train_session *s = w->session;
        if (!s || (s->id == id) != same || !holder_leaving(s) || uv_hrtime() >= until)
            return;
        pthread_mutex_unlock(&w->train_lock);
        usleep(5000);
        pthread_mutex_lock(&w->train_lock);
    }
}

void rt_session_stop_holder(rt_worker *w, uint64_t id)
{
    pthread_mutex_lock(&w->train_lock);
    rt_train_session *s = w->session;
    if (s && s->id == id && s->busy) {
        atomic_store(&s->stop, true);
        s->abandoned = true;
        wait_while_leaving(w, id, true);
    }
    pthread_mutex_unlock(&w->train_lock);
}

bool rt_holder_cancelled(void *arg)
{
    rt_holder_check *h = arg;
    return h->ctx->ops->cancelled(h->ctx) || atomic_load(&h->s->stop);
}

int rt_session_claim(ferry_ctx_t *ctx, uint64_t id, const char *submitter,
                     uint32_t idle_ms, const uint8_t *secret, rt_train_session **out,
                     rt_train_session **old)
{
    rt_worker *w = rt_call_worker(ctx);
    *out = *old = NULL;
    pthread_mutex_lock(&w->train_lock);
    wait_while_leaving(w, id, false);
    rt_train_session *prev = w->session;
    int rc = 0;
    if (prev && prev->busy && prev->id == id)
        rc = ctx->ops->fail(ctx, FERRY_EBUSY, "session %016llx is busy",
                            (unsigned long long)id);
    else
        rc = may_reclaim(ctx, prev, id);
    bool hung_up =
        rc == 0 && prev && prev->id != id && !prev->busy && rt_session_hold_gone(prev);
    if (hung_up)
        prev->abandoned = true;
    /* Marked busy while the new one is built, so that no other begin or
     * epoch slips in; the old one goes first, freeing its memory. */
    rt_train_session *s = rc ? NULL : calloc(1, sizeof *s);
    if (rc == 0 && !s)
        rc = FERRY_ENOMEM;
    if (rc) {
        pthread_mutex_unlock(&w->train_lock);
        return rc;
    }
    *s = (rt_train_session){.id = id, .m = rt_call_module(ctx), .holder = ctx};
    s->busy = s->starting = true;
    s->idle_ms = idle_ms;
    s->started_ns = s->idle_since_ns = uv_hrtime();
    atomic_init(&s->stop, false);
    snprintf(s->owner, sizeof s->owner, "%s from %s", submitter, rt_call_peer(ctx));
    rt_session_set_secret(s, secret);
    w->session = s;
    pthread_mutex_unlock(&w->train_lock);
    if (hung_up)
        ctx->ops->log(ctx, FERRY_LOG_INFO,
                      "session %016llx: its master hung up (its hold was cancelled)",
                      (unsigned long long)prev->id);
    *out = s;
    *old = prev;
    return 0;
}

void rt_session_started(ferry_ctx_t *ctx, rt_train_session *s, int rc)
{
    rt_worker *w = rt_call_worker(ctx);
    pthread_mutex_lock(&w->train_lock);
    s->busy = false;
    s->starting = false;
    s->holder = NULL;
    s->idle_since_ns = uv_hrtime();
    if (rc)
        w->session = NULL;
    pthread_mutex_unlock(&w->train_lock);
    if (rc)
        rt_session_free(s);
}

rt_train_session *rt_session_take(ferry_ctx_t *ctx, uint64_t id, int *rc)
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

void rt_session_give_back(ferry_ctx_t *ctx, rt_train_session *s, bool failed)
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

void rt_session_detach(rt_worker *w, rt_train_session *s)
{
    pthread_mutex_lock(&w->train_lock);
    if (w->session == s)
        w->session = NULL;
    pthread_mutex_unlock(&w->train_lock);
}

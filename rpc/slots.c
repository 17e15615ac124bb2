/* The handler pool's slots: which call each pool thread runs, since when,
 * and whether that call was cancelled without its handler returning.
 *
 * A handler that ignores cancellation keeps its thread. With every thread
 * held that way the pool is gone for good, and calls queued behind it would
 * wait for ever while Ping (inline) still answers. So a call that arrives
 * for the pool then fails at once with RESOURCE_EXHAUSTED naming what holds
 * the slots, calls already queued are failed the same way, and the numbers
 * are there for Ping, Stats and a watchdog (rpc_server_slots). A slot held
 * by a live call is no reason to refuse: it ends, and the queue moves.
 *
 * "Stuck" means cancelled at least STUCK_AFTER_MS ago: a handler that
 * checks its flag returns within milliseconds, and a call that arrives in
 * that moment must not be refused for it.
 *
 * Each slot holds a reference on its call, so that reading it (under the
 * server's lock) never meets a freed call. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rpc_int.h"

#define STUCK_AFTER_MS 1000

static _Thread_local rpc_slot *cur_slot;

/* Whether the call in `slot` is stuck at `now`. */
static bool stuck_at(const rpc_slot *slot, uint64_t now)
{
    uint64_t c = slot->sc ? atomic_load(&slot->sc->cancelled_ns) : 0;
    return c && now - c >= (uint64_t)STUCK_AFTER_MS * 1000000u;
}

void rpc_slot_enter(rpc_slot *slot, rpc_srv_call *sc)
{
    /* Under the server's lock. */
    rpc_srv_call_ref(sc);
    slot->sc = sc;
    slot->since_ns = uv_hrtime();
    snprintf(slot->what, sizeof slot->what, "%s", rpc_srv_method(sc));
    cur_slot = slot;
}

rpc_srv_call *rpc_slot_leave(rpc_slot *slot)
{
    /* Under the server's lock; the caller gives the reference back once it
     * has let go of the lock. */
    rpc_srv_call *sc = slot->sc;
    slot->sc = NULL;
    cur_slot = NULL;
    return sc;
}

void rpc_srv_describe(rpc_srv_call *sc, const char *fmt, ...)
{
    rpc_slot *slot = cur_slot;
    if (!slot || slot->sc != sc)
        return; /* not on a pool thread: the lane and inline handlers */
    char text[RPC_SLOT_WHAT];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    uv_mutex_lock(&sc->srv->lock);
    memcpy(slot->what, text, sizeof text);
    uv_mutex_unlock(&sc->srv->lock);
}

/* Under s->lock. */
static void snapshot(rpc_server *s, rpc_slots_info *out)
{
    memset(out, 0, sizeof *out);
    uint64_t now = uv_hrtime();
    out->slots = s->n_slots;
    for (int i = 0; i < s->n_slots; i++) {
        const rpc_slot *slot = &s->slots[i];
        if (!slot->sc)
            continue;
        out->busy++;
        double age = (double)(now - slot->since_ns) / 1e9;
        if (age >= out->oldest_s) {
            out->oldest_s = age;
            snprintf(out->oldest, sizeof out->oldest, "%s", slot->what);
        }
        if (!stuck_at(slot, now))
            continue;
        uint64_t c = atomic_load(&slot->sc->cancelled_ns);
        out->stuck++;
        double since = (double)(now - c) / 1e9;
        if (since > out->stuck_s)
            out->stuck_s = since;
    }
    for (const rpc_srv_call *q = s->work.head; q; q = q->queue_next)
        out->queued++;
}

/* "Call sleep.so spin for 41 s, cancelled 30 s ago; ..." Under s->lock. */
static void holders(rpc_server *s, char *buf, size_t len)
{
    uint64_t now = uv_hrtime();
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->n_slots && used + 1 < len; i++) {
        const rpc_slot *slot = &s->slots[i];
        if (!slot->sc)
            continue;
        uint64_t c = atomic_load(&slot->sc->cancelled_ns);
        int n = snprintf(buf + used, len - used, "%s%s for %.0f s", used ? "; " : "",
                         slot->what, (double)(now - slot->since_ns) / 1e9);
        if (n > 0 && (size_t)n < len - used && c)
            n += snprintf(buf + used + (size_t)n, len - used - (size_t)n,
                          ", cancelled %.0f s ago", (double)(now - c) / 1e9);
        if (n < 0)
            break;
        used += (size_t)n < len - used ? (size_t)n : len - used - 1;
    }
}

/* Every slot held by a call that was cancelled. Under s->lock. */
static bool all_stuck(rpc_server *s)
{
    if (!s->n_slots)
        return false;
    uint64_t now = uv_hrtime();
    for (int i = 0; i < s->n_slots; i++)
        if (!stuck_at(&s->slots[i], now))
            return false;
    return true;
}

void rpc_server_slots(rpc_server *s, rpc_slots_info *out)
{
    uv_mutex_lock(&s->lock);
    snapshot(s, out);
    uv_mutex_unlock(&s->lock);
}

void rpc_srv_slots(const rpc_srv_call *sc, rpc_slots_info *out)
{
    rpc_server_slots(sc->srv, out);
}

void rpc_server_holders(rpc_server *s, char *buf, size_t len)
{
    uv_mutex_lock(&s->lock);
    holders(s, buf, len);
    uv_mutex_unlock(&s->lock);
}

static void refuse(rpc_srv_call *sc, int slots, const char *held)
{
    rpc_srv_fail(sc, FERRY_EAGAIN,
                 "%s: no executor slot: all %d are held by calls that were cancelled "
                 "and have not returned (%s)",
                 rpc_srv_method(sc), slots, held);
}

bool rpc_slots_refuse(rpc_server *s, rpc_srv_call *sc)
{
    char held[RPC_SLOT_WHAT * 4];
    uv_mutex_lock(&s->lock);
    bool stuck = all_stuck(s);
    if (stuck)
        holders(s, held, sizeof held);
    int n = s->n_slots;
    uv_mutex_unlock(&s->lock);
    if (stuck)
        refuse(sc, n, held);
    return stuck;
}

int rpc_server_shed(rpc_server *s)
{
    char held[RPC_SLOT_WHAT * 4];
    uv_mutex_lock(&s->lock);
    rpc_srv_call *q = NULL;
    if (all_stuck(s)) {
        q = s->work.head;
        s->work.head = s->work.tail = NULL;
        holders(s, held, sizeof held);
    }
    int n = s->n_slots;
    uv_mutex_unlock(&s->lock);
    int shed = 0;
    while (q) {
        rpc_srv_call *next = q->queue_next;
        refuse(q, n, held);
        q = next;
        shed++;
    }
    return shed;
}

/* A rank's timeline: three preallocated arrays (the reply's repeated fields
 * point into them as they are) and an atomic index into them. */
#include <stdatomic.h>
#include <stdlib.h>

#include <string.h>

#include "timeline.h"
#include "trainer_int.h"

struct rt_timeline {
    size_t cap;
    atomic_size_t next;
    atomic_uint_least64_t dropped;
    atomic_size_t chunks; /* chunk events this epoch */
    uint32_t *what;
    uint64_t *start_ns, *dur_ns;
};

rt_timeline *rt_timeline_create(size_t cap)
{
    rt_timeline *tl = calloc(1, sizeof *tl);
    if (!tl)
        return NULL;
    tl->cap = cap ? cap : RT_TIMELINE_EVENTS;
    tl->what = calloc(tl->cap, sizeof *tl->what);
    tl->start_ns = calloc(tl->cap, sizeof *tl->start_ns);
    tl->dur_ns = calloc(tl->cap, sizeof *tl->dur_ns);
    if (!tl->what || !tl->start_ns || !tl->dur_ns) {
        rt_timeline_destroy(tl);
        return NULL;
    }
    return tl;
}

void rt_timeline_destroy(rt_timeline *tl)
{
    if (!tl)
        return;
    free(tl->what);
    free(tl->start_ns);
    free(tl->dur_ns);
    free(tl);
}

static void record(rt_timeline *tl, proto_tl_kind kind, uint32_t arg, uint64_t start,
                   uint64_t now)
{
    size_t i = atomic_fetch_add_explicit(&tl->next, 1, memory_order_relaxed);
    if (i >= tl->cap) {
        atomic_fetch_add_explicit(&tl->dropped, 1, memory_order_relaxed);
        return;
    }
    tl->what[i] = proto_tl_what(kind, arg);
    tl->start_ns[i] = start;
    tl->dur_ns[i] = now > start ? now - start : 0;
}

void rt_timeline_chunk(rt_timeline *tl, proto_tl_kind kind, uint32_t arg, uint64_t seq,
                       uint64_t start_ns)
{
    if (!tl || seq % RT_TIMELINE_CHUNK_EVERY || !start_ns)
        return;
    if (atomic_fetch_add_explicit(&tl->chunks, 1, memory_order_relaxed) >= tl->cap / 2) {
        atomic_fetch_add_explicit(&tl->dropped, 1, memory_order_relaxed);
        return;
    }
    record(tl, kind, arg, start_ns, uv_hrtime());
}

double rt_timeline_since(rt_timeline *tl, proto_tl_kind kind, uint32_t arg, double t0)
{
    if (!tl)
        return t0;
    uint64_t now = uv_hrtime(), start = (uint64_t)(t0 * 1e9);
    record(tl, kind, arg, start, now);
    return (double)now / 1e9;
}

void rt_timeline_view(const rt_timeline *tl, rt_timeline_events *out)
{
    size_t n = atomic_load(&tl->next);
    *out = (rt_timeline_events){.n = n < tl->cap ? n : tl->cap,
                                .what = tl->what,
                                .start_ns = tl->start_ns,
                                .dur_ns = tl->dur_ns,
                                .dropped = atomic_load(&tl->dropped)};
}

void *rt_timeline_copy(const rt_timeline *tl, rt_timeline_events *out)
{
    *out = (rt_timeline_events){0};
    if (!tl)
        return NULL;
    rt_timeline_events v;
    rt_timeline_view(tl, &v);
    size_t n = v.n;
    char *blk = malloc(n * (2 * sizeof(uint64_t) + sizeof(uint32_t)) + 1);
    if (!blk) {
        out->dropped = v.dropped + n;
        return NULL;
    }
    uint64_t *start = memcpy(blk, v.start_ns, n * sizeof *start);
    uint64_t *dur = memcpy(start + n, v.dur_ns, n * sizeof *dur);
    uint32_t *what = memcpy(dur + n, v.what, n * sizeof *what);
    *out = (rt_timeline_events){
        .n = n, .what = what, .start_ns = start, .dur_ns = dur, .dropped = v.dropped};
    return blk;
}

void rt_timeline_reset(rt_timeline *tl)
{
    if (!tl)
        return;
    atomic_store(&tl->next, 0);
    atomic_store(&tl->dropped, 0);
    atomic_store(&tl->chunks, 0);
}

rt_timeline *rt_trainer_timeline(rt_trainer *t)
{
    return t->tl;
}

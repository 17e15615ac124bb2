/* runtime/train — a rank's timeline (--timeline): what the trainer's thread
 * did and when, as spans on the worker's monotonic clock, sent with each
 * epoch's reply.
 *
 * Recording must cost next to nothing, since a run may leave it on: the
 * buffer is allocated once, with the session; an event is one atomic
 * increment and three stores, and one the buffer has no room for is counted
 * and dropped. A NULL timeline records nothing. */
#ifndef FERRY_RUNTIME_TRAIN_TIMELINE_H
#define FERRY_RUNTIME_TRAIN_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "proto/timeline.h"

/* Events an epoch may hold: a step records 3 to 4 plus one a bucket, so
 * this covers epochs of over 10000 steps at 24 bytes an event. */
#define RT_TIMELINE_EVENTS (1u << 16)

typedef struct rt_timeline rt_timeline;

/* A timeline of `cap` events (0: RT_TIMELINE_EVENTS); NULL without memory. */
rt_timeline *rt_timeline_create(size_t cap);
void rt_timeline_destroy(rt_timeline *tl);

/* Now, as rt_timeline_since takes its start. */
static inline double rt_timeline_now(void)
{
    return (double)uv_hrtime() / 1e9;
}

/* Records an event of `kind` about `arg` from `t0` (seconds on uv_hrtime's
 * clock, as rt_train_now gives) to now, and returns its end (`t0` when `tl`
 * is NULL). */
double rt_timeline_since(rt_timeline *tl, proto_tl_kind kind, uint32_t arg, double t0);

/* The collectives' chunk events (send, receive, reduce, the wait for a
 * slower rank), from `start_ns` (uv_hrtime) to now, for collective `seq`.
 * They can be many (a step sends every chunk of every bucket), so they are
 * sampled: only collectives whose seq is a multiple of
 * RT_TIMELINE_CHUNK_EVERY record them, and at most half the buffer holds
 * them; past that they are counted as dropped. Any thread. */
#define RT_TIMELINE_CHUNK_EVERY 4
void rt_timeline_chunk(rt_timeline *tl, proto_tl_kind kind, uint32_t arg, uint64_t seq,
                       uint64_t start_ns);

/* The events so far, in the order recorded, valid until the next reset. */
typedef struct rt_timeline_events {
    size_t n;
    const uint32_t *what;
    const uint64_t *start_ns, *dur_ns;
    uint64_t dropped;
} rt_timeline_events;

void rt_timeline_view(const rt_timeline *tl, rt_timeline_events *out);
/* Empties it for the next epoch. NULL: nothing. */
void rt_timeline_reset(rt_timeline *tl);

/* A copy of the events so far that outlives the timeline (an epoch's reply
 * is packed once the session may be someone else's): *out points into the
 * returned block, to free(). NULL, with *out empty, when `tl` is NULL or
 * there is no memory (the events then count as dropped). */
void *rt_timeline_copy(const rt_timeline *tl, rt_timeline_events *out);

#endif

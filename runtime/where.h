/* runtime/where — where each running call of this worker is: its module and
 * function, its step, its phase (forward/backward, waiting on the all-reduce
 * for rank N, a push to a shard, ...) and when it last made progress. The
 * master's stall inspector reads every record through Stats when a call has
 * waited too long, to name the rank that holds the others up.
 *
 * A record belongs to the thread that entered it: the hooks below, called
 * from that thread, change its own record and cost a mutex each. Hooks on a
 * thread that entered none do nothing. */
#ifndef FERRY_RUNTIME_WHERE_H
#define FERRY_RUNTIME_WHERE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"

/* Records kept at once; a call beyond them is simply not recorded. */
#define RT_WHERE_MAX 16

/* One record as rt_where_list() copies it out. */
typedef struct rt_where_info {
    char module[64];
    char function[64];
    char phase[96];   /* "" before the first hook */
    long epoch;       /* 0: not training */
    uint64_t step;    /* the step within the epoch, 1-based; 0: none */
    int waits_for;    /* the rank this call waits for; -1: none known */
    double idle_s;    /* since its last progress */
    double running_s; /* since it entered */
} rt_where_info;

/* The calling thread runs `function` of `module` until rt_where_leave(). */
void rt_where_enter(const char *module, const char *function);
void rt_where_leave(void);

/* A new step: progress, and the phase it starts in. */
void rt_where_step(long epoch, uint64_t step, const char *phase);
/* The phase changes (progress); `waits_for` the rank it waits on, -1: none. */
void rt_where_phase(const char *phase, int waits_for);
/* The same phase, now waiting on `waits_for`: progress only when that rank
 * changed (a collective moving on to its next peer). */
void rt_where_waiting(const char *phase, int waits_for);

/* Copies up to `max` records into out; returns how many. Any thread. */
size_t rt_where_list(rt_where_info *out, size_t max);

/* The last call that recorded a step, as it was when it ended, into *out
 * (idle_s: the seconds since it ended); false when none has. Any thread. */
bool rt_where_ended(rt_where_info *out);

/* The records as a Stats reply's where_* lists and ended_* fields,
 * pointing into `buf`. */
typedef struct rt_where_stats {
    rt_where_info info[RT_WHERE_MAX];
    char *module[RT_WHERE_MAX], *function[RT_WHERE_MAX], *phase[RT_WHERE_MAX];
    int64_t epoch[RT_WHERE_MAX];
    uint64_t step[RT_WHERE_MAX];
    int32_t waits_for[RT_WHERE_MAX];
    double idle_s[RT_WHERE_MAX];
    rt_where_info ended;
} rt_where_stats;
void rt_where_to_stats(rt_where_stats *buf, proto_stats_reply *out);

#endif

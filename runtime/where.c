/* The per-call "where am I" records: a small table under one mutex, each
 * thread pointing at its own row. Hooks run a few times a step, far from
 * the inner loops, so a mutex costs nothing measurable. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <uv.h>

#include "where.h"

typedef struct row {
    bool used;
    rt_where_info info;
    uint64_t entered_ns, progress_ns;
} row;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static row rows[RT_WHERE_MAX];
/* The last call that recorded a step, as it was when it ended: a training
 * call that a lost peer failed keeps where it waited for that peer. */
static row ended;
static uint64_t ended_ns;
static _Thread_local int mine = -1;

void rt_where_enter(const char *module, const char *function)
{
    uint64_t now = uv_hrtime();
    pthread_mutex_lock(&mu);
    mine = -1;
    for (int i = 0; i < RT_WHERE_MAX && mine < 0; i++)
        if (!rows[i].used) {
            mine = i;
            rows[i] = (row){.used = true, .entered_ns = now, .progress_ns = now};
            rt_where_info *w = &rows[i].info;
            snprintf(w->module, sizeof w->module, "%s", module ? module : "");
            snprintf(w->function, sizeof w->function, "%s", function ? function : "");
            w->waits_for = -1;
        }
    pthread_mutex_unlock(&mu);
}

void rt_where_leave(void)
{
    if (mine < 0)
        return;
    pthread_mutex_lock(&mu);
    if (rows[mine].info.step) {
        ended = rows[mine];
        ended_ns = uv_hrtime();
    }
    rows[mine].used = false;
    pthread_mutex_unlock(&mu);
    mine = -1;
}

/* Sets the calling thread's phase; progress when `progress`. A copy, not
 * snprintf: this runs several times a step. */
static void set(const char *phase, int waits_for, bool progress)
{
    row *r = &rows[mine];
    size_t len = strnlen(phase, sizeof r->info.phase - 1);
    memcpy(r->info.phase, phase, len);
    r->info.phase[len] = 0;
    r->info.waits_for = waits_for;
    if (progress)
        r->progress_ns = uv_hrtime();
}

void rt_where_step(long epoch, uint64_t step, const char *phase)
{
    if (mine < 0)
        return;
    pthread_mutex_lock(&mu);
    rows[mine].info.epoch = epoch;
    rows[mine].info.step = step;
    set(phase, -1, true);
    pthread_mutex_unlock(&mu);
}

void rt_where_phase(const char *phase, int waits_for)
{
    if (mine < 0)
        return;
    pthread_mutex_lock(&mu);
    set(phase, waits_for, true);
    pthread_mutex_unlock(&mu);
}

void rt_where_waiting(const char *phase, int waits_for)
{
    if (mine < 0)
        return;
    pthread_mutex_lock(&mu);
    const rt_where_info *w = &rows[mine].info;
    if (w->waits_for != waits_for || strcmp(w->phase, phase) != 0)
        set(phase, waits_for, true);
    pthread_mutex_unlock(&mu);
}

size_t rt_where_list(rt_where_info *out, size_t max)
{
    uint64_t now = uv_hrtime();
    size_t n = 0;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < RT_WHERE_MAX && n < max; i++) {
        if (!rows[i].used)
            continue;
        out[n] = rows[i].info;
        out[n].idle_s = (double)(now - rows[i].progress_ns) / 1e9;
        out[n].running_s = (double)(now - rows[i].entered_ns) / 1e9;
        n++;
    }
    pthread_mutex_unlock(&mu);
    return n;
}

bool rt_where_ended(rt_where_info *out)
{
    pthread_mutex_lock(&mu);
    bool any = ended.used;
    if (any) {
        *out = ended.info;
        out->idle_s = (double)(uv_hrtime() - ended_ns) / 1e9;
        out->running_s = (double)(ended_ns - ended.entered_ns) / 1e9;
    }
    pthread_mutex_unlock(&mu);
    return any;
}

void rt_where_to_stats(rt_where_stats *b, proto_stats_reply *out)
{
    size_t n = rt_where_list(b->info, RT_WHERE_MAX);
    for (size_t i = 0; i < n; i++) {
        b->module[i] = b->info[i].module;
        b->function[i] = b->info[i].function;
        b->phase[i] = b->info[i].phase;
        b->epoch[i] = b->info[i].epoch;
        b->step[i] = b->info[i].step;
        b->waits_for[i] = b->info[i].waits_for;
        b->idle_s[i] = b->info[i].idle_s;
    }
    out->n_where_module = out->n_where_function = out->n_where_phase = n;
    out->n_where_epoch = out->n_where_step = out->n_where_waits_for = n;
    out->n_where_idle_s = n;
    out->where_module = b->module;
    out->where_function = b->function;
    out->where_phase = b->phase;
    out->where_epoch = b->epoch;
    out->where_step = b->step;
    out->where_waits_for = b->waits_for;
    out->where_idle_s = b->idle_s;
    out->ended_function = out->ended_phase = "";
    if (rt_where_ended(&b->ended)) {
        out->ended_function = b->ended.function;
        out->ended_phase = b->ended.phase;
        out->ended_epoch = b->ended.epoch;
        out->ended_step = b->ended.step;
        out->ended_waits_for = b->ended.waits_for;
        out->ended_ago_s = b->ended.idle_s;
    }
}

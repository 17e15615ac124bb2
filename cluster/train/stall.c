/* The stall inspector: while the run's calls are in flight it asks every
 * rank, a few times a threshold, where its call is (Stats' where_* lists,
 * kept by runtime/where.c). A rank waiting (on a chunk of a collective, on a
 * shard) with no progress for the warning threshold, or a rank that has
 * not answered for that long, is a stall: the run's stall event gets a
 * report of which ranks have not arrived and what every rank is doing. Past
 * the abort threshold the run's calls are ended and the report is the
 * run's error. Ranks that compute, however long, are not stalled: an
 * evaluation or a slow step makes progress nobody can see. */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "base/base.h"
#include "train_int.h"

/* A rank's state as its last answer (or silence) showed it. */
typedef struct rank_seen {
    uint64_t answered_ns; /* when it last answered */
    bool silent;          /* this round: no answer */
    char why[160];        /* why not */
    bool waiting;         /* its call waits on somebody */
    int waits_for;        /* that rank; -1: none known */
    double idle_s;        /* its call's time since progress */
    char doing[320];      /* "mlp.so ferry.train.epoch, epoch 1 step 12, all-reduce" */
} rank_seen;

struct ct_stall {
    ct_run *run;
    int64_t warn_ms, abort_ms, timeout_ms;
    int pending; /* answers awaited this round */
    rank_seen *seen;
    bool reported; /* this stall was said */
    bool aborted, told;
    char *report;
};

int ct_stall_parse(const char *text, int64_t *ms)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || !isfinite(v) || v < 0)
        return FERRY_EINVAL;
    double unit = 1000;
    if (strcmp(end, "ms") == 0)
        unit = 1;
    else if (strcmp(end, "m") == 0)
        unit = 60000;
    else if (strcmp(end, "h") == 0)
        unit = 3600000;
    else if (*end && strcmp(end, "s") != 0)
        return FERRY_EINVAL;
    if (v * unit > 24.0 * 3600 * 1000)
        return FERRY_EINVAL;
    *ms = (int64_t)llround(v * unit);
    return 0;
}

/* A report as it is written: a buffer sized for every rank's line. */
typedef struct text {
    char *buf;
    size_t len, cap;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...)
{
    if (t->len + 1 >= t->cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len = t->len + (size_t)n < t->cap ? t->len + (size_t)n : t->cap - 1;
}

/* What a worker's process is doing, read from /proc when it runs here. */
static void process_state(const char *target, int32_t pid, char *buf, size_t len)
{
    bool local = strncmp(target, "127.", 4) == 0 ||
                 strncmp(target, "localhost:", 10) == 0 ||
                 strncmp(target, "[::1]:", 6) == 0;
    buf[0] = 0;
    if (!local || pid <= 0)
        return;
    char path[64], stat[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(stat, 1, sizeof stat - 1, f) : 0;
    if (f)
        fclose(f);
    stat[n] = 0;
    const char *paren = strrchr(stat, ')');
    char state = paren && paren[1] == ' ' ? paren[2] : 0;
    if (!f)
        snprintf(buf, len, ": its process %d is gone", (int)pid);
    else if (state == 'T')
        snprintf(buf, len, ": its process %d is stopped (SIGSTOP)", (int)pid);
    else if (state == 't')
        snprintf(buf, len, ": its process %d is stopped by a debugger", (int)pid);
    else if (state == 'Z')
        snprintf(buf, len, ": its process %d has exited", (int)pid);
    else if (state == 'D')
        snprintf(buf, len, ": its process %d waits in the kernel (state D)", (int)pid);
}

/* The record of the run's call among a rank's: a ferry.train.* function. */
static void take_where(rank_seen *s, const proto_stats_reply *rep)
{
    size_t n = rep->n_where_module;
    if (rep->n_where_function != n || rep->n_where_phase != n ||
        rep->n_where_epoch != n || rep->n_where_step != n ||
        rep->n_where_waits_for != n || rep->n_where_idle_s != n)
        n = 0;
    snprintf(s->doing, sizeof s->doing, "no training call running");
    for (size_t i = 0; i < n; i++) {
        if (strncmp(rep->where_function[i], "ferry.train.", 12) != 0)
            continue;
        int at = snprintf(s->doing, sizeof s->doing, "%s %s", rep->where_module[i],
                          rep->where_function[i]);
        if (rep->where_step[i] && at > 0 && (size_t)at < sizeof s->doing)
            at += snprintf(s->doing + at, sizeof s->doing - (size_t)at,
                           ", epoch %" PRId64 " step %" PRIu64, rep->where_epoch[i],
                           rep->where_step[i]);
        if (rep->where_phase[i][0] && at > 0 && (size_t)at < sizeof s->doing)
            snprintf(s->doing + at, sizeof s->doing - (size_t)at, ", %s",
                     rep->where_phase[i]);
        s->waits_for = rep->where_waits_for[i];
        s->waiting = s->waits_for >= 0;
        s->idle_s = rep->where_idle_s[i];
        return;
    }
}

/* How long rank r has held things up as far as can be seen, in ms. */
static double stuck_ms(const ct_stall *st, int r, uint64_t now)
{
    const rank_seen *s = &st->seen[r];
    if (s->silent)
        return (double)(now - s->answered_ns) / 1e6;
    return s->waiting ? s->idle_s * 1e3 : 0;
}

/* Whether rank r is one the others wait for and has not come itself. */
static bool not_arrived(const ct_stall *st, int r)
{
    const ct_run *run = st->run;
    if (st->seen[r].waiting && !st->seen[r].silent)
        return false;
    for (int q = 0; q < run->k; q++)
        if (run->alive[q] && q != r && st->seen[q].waiting && st->seen[q].waits_for == r)
            return true;
    return st->seen[r].silent;
}

/* The cluster's worker that rank r runs on, and back: a run that left some
 * out or took some in has ranks on other workers than their numbers. */
static int worker_of(const ct_run *run, int r)
{
    return run->node ? run->node[r] : r;
}

static int rank_of(const ct_run *run, int worker)
{
    for (int r = 0; r < run->k; r++)
        if (worker_of(run, r) == worker)
            return r;
    return -1;
}

/* The report, malloc'd; NULL when out of memory. */
static char *build_report(ct_stall *st, double worst_ms, uint64_t now)
{
    ct_run *run = st->run;
    text t = {.cap = 256 + (size_t)run->k * 640};
    if (!(t.buf = malloc(t.cap)))
        return NULL;
    t.buf[0] = 0;
    put(&t, "no progress for %.1f s; not arrived:", worst_ms / 1e3);
    bool any = false;
    for (int r = 0; r < run->k; r++)
        if (run->alive[r] && not_arrived(st, r)) {
            put(&t, "%s rank %d", any ? "," : "", r);
            any = true;
        }
    if (!any)
        put(&t, " none known");
    for (int r = 0; r < run->k; r++) {
        if (!run->alive[r])
            continue;
        const rank_seen *s = &st->seen[r];
        const char *target = cluster_target(run->cl, worker_of(run, r));
        if (s->silent) {
            char state[128];
            process_state(target, cluster_worker_pid(run->cl, worker_of(run, r)), state,
                          sizeof state);
            put(&t, "\n  rank %d (%s): no answer for %.1f s", r, target,
                (double)(now - s->answered_ns) / 1e9);
            if (state[0])
                put(&t, "%s", state);
            else
                put(&t, " (%s)", s->why);
            continue;
        }
        put(&t, "\n  rank %d (%s): %s", r, target, s->doing);
        if (s->waiting && s->waits_for >= 0)
            put(&t, ", waiting for rank %d", s->waits_for);
        if (s->waiting || s->idle_s > 0)
            put(&t, ", %.1f s since its last progress", s->idle_s);
    }
    return t.buf;
}

static void stall_abort(ct_stall *st)
{
    ct_run *run = st->run;
    /* By the cluster's worker, not by rank. */
    size_t n = cluster_size(run->cl);
    bool down[n];
    memset(down, 0, sizeof down);
    for (int r = 0; r < run->k; r++) {
        bool silent = run->alive[r] && st->seen[r].silent;
        down[worker_of(run, r)] = silent;
        /* Not asked to discard its session: it would not answer that either. */
        if (silent)
            run->alive[r] = false;
    }
    st->aborted = true;
    cluster_abort_calls(run->cl, down,
                        "ended by the stall inspector: it does not answer");
}

/* A round's answers are in: a stall is said once, and ended past the
 * abort threshold. */
static void judge(ct_stall *st)
{
    ct_run *run = st->run;
    uint64_t now = uv_hrtime();
    double worst = 0;
    for (int r = 0; r < run->k; r++)
        if (run->alive[r])
            worst = fmax(worst, stuck_ms(st, r, now));
    int64_t warn = st->warn_ms ? st->warn_ms : st->abort_ms;
    if (worst < (double)warn) {
        st->reported = false;
        return;
    }
    bool ending = st->abort_ms && worst >= (double)st->abort_ms && !st->aborted;
    if (st->reported && !ending)
        return;
    char *report = build_report(st, worst, now);
    if (!report)
        return;
    if (!st->reported && st->warn_ms && run->ev && run->ev->stall)
        run->ev->stall(run->ev->data, report);
    st->reported = true;
    if (ending) {
        free(st->report);
        st->report = base_asprintf("stalled past the abort threshold of %.1f s, the run "
                                   "is ended: %s",
                                   (double)st->abort_ms / 1e3, report);
        free(report);
        stall_abort(st);
        return;
    }
    free(report);
}

static void on_stats(void *data, int worker, const proto_stats_reply *rep,
                     const char *err)
{
    ct_stall *st = data;
    int rank = rank_of(st->run, worker);
    if (rank < 0) { /* left the run since it was asked */
        if (--st->pending == 0)
            judge(st);
        return;
    }
    rank_seen *s = &st->seen[rank];
    s->waiting = false;
    s->waits_for = -1;
    s->idle_s = 0;
    s->silent = rep == NULL;
    if (rep) {
        s->answered_ns = uv_hrtime();
        take_where(s, rep);
    } else {
        snprintf(s->why, sizeof s->why, "%s", err ? err : "no reply");
    }
    if (--st->pending == 0)
        judge(st);
}

static void on_tick(void *data)
{
    ct_stall *st = data;
    ct_run *run = st->run;
    if (st->pending > 0 || st->aborted)
        return;
    for (int r = 0; r < run->k; r++) {
        if (!run->alive[r])
            continue;
        int rc = cluster_stats_start(run->cl, worker_of(run, r), st->timeout_ms);
        if (rc == 0) {
            st->pending++;
            continue;
        }
        st->seen[r].silent = true;
        snprintf(st->seen[r].why, sizeof st->seen[r].why, "cannot ask it: %s",
                 ferry_strerror(rc));
    }
    if (st->pending == 0)
        judge(st);
}

/* A threshold from its flag, else from the cluster file. */
static int threshold(ct_run *run, const char *flag, const char *text, int64_t file_ms,
                     int64_t *ms)
{
    *ms = file_ms;
    if (!text || !text[0] || ct_stall_parse(text, ms) == 0)
        return 0;
    ct_fail(run, "--%s %s: expected a duration such as 500ms, 30s or 2m (0: never)", flag,
            text);
    return FERRY_EINVAL;
}

int ct_stall_start(ct_run *run)
{
    int64_t warn, abort_ms;
    int rc =
        threshold(run, "stall-warn", run->o->stall_warn, run->o->stall_warn_ms, &warn);
    if (rc == 0)
        rc = threshold(run, "stall-abort", run->o->stall_abort, run->o->stall_abort_ms,
                       &abort_ms);
    if (rc || (warn == 0 && abort_ms == 0))
        return rc;
    ct_stall *st = calloc(1, sizeof *st);
    if (!st || !(st->seen = calloc((size_t)run->cap, sizeof *st->seen))) {
        free(st);
        return FERRY_ENOMEM;
    }
    *st = (ct_stall){.run = run, .warn_ms = warn, .abort_ms = abort_ms, .seen = st->seen};
    int64_t first = warn && (!abort_ms || warn < abort_ms) ? warn : abort_ms;
    /* A few asks a threshold: a stall is said within about 1.5 of them. */
    int64_t period = first / 4 < 50 ? 50 : first / 4 > 5000 ? 5000 : first / 4;
    st->timeout_ms = first / 2 < 200 ? 200 : first / 2 > 2000 ? 2000 : first / 2;
    uint64_t now = uv_hrtime();
    for (int r = 0; r < run->k; r++)
        st->seen[r] = (rank_seen){.answered_ns = now, .waits_for = -1};
    run->stall = st;
    if ((rc = cluster_watch(run->cl, period, on_tick, on_stats, st))) {
        ct_stall_stop(run);
        return rc;
    }
    return 0;
}

void ct_stall_stop(ct_run *run)
{
    ct_stall *st = run->stall;
    if (!st)
        return;
    cluster_watch(run->cl, 0, NULL, NULL, NULL);
    free(st->seen);
    free(st->report);
    free(st);
    run->stall = NULL;
}

bool ct_stall_aborted(const ct_run *run)
{
    return run->stall && run->stall->aborted;
}

const char *ct_stall_abort_report(ct_run *run)
{
    ct_stall *st = run->stall;
    if (!st || !st->report || st->told)
        return NULL;
    st->told = true;
    return st->report;
}

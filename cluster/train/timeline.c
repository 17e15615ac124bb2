/* The run's timeline (--timeline FILE): every rank's events, as each
 * epoch's replies bring them, written at once to FILE as Chrome trace-event
 * JSON (the format Perfetto and chrome://tracing open): one process a
 * worker, one thread a track, "X" events in microseconds on the
 * submitter's clock. The collectives' chunk events are sampled (one
 * collective in RT_TIMELINE_CHUNK_EVERY: runtime/train/timeline.h).
 *
 * Each worker stamps its events with its own monotonic clock. Before the
 * run begins, its offset to this process's clock is measured as NTP does:
 * a ping sent at t0 comes back at t3 with the worker's clock tw, taken to
 * be read halfway, so offset = tw - (t0 + t3) / 2, within half the round
 * trip; the ping of the smallest round trip out of a few wins. Two
 * machines' clocks drift apart by some parts per million, so the offset is
 * measured again after each epoch, and that epoch's events are moved by the
 * mean of the offsets before and after it. The file says the worst
 * uncertainty: half the round trip, plus half the drift over an epoch. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <uv.h>

#include "proto/timeline.h"
#include "train_int.h"

/* Pings per worker for its clock offset: the smallest round trip wins. */
#define CLOCK_PINGS 8
/* After each epoch, between two calls the workers wait for. */
#define CLOCK_PINGS_AGAIN 4

/* The tracks (threads) of a worker's process; a bucket's is BUCKET_TID + k. */
enum {
    COMPUTE_TID = 1,
    DATA_TID,
    EVAL_TID,
    PUSH_TID,
    PULL_TID,
    CKPT_TID,
    WAIT_TID,
    SEND_TID,
    RECV_TID,
    REDUCE_TID,
    MODULE_TID,
    BUCKET_TID = 100
};
#define FIXED_TIDS 13

typedef struct tl_rank {
    int64_t offset_ns;    /* the worker's clock minus ours, as last measured */
    int64_t uncertain_ns; /* half that best round trip; < 0: not measured */
    int64_t first_ns;     /* the offset before the run */
    int64_t applied_ns;   /* moves the epoch's events being written */
    int64_t worst_ns;     /* the largest uncertainty of an epoch; < 0: none */
    bool named[FIXED_TIDS];
    uint32_t buckets_named;
} tl_rank;

struct ct_timeline {
    FILE *f;
    uint64_t base_ns; /* our clock at ts 0 */
    bool first;       /* no event written yet */
    uint64_t events, dropped;
    uint32_t epoch; /* the epoch whose events are being written */
    tl_rank *rank;
};

/* `s` as a JSON string literal. */
static void put_str(FILE *f, const char *s)
{
    json_t *j = json_string(s);
    if (!j || json_dumpf(j, f, JSON_ENCODE_ANY) != 0)
        fputs("\"?\"", f);
    json_decref(j);
}

static void sep(ct_timeline *tl)
{
    fputs(tl->first ? "\n" : ",\n", tl->f);
    tl->first = false;
}

static void thread_name(ct_timeline *tl, int pid, int tid, const char *name)
{
    sep(tl);
    fprintf(tl->f,
            "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":"
            "{\"name\":",
            pid, tid);
    put_str(tl->f, name);
    fprintf(tl->f,
            "}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,"
            "\"tid\":%d,\"args\":{\"sort_index\":%d}}",
            pid, tid, tid);
}

/* Each worker's offset, from the best of `pings` pings of them all; a
 * worker that does not answer keeps its last. */
static void measure_clocks(ct_run *run, ct_timeline *tl, int pings)
{
    int64_t half_best[run->k];
    for (int r = 0; r < run->k; r++)
        half_best[r] = -1;
    for (int i = 0; i < pings; i++) {
        const cluster_worker *w = NULL;
        uint64_t t0 = uv_hrtime();
        cluster_survey(run->cl, false, &w);
        uint64_t t3 = uv_hrtime();
        for (size_t j = 0; w && j < cluster_size(run->cl); j++) {
            int r = w[j].rank;
            if (r < 0 || r >= run->k || !w[j].ping || !w[j].ping->clock_ns)
                continue;
            tl_rank *tr = &tl->rank[r];
            int64_t half = (int64_t)(t3 - t0) / 2;
            if (half_best[r] >= 0 && half >= half_best[r])
                continue;
            half_best[r] = tr->uncertain_ns = half;
            tr->offset_ns = (int64_t)(w[j].ping->clock_ns - t0) - half;
        }
    }
}

/* The module's load on every worker (shipped where it was missing, then
 * loaded), as this process saw it: one event on each worker's track, from
 * the first question to the last answer. */
static void module_load(ct_run *run, ct_timeline *tl, const cluster_module *m)
{
    for (int r = 0; r < run->k; r++) {
        thread_name(tl, r, MODULE_TID, "module load");
        sep(tl);
        fprintf(tl->f,
                "{\"name\":\"module load\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":0,"
                "\"dur\":%.3f,\"args\":{\"module\":",
                r, MODULE_TID, (double)(m->load_end_ns - m->load_start_ns) / 1e3);
        put_str(tl->f, m->name);
        fprintf(tl->f, ",\"shipped_to\":%d}}", m->shipped);
        tl->events++;
    }
}

int ct_timeline_open(ct_run *run)
{
    const char *path = run->o->timeline;
    if (!path || !path[0])
        return 0;
    ct_timeline *tl = calloc(1, sizeof *tl);
    if (!tl || !(tl->rank = calloc((size_t)run->cap, sizeof *tl->rank))) {
        free(tl);
        ct_fail(run, "no memory for the timeline");
        return FERRY_ENOMEM;
    }
    if (!(tl->f = fopen(path, "w"))) {
        ct_fail(run, "--timeline %s: cannot write it: %s", path, strerror(errno));
        free(tl->rank);
        free(tl);
        return FERRY_EIO;
    }
    run->tl = tl;
    for (int r = 0; r < run->k; r++)
        tl->rank[r].uncertain_ns = tl->rank[r].worst_ns = -1;
    measure_clocks(run, tl, CLOCK_PINGS);
    for (int r = 0; r < run->k; r++)
        tl->rank[r].first_ns = tl->rank[r].offset_ns;
    /* The trace begins where the module's load did, when that is known. */
    const cluster_module *m = run->m;
    bool loaded = m && m->load_end_ns > m->load_start_ns;
    tl->base_ns = loaded ? m->load_start_ns : uv_hrtime();
    tl->first = true;
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", tl->f);
    for (int r = 0; r < run->k; r++) {
        char name[320];
        snprintf(name, sizeof name, "worker %d (%s)", r, cluster_target(run->cl, r));
        sep(tl);
        fprintf(tl->f,
                "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":"
                "{\"name\":",
                r);
        put_str(tl->f, name);
        fprintf(tl->f,
                "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,"
                "\"tid\":0,\"args\":{\"sort_index\":%d}}",
                r, r);
    }
    if (loaded)
        module_load(run, tl, m);
    return 0;
}

/* The track of `kind` (`arg`: its bucket), named the first time it is used. */
static int track(ct_timeline *tl, int r, proto_tl_kind kind, uint32_t arg)
{
    static const struct {
        int tid;
        const char *name;
    } fixed[PROTO_TL_KINDS] = {
        [PROTO_TL_COMPUTE] = {COMPUTE_TID, "compute"},
        [PROTO_TL_OPTIM] = {COMPUTE_TID, "compute"},
        [PROTO_TL_DATA] = {DATA_TID, "data loading"},
        [PROTO_TL_EVAL] = {EVAL_TID, "evaluation"},
        [PROTO_TL_PUSH] = {PUSH_TID, "parameter server: pushes"},
        [PROTO_TL_PULL] = {PULL_TID, "parameter server: pulls"},
        [PROTO_TL_CKPT] = {CKPT_TID, "checkpoint writes"},
        [PROTO_TL_WAIT] = {WAIT_TID, "waits on slower ranks"},
        [PROTO_TL_SEND] = {SEND_TID, "all-reduce chunks: send"},
        [PROTO_TL_RECV] = {RECV_TID, "all-reduce chunks: receive"},
        [PROTO_TL_REDUCE] = {REDUCE_TID, "all-reduce chunks: reduce"},
    };
    tl_rank *tr = &tl->rank[r];
    if (kind == PROTO_TL_BUCKET) {
        for (; tr->buckets_named <= arg; tr->buckets_named++) {
            char name[64];
            snprintf(name, sizeof name, "all-reduce bucket %u", tr->buckets_named);
            thread_name(tl, r, BUCKET_TID + (int)tr->buckets_named, name);
        }
        return BUCKET_TID + (int)arg;
    }
    int tid = fixed[kind].tid;
    if (!tr->named[tid]) {
        tr->named[tid] = true;
        thread_name(tl, r, tid, fixed[kind].name);
    }
    return tid;
}

/* Once an epoch, before its first rank's events: the offsets measured
 * again, and the mean of each rank's two applied to its events. */
static void epoch_clocks(ct_run *run, ct_timeline *tl, uint32_t epoch)
{
    if (epoch == tl->epoch)
        return;
    tl->epoch = epoch;
    int64_t before[run->k], was[run->k];
    for (int r = 0; r < run->k; r++) {
        before[r] = tl->rank[r].offset_ns;
        was[r] = tl->rank[r].uncertain_ns;
    }
    measure_clocks(run, tl, CLOCK_PINGS_AGAIN);
    for (int r = 0; r < run->k; r++) {
        tl_rank *tr = &tl->rank[r];
        if (tr->uncertain_ns < 0)
            continue;
        int64_t drift = tr->offset_ns - before[r];
        tr->applied_ns = before[r] + drift / 2;
        int64_t u = (was[r] > tr->uncertain_ns ? was[r] : tr->uncertain_ns) +
                    (drift < 0 ? -drift : drift) / 2;
        if (u > tr->worst_ns)
            tr->worst_ns = u;
    }
}

void ct_timeline_take(ct_run *run, int r, const proto_train_epoch_reply *rep)
{
    static const char *const names[PROTO_TL_KINDS] = {
        [PROTO_TL_COMPUTE] = "forward+backward",
        [PROTO_TL_OPTIM] = "optimizer step",
        [PROTO_TL_DATA] = "waiting for a batch",
        [PROTO_TL_EVAL] = "evaluation",
        [PROTO_TL_BUCKET] = "bucket sum wait",
        [PROTO_TL_PUSH] = "push",
        [PROTO_TL_PULL] = "pull",
        [PROTO_TL_SEND] = "send chunk",
        [PROTO_TL_RECV] = "receive chunk",
        [PROTO_TL_REDUCE] = "reduce chunk",
        [PROTO_TL_WAIT] = "waiting on a rank",
        [PROTO_TL_CKPT] = "checkpoint write",
    };
    ct_timeline *tl = run->tl;
    if (!tl || r < 0 || r >= run->k)
        return;
    epoch_clocks(run, tl, rep->epoch);
    size_t n = rep->n_timeline_what;
    if (rep->n_timeline_start_ns < n)
        n = rep->n_timeline_start_ns;
    if (rep->n_timeline_dur_ns < n)
        n = rep->n_timeline_dur_ns;
    tl->dropped += rep->timeline_dropped + (rep->n_timeline_what - n);
    const tl_rank *tr = &tl->rank[r];
    for (size_t i = 0; i < n; i++) {
        uint32_t what = rep->timeline_what[i];
        proto_tl_kind kind = proto_tl_kind_of(what);
        if (kind <= 0 || kind >= PROTO_TL_KINDS) {
            tl->dropped++;
            continue;
        }
        uint32_t arg = proto_tl_arg_of(what);
        int tid = track(tl, r, kind, arg);
        int64_t at = (int64_t)(rep->timeline_start_ns[i] - tl->base_ns) - tr->applied_ns;
        sep(tl);
        fprintf(tl->f,
                "{\"name\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,"
                "\"dur\":%.3f,\"args\":{\"epoch\":%u",
                names[kind], r, tid, (double)at / 1e3,
                (double)rep->timeline_dur_ns[i] / 1e3, rep->epoch);
        if (kind == PROTO_TL_BUCKET)
            fprintf(tl->f, ",\"bucket\":%u", arg);
        else if (kind == PROTO_TL_WAIT)
            fprintf(tl->f, ",\"rank\":%u", arg);
        else if (kind >= PROTO_TL_SEND && kind <= PROTO_TL_REDUCE)
            fprintf(tl->f, ",\"chunk\":%u", arg);
        fputs("}}", tl->f);
        tl->events++;
    }
}

int ct_timeline_close(ct_run *run, int rc)
{
    ct_timeline *tl = run->tl;
    if (!tl)
        return rc;
    run->tl = NULL;
    FILE *f = tl->f;
    double worst = 0;
    fputs("\n],\"otherData\":{\"clock\":\"each worker's events moved onto the "
          "submitter's clock by its offset, measured as NTP does before the run and "
          "after each epoch\"",
          f);
    for (int r = 0; r < run->k; r++) {
        const tl_rank *tr = &tl->rank[r];
        if (tr->uncertain_ns < 0) {
            fprintf(f, ",\"worker %d clock\":\"not measured (offset taken as 0)\"", r);
            continue;
        }
        double u =
            (double)(tr->worst_ns > tr->uncertain_ns ? tr->worst_ns : tr->uncertain_ns) /
            1e3;
        worst = u > worst ? u : worst;
        fprintf(f,
                ",\"worker %d clock\":\"offset %+.1f us before the run, %+.1f us after "
                "its last epoch; events within %.1f us\"",
                r, (double)tr->first_ns / 1e3, (double)tr->offset_ns / 1e3, u);
    }
    fprintf(f,
            ",\"clock_uncertainty_us\":%.1f,\"events\":%llu,\"dropped_events\":%llu,"
            "\"run\":\"%s\"}}\n",
            worst, (unsigned long long)tl->events, (unsigned long long)tl->dropped,
            rc ? "failed" : "done");
    bool bad = ferror(f) != 0;
    bad |= fclose(f) != 0;
    if (bad && rc == 0) {
        ct_fail(run, "--timeline %s: cannot write it: %s", run->o->timeline,
                strerror(errno));
        rc = FERRY_EIO;
    }
    free(tl->rank);
    free(tl);
    return rc;
}

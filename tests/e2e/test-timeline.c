/* `ferry submit --timeline FILE` on 2-worker clusters: a sync run's file
 * is trace-event JSON with a process per worker and the compute, data,
 * evaluation and bucket tracks, whose bucket waits add up to the run's
 * reported all-reduce share, the all-reduce's chunks sent, received and
 * reduced, the waits on the other rank, the checkpoint writes and the
 * module's load; an async run's has pushes and pulls; a file that cannot be
 * written is refused before anything trains. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e.h"
#include "e2e_train.h"

static void timeline_setup(void)
{
    /* Two workers on two cores: one BLAS thread each (as test-sync.c). */
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    e2e_setup();
}

TestSuite(e2e_timeline, .init = timeline_setup, .fini = e2e_teardown, .timeout = 240);

/* What a timeline file holds, per worker (pid 0 and 1). */
typedef struct seen {
    char process[2][128];  /* process_name */
    int tracks[2];         /* thread_name events */
    bool compute_track[2]; /* a thread named "compute" */
    bool bucket_track[2];  /* "all-reduce bucket 0" */
    int events[2][16];     /* X events by kind, in `kinds` order */
    double bucket_s[2];    /* the bucket waits' total */
    double *bucket_end[2]; /* each bucket wait's end, in us (malloc'd) */
    size_t n_ends[2];
    double last_us; /* the latest event's end */
} seen;

static const char *const kinds[] = {"forward+backward",
                                    "optimizer step",
                                    "waiting for a batch",
                                    "evaluation",
                                    "bucket sum wait",
                                    "push",
                                    "pull",
                                    "send chunk",
                                    "receive chunk",
                                    "reduce chunk",
                                    "waiting on a rank",
                                    "checkpoint write",
                                    "module load",
                                    NULL};

static int kind_of(const char *name)
{
    for (int i = 0; kinds[i]; i++)
        if (strcmp(kinds[i], name) == 0)
            return i;
    return -1;
}

/* One trace event, checked to be of the format's shape and counted. */
static void one_event(json_t *e, seen *s)
{
    const char *ph = json_string_value(json_object_get(e, "ph"));
    const char *name = json_string_value(json_object_get(e, "name"));
    json_t *pid = json_object_get(e, "pid"), *tid = json_object_get(e, "tid");
    cr_assert(ph && name && json_is_integer(pid) && json_is_integer(tid),
              "an event without ph, name, pid and tid");
    int p = (int)json_integer_value(pid);
    cr_assert(p == 0 || p == 1, "pid %d: the run had 2 workers", p);
    if (strcmp(ph, "M") == 0) {
        const char *arg =
            json_string_value(json_object_get(json_object_get(e, "args"), "name"));
        if (strcmp(name, "process_name") == 0) {
            cr_assert(arg, "process_name without its name");
            snprintf(s->process[p], sizeof s->process[p], "%s", arg);
        } else if (strcmp(name, "thread_name") == 0) {
            cr_assert(arg, "thread_name without its name");
            s->tracks[p]++;
            s->compute_track[p] |= strcmp(arg, "compute") == 0;
            s->bucket_track[p] |= strcmp(arg, "all-reduce bucket 0") == 0;
        }
        return;
    }
    cr_assert_str_eq(ph, "X", "events are complete (X) or metadata (M)");
    json_t *ts = json_object_get(e, "ts"), *dur = json_object_get(e, "dur");
    cr_assert(json_is_number(ts) && json_is_number(dur), "%s without ts and dur", name);
    double t = json_number_value(ts), d = json_number_value(dur);
    /* Moved onto the submitter's clock from its start: nothing before it. */
    cr_assert(t >= 0 && d >= 0, "%s at %g us for %g us", name, t, d);
    if (t + d > s->last_us)
        s->last_us = t + d;
    int k = kind_of(name);
    cr_assert(k >= 0, "an event of an unknown kind: %s", name);
    s->events[p][k]++;
    if (strcmp(name, "bucket sum wait") == 0) {
        s->bucket_s[p] += d / 1e6;
        s->bucket_end[p] = realloc(s->bucket_end[p], (s->n_ends[p] + 1) * sizeof(double));
        cr_assert(s->bucket_end[p]);
        s->bucket_end[p][s->n_ends[p]++] = t + d;
    }
}

/* Reads and checks the file at `path`; *root its JSON (to free). */
static void read_timeline(const char *path, seen *s, json_t **root)
{
    memset(s, 0, sizeof *s);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    cr_assert(j, "%s is not JSON: %s at line %d", path, je.text, je.line);
    json_t *ev = json_object_get(j, "traceEvents");
    cr_assert(json_is_array(ev) && json_array_size(ev) > 0, "no traceEvents array");
    size_t i;
    json_t *e;
    json_array_foreach(ev, i, e)
    {
        one_event(e, s);
    }
    json_t *other = json_object_get(j, "otherData");
    json_t *u = json_object_get(other, "clock_uncertainty_us");
    cr_assert(json_is_number(u) && json_number_value(u) >= 0 &&
                  json_number_value(u) < 1e6,
              "the clocks' uncertainty is not in the file's otherData");
    cr_assert(json_integer_value(json_object_get(other, "dropped_events")) == 0,
              "events dropped");
    *root = j;
}

static void expect_processes(const seen *s)
{
    for (int w = 0; w < 2; w++) {
        char addr[128], want[160];
        e2e_worker_address(w, addr, sizeof addr);
        snprintf(want, sizeof want, "worker %d (%s)", w, addr);
        cr_assert_str_eq(s->process[w], want);
    }
}

static void seen_free(seen *s)
{
    free(s->bucket_end[0]);
    free(s->bucket_end[1]);
}

/* Trains the mlp on a new 2-worker cluster (its workers started with
 * `preload`'s shim, NULL: none) in `mode` for `epochs` with a timeline,
 * asserted to succeed; the file read into *s (its JSON returned, to free),
 * with a process for each worker. */
static json_t *traced_run(e2e_run *r, const char *preload, const char *mode,
                          const char *epochs, seen *s)
{
    if (preload) {
        /* Preloaded before ASan's runtime, which would refuse that
         * otherwise (as test-hardening-ops does). */
        char asan[512];
        const char *was = getenv("ASAN_OPTIONS");
        snprintf(asan, sizeof asan, "%s%sverify_asan_link_order=0", was ? was : "",
                 was && *was ? ":" : "");
        setenv("ASAN_OPTIONS", asan, 1);
        setenv("LD_PRELOAD", e2e_local_module(preload), 1);
    }
    e2e_start(2);
    unsetenv("LD_PRELOAD");
    const char *path = e2e_write_file("timeline.json", "");
    char ckpt[4200];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt", e2e_home);
    /* Sync mode writes a checkpoint each epoch: its writes are traced. */
    bool sync = strcmp(mode, "sync") == 0;
    e2e_ferry(r, 180000, "submit", e2e_task("mlp"), "--mode", mode, "--epochs", epochs,
              "--json", "--timeline", path, sync ? "--checkpoint-dir" : NULL, ckpt, NULL);
    E2E_EXPECT(r, 0);
    json_t *root;
    read_timeline(path, s, &root);
    expect_processes(s);
    return root;
}

Test(e2e_timeline, a_sync_run_traces_both_workers_and_its_buckets_add_up)
{
    e2e_run r;
    seen s;
    json_t *root = traced_run(&r, NULL, "sync", "2", &s);
    /* 469 steps an epoch (60000 samples, batch 128): each with its
     * forward+backward, optimizer step, batch and bucket wait, on both. */
    for (int w = 0; w < 2; w++) {
        cr_assert(s.compute_track[w] && s.bucket_track[w] && s.tracks[w] >= 4,
                  "worker %d: %d tracks", w, s.tracks[w]);
        for (int k = 0; k < 5; k++) {
            int want = k == 3 ? 2 : 2 * 469;
            cr_assert(s.events[w][k] >= want, "worker %d: %d %s events, expected %d", w,
                      s.events[w][k], kinds[k], want);
        }
        cr_assert(s.events[w][5] == 0 && s.events[w][6] == 0, "pushes in sync mode");
        /* The chunks of one collective in 4 (sampled), and the rank 0's
         * checkpoint of each epoch. */
        for (int k = 7; k < 11; k++)
            cr_assert(s.events[w][k] >= 469 / 4, "worker %d: %d %s events", w,
                      s.events[w][k], kinds[k]);
    }
    cr_assert(s.events[0][11] == 2, "rank 0 wrote %d checkpoints in 2 epochs",
              s.events[0][11]);
    /* The module's load, first on each worker's timeline. */
    for (int w = 0; w < 2; w++)
        cr_assert(s.events[w][12] == 1, "worker %d: %d module loads", w, s.events[w][12]);
    /* The run's all-reduce share is rank 0's wait over its train time. */
    double share = e2e_json_number(r.out, "allreduce_share");
    double train_s = e2e_json_number(r.out, "train_s");
    double traced = s.bucket_s[0] / train_s;
    cr_log_info("timeline: rank 0's bucket waits %.3f s of %.3f s (%.1f%%), the run's "
                "all-reduce share %.1f%%; %.0f ms traced",
                s.bucket_s[0], train_s, 100 * traced, 100 * share, s.last_us / 1e3);
    cr_assert(share > 0 && traced > share - 0.05 && traced < share + 0.05,
              "bucket waits %.1f%% of the train time, the run says %.1f%%:\n%s",
              100 * traced, 100 * share, r.out);
    /* Every event lies within the run as the submitter timed it. */
    cr_assert(s.last_us / 1e6 <= e2e_json_number(r.out, "wall_s") + 1.0,
              "an event ends %.3f s into a run of %.3f s", s.last_us / 1e6,
              e2e_json_number(r.out, "wall_s"));
    json_decref(root);
    seen_free(&s);
    e2e_run_fini(&r);
}

Test(e2e_timeline, an_async_run_traces_pushes_and_pulls)
{
    e2e_run r;
    seen s;
    json_t *root = traced_run(&r, NULL, "async", "1", &s);
    for (int w = 0; w < 2; w++) {
        cr_assert(s.events[w][5] > 100 && s.events[w][6] > 0 && s.events[w][0] > 100,
                  "worker %d: %d pushes, %d pulls, %d steps", w, s.events[w][5],
                  s.events[w][6], s.events[w][0]);
        cr_assert(!s.bucket_track[w] && s.events[w][4] == 0, "buckets in async mode");
    }
    json_decref(root);
    seen_free(&s);
    e2e_run_fini(&r);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Workers whose clocks read 1000 and 1003 s ahead of the submitter's: each
 * is measured and its events moved onto the submitter's time line, where
 * the two ranks' waits for the same step's sum end together. */
Test(e2e_timeline, workers_clocks_apart_from_the_submitters_are_aligned)
{
    e2e_run r;
    seen s;
    json_t *root = traced_run(&r, "shiftclock.so", "sync", "1", &s);
    json_t *other = json_object_get(root, "otherData");
    const char *c0 = json_string_value(json_object_get(other, "worker 0 clock"));
    const char *c1 = json_string_value(json_object_get(other, "worker 1 clock"));
    cr_assert(c0 && c1, "no clocks in otherData");
    /* 1000 s and 1003 s, in us, give or take the measurement. */
    double o0 = 0, o1 = 0;
    cr_assert(sscanf(c0, "offset %lf us", &o0) == 1 &&
                  sscanf(c1, "offset %lf us", &o1) == 1,
              "%s; %s", c0, c1);
    cr_assert(fabs(o0 - 1000e6) < 10e3 && fabs(o1 - 1003e6) < 10e3,
              "the offsets measured: %s; %s", c0, c1);
    cr_assert(s.last_us / 1e6 <= e2e_json_number(r.out, "wall_s") + 1.0,
              "an event ends %.3f s into a run of %.3f s", s.last_us / 1e6,
              e2e_json_number(r.out, "wall_s"));
    cr_assert(s.n_ends[0] == s.n_ends[1] && s.n_ends[0] >= 469,
              "%zu and %zu bucket waits", s.n_ends[0], s.n_ends[1]);
    size_t n = s.n_ends[0];
    double *gap = malloc(n * sizeof *gap);
    cr_assert(gap);
    for (size_t i = 0; i < n; i++)
        gap[i] = fabs(s.bucket_end[0][i] - s.bucket_end[1][i]);
    qsort(gap, n, sizeof *gap, by_value);
    double median_ms = gap[n / 2] / 1e3;
    free(gap);
    cr_log_info("timeline: ranks' bucket waits end %.3f ms apart (median)", median_ms);
    /* Unaligned, they would be 3 s apart; a step here is a few ms. */
    cr_assert(median_ms < 20, "the ranks' waits for one sum end %.3f ms apart",
              median_ms);
    json_decref(root);
    seen_free(&s);
    e2e_run_fini(&r);
}

Test(e2e_timeline, a_file_that_cannot_be_written_is_refused_before_training)
{
    e2e_start(2);
    const char *dir = e2e_write_file("not-a-dir", "a file, not a directory");
    char path[600];
    snprintf(path, sizeof path, "%s/timeline.json", dir);
    e2e_run r;
    e2e_ferry(&r, 60000, "submit", e2e_task("mlp"), "--epochs", "1", "--timeline", path,
              NULL);
    cr_assert(r.status != 0, "exit 0 with an unwritable timeline:\n%s", r.out);
    cr_assert(e2e_has(r.err, "--timeline") && e2e_has(r.err, "cannot write it") &&
                  e2e_has(r.err, "Not a directory"),
              "%s", r.err);
    cr_assert(!e2e_has(r.out, "training mlp") && !e2e_has(r.out, "epoch 1/1"),
              "it trained:\n%s", r.out);
    cr_assert(access(path, F_OK) != 0);
    e2e_run_fini(&r);
    /* The workers were never begun: the cluster trains at once. */
    e2e_ferry(&r, 180000, "submit", e2e_task("linreg"), "--epochs", "1", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
}

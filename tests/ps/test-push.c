/* tests/ps — pushes: many pushers at once lose no update, a shard's
 * version counts the pushes applied, its clock is every rank's last
 * worker_step, and a layout with empty shards still round-trips.
 *
 * SGD with lr 1 and no momentum, so a push of g takes g off the values;
 * the values and gradients are small integers, so every float sum is
 * exact and the checks are equalities. */
#include "tps.h"

#include <pthread.h>
#include <string.h>

TestSuite(ps_push, .timeout = 60);

/* ---- no lost update ---------------------------------------------------------------- */

#define W       3
#define THREADS 4     /* pushers a rank */
#define PUSHES  120   /* each */
#define N       49152 /* 16384 floats a shard: steps long enough to overlap */
#define SESSION 7

/* Pusher t of rank r pushes this, PUSHES times: 1 .. 5. */
static float grad_of(int r, int t, size_t i)
{
    return (float)((i * 7 + (size_t)r * 3 + (size_t)t) % 5 + 1);
}

typedef struct pusher {
    rt_ps_client *c;
    int r, t;
    float *g;
    int rc;
    char err[TPS_ERRLEN];
} pusher;

static void *push_main(void *p)
{
    pusher *u = p;
    for (int k = 0; k < PUSHES && u->rc == 0; k++) {
        rt_ps_seen seen;
        u->rc = rt_ps_push(u->c, u->g, FERRY__PUSH_KIND__PUSH_GRADIENT, (uint64_t)k + 1,
                           1, &seen, NULL, NULL, u->err, sizeof u->err);
    }
    return NULL;
}

TPS_TEST(ps_push, concurrent_pushers_lose_no_update)
{
    tps_start(W);
    float *init = tps_alloc(N * sizeof(float));
    for (size_t i = 0; i < N; i++)
        init[i] = (float)(10000 + i % 13);
    tps_sess s = {
        .session = SESSION, .shards = W, .staleness = -1, .lr = 1, .init = init, .n = N};
    tps_open_all(&s);

    pusher u[W * THREADS];
    pthread_t th[W * THREADS];
    for (int r = 0; r < W; r++)
        for (int t = 0; t < THREADS; t++) {
            pusher *x = &u[r * THREADS + t];
            *x = (pusher){.c = tps_client(r, &s, NULL, TPS_TIMEOUT_MS), .r = r, .t = t};
            x->g = tps_alloc(N * sizeof(float));
            for (size_t i = 0; i < N; i++)
                x->g[i] = grad_of(r, t, i);
        }
    for (int k = 0; k < W * THREADS; k++)
        cr_assert(pthread_create(&th[k], NULL, push_main, &u[k]) == 0);
    for (int k = 0; k < W * THREADS; k++)
        pthread_join(th[k], NULL);
    for (int k = 0; k < W * THREADS; k++)
        cr_assert(u[k].rc == 0, "rank %d pusher %d: %s: %s", u[k].r, u[k].t,
                  ferry_err_name(u[k].rc), u[k].err);

    const uint64_t total = (uint64_t)W * THREADS * PUSHES;
    /* Every shard applied every push, and counted it. */
    for (int sh = 0; sh < W; sh++) {
        uint64_t version, samples;
        tps_snapshot(rt_ps_shard_rank(sh, W), SESSION, sh, NULL, 0, &version, &samples);
        cr_assert(version == total, "shard %d is at version %llu after %llu pushes", sh,
                  (unsigned long long)version, (unsigned long long)total);
        cr_assert(samples == total, "shard %d counted %llu samples of %llu", sh,
                  (unsigned long long)samples, (unsigned long long)total);
    }
    for (int r = 0; r < W; r++) {
        rt_ps_shard_stats st;
        cr_assert(rt_ps_take_stats(T.r[r].store, SESSION, &st) == 0);
        cr_assert(st.pushes == total, "rank %d's shard counted %llu pushes of %llu", r,
                  (unsigned long long)st.pushes, (unsigned long long)total);
        uint64_t hist = 0;
        for (int b = 0; b < RT_PS_STALE_BUCKETS; b++)
            hist += st.staleness[b];
        cr_assert(hist == total, "rank %d's staleness histogram holds %llu of %llu", r,
                  (unsigned long long)hist, (unsigned long long)total);
        /* Taken: the next call starts from nothing. */
        cr_assert(rt_ps_take_stats(T.r[r].store, SESSION, &st) == 0 && st.pushes == 0);
    }

    /* The values: init minus every pusher's gradient, PUSHES times. */
    float *got = tps_alloc(N * sizeof(float));
    rt_ps_client *c = tps_client(1, &s, NULL, TPS_TIMEOUT_MS);
    rt_ps_seen seen;
    char err[TPS_ERRLEN] = "";
    int rc = rt_ps_pull(c, got, 0, 0, &seen, NULL, NULL, err, sizeof err);
    cr_assert(rc == 0, "pull: %s: %s", ferry_err_name(rc), err);
    cr_assert(seen.samples == total, "the pull saw %llu samples",
              (unsigned long long)seen.samples);
    for (size_t i = 0; i < N; i++) {
        double sum = 0;
        for (int r = 0; r < W; r++)
            for (int t = 0; t < THREADS; t++)
                sum += grad_of(r, t, i);
        float want = (float)(init[i] - PUSHES * sum);
        cr_assert(got[i] == want, "element %zu: %.1f, want %.1f (%.0f pushes lost?)", i,
                  (double)got[i], (double)want,
                  ((double)got[i] - want) / (sum / W / THREADS));
    }
}

/* ---- versions, samples, staleness and clocks, by hand
 * ---------------------------------- */

#define S2 9
#define N2 40 /* shard 0: [0, 32) on rank 0; shard 1: [32, 40) on rank 1 */

static Ferry__PushRequest push_req(uint32_t shard, uint32_t from, uint64_t step,
                                   uint64_t version, uint32_t samples)
{
    Ferry__PushRequest rq = FERRY__PUSH_REQUEST__INIT;
    rq.job = S2;
    rq.shard = shard;
    rq.from_rank = from;
    rq.worker_step = step;
    rq.version = version;
    rq.kind = FERRY__PUSH_KIND__PUSH_GRADIENT;
    rq.samples = samples;
    return rq;
}

TPS_TEST(ps_push, each_push_adds_one_to_the_version)
{
    tps_start(2);
    float init[N2], g[8], vals[N2];
    for (int i = 0; i < N2; i++)
        init[i] = (float)(100 + i);
    for (int i = 0; i < 8; i++)
        g[i] = (float)(i + 1);
    tps_sess s = {
        .session = S2, .shards = 2, .staleness = -1, .lr = 1, .init = init, .n = N2};
    tps_open_all(&s);

    for (uint64_t k = 1; k <= 5; k++) {
        /* All computed from version 0: the k-th is k - 1 versions stale. */
        Ferry__PushRequest rq = push_req(1, 0, k, 0, 3);
        tps_reply r;
        int rc = tps_push_raw(1, &rq, g, 8, 0, &r);
        cr_assert(rc == 0, "push %llu: %s: %s", (unsigned long long)k, ferry_err_name(rc),
                  r.err);
        cr_assert(r.version == k, "push %llu answered version %llu",
                  (unsigned long long)k, (unsigned long long)r.version);
        cr_assert(r.samples == 3 * k, "push %llu answered %llu samples",
                  (unsigned long long)k, (unsigned long long)r.samples);
        cr_assert(r.staleness == k - 1, "push %llu answered staleness %llu",
                  (unsigned long long)k, (unsigned long long)r.staleness);
    }
    /* One computed from the current version is not stale. */
    Ferry__PushRequest rq = push_req(1, 1, 1, 5, 0);
    tps_reply r;
    cr_assert(tps_push_raw(1, &rq, g, 8, 0, &r) == 0, "%s", r.err);
    cr_assert(r.version == 6 && r.staleness == 0, "version %llu staleness %llu",
              (unsigned long long)r.version, (unsigned long long)r.staleness);

    uint64_t version, samples;
    tps_snapshot(1, S2, 1, vals, N2, &version, &samples);
    cr_assert(version == 6 && samples == 15);
    for (int i = 0; i < 8; i++)
        cr_assert(vals[i] == init[32 + i] - 6 * g[i], "element %d: %.1f", 32 + i,
                  (double)vals[i]);
    /* The other shard saw none of it. */
    tps_snapshot(0, S2, 0, vals, N2, &version, &samples);
    cr_assert(version == 0 && samples == 0);
    cr_assert(memcmp(vals, init, 32 * sizeof(float)) == 0);

    rt_ps_shard_stats st;
    cr_assert(rt_ps_take_stats(T.r[1].store, S2, &st) == 0);
    cr_assert(st.pushes == 6);
    cr_assert(st.staleness[0] == 2 && st.staleness[1] == 1 && st.staleness[4] == 1,
              "histogram 0:%llu 1:%llu 4:%llu", (unsigned long long)st.staleness[0],
              (unsigned long long)st.staleness[1], (unsigned long long)st.staleness[4]);
    cr_assert(rt_ps_take_stats(T.r[1].store, S2 + 1, &st) == FERRY_ENOENT);
}

TPS_TEST(ps_push, a_pull_reports_the_slowest_ranks_clock)
{
    tps_start(2);
    float init[N2] = {0}, g[32] = {0};
    tps_sess s = {
        .session = S2, .shards = 2, .staleness = -1, .lr = 1, .init = init, .n = N2};
    tps_open_all(&s);
    Ferry__PullRequest pq = FERRY__PULL_REQUEST__INIT;
    pq.job = S2;
    pq.shard = 0;
    tps_reply r;
    /* Each round's pushes (0: none) and the slowest clock after it: a
     * clock never goes back (rank 0 stays at 7 after a push at 3). */
    uint64_t steps[][2] = {{7, 0}, {0, 4}, {3, 9}, {12, 0}};
    uint64_t want[] = {0, 4, 7, 9};
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        for (uint32_t from = 0; from < 2; from++) {
            if (!steps[k][from])
                continue;
            Ferry__PushRequest rq = push_req(0, from, steps[k][from], 0, 1);
            cr_assert(tps_push_raw(0, &rq, g, 32, 0, &r) == 0, "%s", r.err);
        }
        cr_assert(tps_pull_raw(0, &pq, NULL, 0, &r) == 0, "%s", r.err);
        cr_assert(r.min_clock == want[k], "round %zu: min_clock %llu, want %llu", k,
                  (unsigned long long)r.min_clock, (unsigned long long)want[k]);
    }
}

TPS_TEST(ps_push, more_shards_than_blocks_round_trip_through_the_client)
{
    /* 20 floats are 2 blocks; 5 shards over 2 ranks: shards 2, 3 and 4 are
     * empty, and rank 1 holds shards 1 and 3. */
    tps_start(2);
    float init[20], g[20], got[20];
    for (int i = 0; i < 20; i++) {
        init[i] = (float)(50 + i);
        g[i] = (float)(i % 4);
    }
    tps_sess s = {
        .session = 11, .shards = 5, .staleness = 0, .lr = 1, .init = init, .n = 20};
    tps_open_all(&s);
    rt_ps_client *c0 = tps_client(0, &s, NULL, TPS_TIMEOUT_MS);
    rt_ps_client *c1 = tps_client(1, &s, NULL, TPS_TIMEOUT_MS);
    rt_ps_seen seen;
    char err[TPS_ERRLEN] = "";
    int rc = rt_ps_push(c0, g, FERRY__PUSH_KIND__PUSH_GRADIENT, 1, 4, &seen, NULL, NULL,
                        err, sizeof err);
    cr_assert(rc == 0, "push: %s: %s", ferry_err_name(rc), err);
    rc = rt_ps_push(c1, g, FERRY__PUSH_KIND__PUSH_GRADIENT, 1, 4, &seen, NULL, NULL, err,
                    sizeof err);
    cr_assert(rc == 0, "push: %s: %s", ferry_err_name(rc), err);
    memset(got, 0, sizeof got);
    rc = rt_ps_pull(c1, got, 1, 0, &seen, NULL, NULL, err, sizeof err);
    cr_assert(rc == 0, "pull: %s: %s", ferry_err_name(rc), err);
    for (int i = 0; i < 20; i++)
        cr_assert(got[i] == init[i] - 2 * g[i], "element %d: %.1f, want %.1f", i,
                  (double)got[i], (double)(init[i] - 2 * g[i]));
    cr_assert(seen.samples == 8 && seen.min_clock == 1, "samples %llu min_clock %llu",
              (unsigned long long)seen.samples, (unsigned long long)seen.min_clock);
}

/* ---- a push that pulls
 * ------------------------------------------------------------------ */

TPS_TEST(ps_push, a_push_that_pulls_brings_back_the_values_after_it)
{
    tps_start(2);
    float init[N2], g[N2], got[N2];
    for (int i = 0; i < N2; i++) {
        init[i] = (float)(200 + i);
        g[i] = (float)(i % 3 + 1);
    }
    tps_sess s = {
        .session = S2, .shards = 2, .staleness = -1, .lr = 1, .init = init, .n = N2};
    tps_open_all(&s);
    rt_ps_client *c0 = tps_client(0, &s, NULL, TPS_TIMEOUT_MS);
    rt_ps_client *c1 = tps_client(1, &s, NULL, TPS_TIMEOUT_MS);
    rt_ps_seen seen;
    char err[TPS_ERRLEN] = "";
    int rc = rt_ps_push(c1, g, FERRY__PUSH_KIND__PUSH_GRADIENT, 1, 2, &seen, NULL, NULL,
                        err, sizeof err);
    cr_assert(rc == 0, "push: %s: %s", ferry_err_name(rc), err);
    memset(got, 0, sizeof got);
    rc = rt_ps_push_pull(c0, g, FERRY__PUSH_KIND__PUSH_GRADIENT, 1, 2, got, 0, &seen,
                         NULL, NULL, err, sizeof err);
    cr_assert(rc == 0, "push-pull: %s: %s", ferry_err_name(rc), err);
    /* Both pushes, rank 1's and its own. */
    for (int i = 0; i < N2; i++)
        cr_assert(got[i] == init[i] - 2 * g[i], "element %d: %.1f, want %.1f", i,
                  (double)got[i], (double)(init[i] - 2 * g[i]));
    cr_assert(seen.samples == 4 && seen.min_clock == 1, "samples %llu min_clock %llu",
              (unsigned long long)seen.samples, (unsigned long long)seen.min_clock);
    /* It recorded the versions it saw: its next push is not stale. Into the
     * buffer it pushes from, as the doc allows. */
    rt_ps_shard_stats st;
    for (int r = 0; r < 2; r++)
        cr_assert(rt_ps_take_stats(T.r[r].store, S2, &st) == 0);
    memcpy(got, g, sizeof g);
    rc = rt_ps_push_pull(c0, got, FERRY__PUSH_KIND__PUSH_GRADIENT, 2, 2, got, 0, &seen,
                         NULL, NULL, err, sizeof err);
    cr_assert(rc == 0, "push-pull: %s: %s", ferry_err_name(rc), err);
    for (int i = 0; i < N2; i++)
        cr_assert(got[i] == init[i] - 3 * g[i], "element %d: %.1f", i, (double)got[i]);
    for (int r = 0; r < 2; r++) {
        cr_assert(rt_ps_take_stats(T.r[r].store, S2, &st) == 0);
        cr_assert(st.pushes == 1 && st.staleness[0] == 1,
                  "rank %d: the push after a push-pull was %s stale", r,
                  st.staleness[0] ? "not" : "");
    }
}

TPS_TEST(ps_push, a_raw_push_that_pulls_carries_the_shard)
{
    tps_start(2);
    float init[N2], g[8], vals[N2];
    for (int i = 0; i < N2; i++)
        init[i] = (float)(100 + i);
    for (int i = 0; i < 8; i++)
        g[i] = 2;
    tps_sess s = {
        .session = S2, .shards = 2, .staleness = -1, .lr = 1, .init = init, .n = N2};
    tps_open_all(&s);
    Ferry__PushRequest rq = push_req(1, 0, 1, 0, 1);
    rq.pull = true;
    rpc_call *c = tps_push_start(1, &rq, g, 8, TPS_TIMEOUT_MS);
    tps_reply r;
    int rc = tps_push_finish(c, vals, N2, &r);
    cr_assert(rc == 0, "%s: %s", ferry_err_name(rc), r.err);
    cr_assert(r.n == 8 && r.version == 1 && r.samples == 1 && r.staleness == 0,
              "%zu floats, version %llu", r.n, (unsigned long long)r.version);
    for (int i = 0; i < 8; i++)
        cr_assert(vals[i] == init[32 + i] - 2);
    /* Without pull, no values. */
    rq.pull = false;
    c = tps_push_start(1, &rq, g, 8, TPS_TIMEOUT_MS);
    rc = tps_push_finish(c, vals, N2, &r);
    cr_assert(rc == 0 && r.n == 0 && r.version == 2, "%s: %zu floats", r.err, r.n);
}

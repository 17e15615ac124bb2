/* tests/ps — a rank that left a session (its worker lost) and comes back
 * as a restarted process: its rejoining pull is answered at once with the
 * slowest live rank's clock, the staleness bound waits for it again from
 * there (not from the clock it had when it was lost); the rt_ps_client's
 * rejoin reads every shard's values and that clock.
 *
 * Two ranks, two shards of 40 floats, staleness 2; the hand-made calls go
 * to shard 0, on rank 0. */
#include "tps.h"

#include <string.h>

TestSuite(ps_rejoin, .timeout = 60);

#define S 61
#define N 40
#define K 2

static float init[N], g[32];

static void start(void)
{
    for (int i = 0; i < N; i++)
        init[i] = (float)i;
    for (int i = 0; i < 32; i++)
        g[i] = 1;
    tps_start(2);
    tps_sess s = {
        .session = S, .shards = 2, .staleness = K, .lr = 1, .init = init, .n = N};
    tps_open_all(&s);
}

/* Rank `from`'s push of `step` (5 samples) to both shards, by its client. */
static void push(uint32_t from, uint64_t step)
{
    static rt_ps_client *clients[2];
    static float grad[N];
    if (!clients[from]) {
        tps_sess s = {
            .session = S, .shards = 2, .staleness = K, .lr = 1, .init = init, .n = N};
        clients[from] = tps_client((int)from, &s, NULL, TPS_TIMEOUT_MS);
        for (int i = 0; i < N; i++)
            grad[i] = g[i % 32];
    }
    rt_ps_seen seen;
    char err[TPS_ERRLEN] = "";
    int rc =
        rt_ps_push(clients[from], grad, 0, step, 5, &seen, NULL, NULL, err, sizeof err);
    cr_assert(rc == 0, "push from rank %u at step %llu: %s", from,
              (unsigned long long)step, err);
}

static rpc_call *pull_start(uint32_t from, uint64_t step, bool rejoin)
{
    Ferry__PullRequest rq = FERRY__PULL_REQUEST__INIT;
    rq.job = S;
    rq.from_rank = from;
    rq.worker_step = step;
    rq.rejoin = rejoin;
    return tps_pull_start(0, &rq, TPS_TIMEOUT_MS);
}

TPS_TEST(ps_rejoin, a_rank_back_goes_on_from_the_slowest_live_clock)
{
    start();
    push(1, 1);
    push(0, 1);
    cr_assert_eq(rt_ps_leave(T.r[0].store, S, 1), 0);
    /* Rank 1 gone: rank 0 runs ahead without waiting. */
    for (uint64_t step = 2; step <= 20; step++)
        push(0, step);
    rpc_call *c = pull_start(1, 0, true);
    tps_reply r;
    cr_assert_eq(tps_pull_finish(c, NULL, 0, &r), 0, "the rejoin: %s", r.err);
    cr_assert(r.min_clock == 20 && r.version == 21, "min_clock %llu version %llu",
              (unsigned long long)r.min_clock, (unsigned long long)r.version);
    /* Live again at clock 20: rank 0, on to 24, waits for it at 25... */
    for (uint64_t step = 21; step <= 24; step++)
        push(0, step);
    c = pull_start(0, 25, false);
    tps_run_loop_ms(300);
    cr_assert(!c->done, "the pull did not wait for the rank back");
    push(1, 21);
    push(1, 22);
    tps_run_loop_ms(150);
    cr_assert(!c->done, "the pull did not wait for the rank back at 22");
    /* ...until its push at 23 lets it go. */
    push(1, 23);
    cr_assert_eq(tps_pull_finish(c, NULL, 0, &r), 0, "after the push: %s", r.err);
    cr_assert(r.min_clock == 23, "min_clock %llu", (unsigned long long)r.min_clock);
}

TPS_TEST(ps_rejoin, the_client_rejoin_reads_the_values_and_the_clock)
{
    start();
    for (uint64_t step = 1; step <= 6; step++)
        push(0, step);
    cr_assert_eq(rt_ps_leave(T.r[0].store, S, 1), 0);
    cr_assert_eq(rt_ps_leave(T.r[1].store, S, 1), 0);
    tps_sess s = {
        .session = S, .shards = 2, .staleness = K, .lr = 1, .init = init, .n = N};
    rt_ps_client *cl = tps_client(1, &s, NULL, TPS_TIMEOUT_MS);
    float *vals = tps_alloc(N * sizeof(float));
    rt_ps_seen seen;
    char err[TPS_ERRLEN] = "";
    int rc = rt_ps_rejoin(cl, vals, &seen, NULL, NULL, err, sizeof err);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert(seen.min_clock == 6 && seen.samples == 30, "min_clock %llu samples %llu",
              (unsigned long long)seen.min_clock, (unsigned long long)seen.samples);
    for (int i = 0; i < N; i++)
        cr_assert(vals[i] == init[i] - 6, "element %d: %.1f", i, (double)vals[i]);
    tps_free(vals);
}

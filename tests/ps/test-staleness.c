/* tests/ps — the staleness bound: a pull more than K steps ahead of the
 * slowest live rank's last push is parked and answered by the push that
 * lets it go, or once the shard has taken `until_samples`, or when the
 * slow rank leaves; step 0 and an unbounded session never wait. And the
 * pulls left parked end: by the sweeper once their caller gave up, at once
 * by rt_ps_store_shutdown, so the server can shut down.
 *
 * Two ranks, two shards of 40 floats; the hand-made calls all go to
 * shard 0, on rank 0, whose clocks are what counts. */
#include "tps.h"

#include <pthread.h>
#include <string.h>

TestSuite(ps_staleness, .timeout = 60);

#define S 51
#define N 40

static float init[N], g[32];

static void start(int staleness)
{
    for (int i = 0; i < N; i++)
        init[i] = (float)(500 + i);
    for (int i = 0; i < 32; i++)
        g[i] = (float)(i % 3 + 1);
    tps_start(2);
    tps_sess s = {
        .session = S, .shards = 2, .staleness = staleness, .lr = 1, .init = init, .n = N};
    tps_open_all(&s);
}

static tps_reply push(uint32_t from, uint64_t step, uint32_t samples)
{
    Ferry__PushRequest rq = FERRY__PUSH_REQUEST__INIT;
    rq.job = S;
    rq.shard = 0;
    rq.from_rank = from;
    rq.worker_step = step;
    rq.version = 0;
    rq.kind = FERRY__PUSH_KIND__PUSH_GRADIENT;
    rq.samples = samples;
    tps_reply r;
    int rc = tps_push_raw(0, &rq, g, 32, 0, &r);
    cr_assert(rc == 0, "push from rank %u at step %llu: %s: %s", from,
              (unsigned long long)step, ferry_err_name(rc), r.err);
    return r;
}

static Ferry__PullRequest pull_req(uint32_t from, uint64_t step, uint64_t until)
{
    Ferry__PullRequest rq = FERRY__PULL_REQUEST__INIT;
    rq.job = S;
    rq.shard = 0;
    rq.from_rank = from;
    rq.worker_step = step;
    rq.until_samples = until;
    return rq;
}

static rpc_call *pull_start(uint32_t from, uint64_t step, uint64_t until, int64_t timeout)
{
    Ferry__PullRequest rq = pull_req(from, step, until);
    return tps_pull_start(0, &rq, timeout);
}

/* A pull that must be answered at once (a parked one fails its 2 s). */
static tps_reply pull_now(uint32_t from, uint64_t step, uint64_t until, float *vals)
{
    rpc_call *c = pull_start(from, step, until, 2000);
    tps_reply r;
    int rc = tps_pull_finish(c, vals, 32, &r);
    cr_assert(rc == 0,
              "the pull from rank %u at step %llu was not answered at once: %s: %s", from,
              (unsigned long long)step, ferry_err_name(rc), r.err);
    return r;
}

static void assert_parked(rpc_call *c, int ms, const char *when)
{
    tps_run_loop_ms(ms);
    cr_assert(!c->done, "%s: the pull was answered (%s: %s) where it should wait", when,
              ferry_err_name(c->result), c->errmsg ? c->errmsg : "");
}

/* Waits for a parked pull that the last call released; asserts it came
 * within a second of that. */
static tps_reply released(rpc_call *c, float *vals, const char *by)
{
    double t0 = tps_now_ms();
    tps_reply r;
    int rc = tps_pull_finish(c, vals, 32, &r);
    double took = tps_now_ms() - t0;
    cr_assert(rc == 0, "after %s the pull failed: %s: %s", by, ferry_err_name(rc), r.err);
    cr_assert(took < 1000, "the pull came %.0f ms after %s", took, by);
    return r;
}

TPS_TEST(ps_staleness, a_pull_more_than_k_ahead_waits_for_the_slowest_rank)
{
    start(1);
    push(0, 1, 1);
    push(0, 2, 1);
    /* Rank 1 is at 0: step 1 is within K = 1, step 3 is not. */
    tps_reply r = pull_now(0, 1, 0, NULL);
    cr_assert(r.min_clock == 0 && r.version == 2);
    rpc_call *c = pull_start(0, 3, 0, TPS_TIMEOUT_MS);
    assert_parked(c, 300, "rank 1 at step 0");
    push(1, 1, 1);
    assert_parked(c, 150, "rank 1 at step 1");
    push(1, 2, 1);
    float vals[32];
    r = released(c, vals, "rank 1's push at step 2");
    /* The wait is where the data is: the reply carries rank 1's push. */
    cr_assert(r.version == 4 && r.min_clock == 2 && r.samples == 4,
              "version %llu min_clock %llu samples %llu", (unsigned long long)r.version,
              (unsigned long long)r.min_clock, (unsigned long long)r.samples);
    for (int i = 0; i < 32; i++)
        cr_assert(vals[i] == init[i] - 4 * g[i], "element %d: %.1f", i, (double)vals[i]);
}

TPS_TEST(ps_staleness, until_samples_lets_a_parked_pull_go)
{
    start(0);
    push(0, 1, 10);
    rpc_call *c = pull_start(0, 2, 25, TPS_TIMEOUT_MS);
    assert_parked(c, 200, "10 of 25 samples");
    push(0, 2, 10);
    assert_parked(c, 150, "20 of 25 samples");
    push(0, 3, 10);
    tps_reply r = released(c, NULL, "the push that made 30 samples");
    cr_assert(r.samples == 30 && r.min_clock == 0, "samples %llu min_clock %llu",
              (unsigned long long)r.samples, (unsigned long long)r.min_clock);
    /* A limit already reached does not park it at all. */
    r = pull_now(0, 9, 30, NULL);
    cr_assert(r.samples == 30);
}

TPS_TEST(ps_staleness, a_rank_that_leaves_no_longer_holds_the_bound)
{
    start(1);
    push(0, 1, 1);
    push(0, 2, 1);
    push(0, 3, 1);
    rpc_call *c = pull_start(0, 4, 0, TPS_TIMEOUT_MS);
    assert_parked(c, 200, "rank 1 at step 0");
    cr_assert(rt_ps_leave(T.r[0].store, S + 1, 1) == FERRY_ENOENT);
    cr_assert(rt_ps_leave(T.r[0].store, S, 2) == FERRY_ENOENT);
    cr_assert(rt_ps_leave(T.r[0].store, S, -1) == FERRY_ENOENT);
    assert_parked(c, 50, "refused leaves");
    cr_assert(rt_ps_leave(T.r[0].store, S, 1) == 0);
    tps_reply r = released(c, NULL, "rank 1 left");
    /* The slowest live rank is rank 0 itself now. */
    cr_assert(r.min_clock == 3, "min_clock %llu", (unsigned long long)r.min_clock);
}

TPS_TEST(ps_staleness, a_pull_is_answered_when_every_rank_has_left)
{
    start(1);
    push(0, 1, 1);
    cr_assert(rt_ps_leave(T.r[0].store, S, 1) == 0);
    cr_assert(rt_ps_leave(T.r[0].store, S, 0) == 0);
    /* No live rank holds the bound back. */
    tps_reply r = pull_now(0, 5, 0, NULL);
    cr_assert(r.min_clock == 0, "min_clock %llu", (unsigned long long)r.min_clock);
}

TPS_TEST(ps_staleness, step_zero_never_waits)
{
    start(0);
    push(0, 5, 1);
    tps_reply r = pull_now(0, 0, 0, NULL);
    cr_assert(r.version == 1 && r.min_clock == 0);
    r = pull_now(1, 0, 0, NULL);
    cr_assert(r.version == 1);
    /* And the bound itself: step 1 waits for rank 1. */
    rpc_call *c = pull_start(1, 1, 0, TPS_TIMEOUT_MS);
    assert_parked(c, 200, "rank 1 at step 0");
    push(1, 1, 1);
    released(c, NULL, "rank 1's push at step 1");
}

TPS_TEST(ps_staleness, an_unbounded_session_never_waits)
{
    start(-1);
    tps_reply r = pull_now(0, 1000, 0, NULL);
    cr_assert(r.version == 0);
    push(0, 2000, 1);
    r = pull_now(1, 1u << 30, 0, NULL);
    cr_assert(r.version == 1 && r.min_clock == 0);
}

/* ---- lock-step through the clients ----------------------------------------------------
 */

#define ROUNDS 20

typedef struct stepper {
    rt_ps_client *c;
    int rank, rc;
    char err[TPS_ERRLEN];
    float g[N], got[N];
    int bad_round, bad_elem;
} stepper;

static stepper st[2];

/* g of rank r: 1 + (i + r) % 4 */
static float grad_of(int r, int i)
{
    return (float)(1 + (i + r) % 4);
}

static void *step_main(void *p)
{
    stepper *s = p;
    rt_ps_seen seen;
    for (int c = 1; c <= ROUNDS && s->rc == 0; c++) {
        s->rc = rt_ps_push(s->c, s->g, FERRY__PUSH_KIND__PUSH_GRADIENT, (uint64_t)c, 1,
                           &seen, NULL, NULL, s->err, sizeof s->err);
        if (s->rc)
            break;
        s->rc = rt_ps_pull(s->c, s->got, (uint64_t)c, 0, &seen, NULL, NULL, s->err,
                           sizeof s->err);
        if (s->rc)
            break;
        /* Every push of rounds 1 .. c, and perhaps the other rank's of
         * round c + 1: never less, never more. */
        for (int i = 0; i < N && s->bad_round == 0; i++) {
            float all = init[i] - (float)c * (grad_of(0, i) + grad_of(1, i));
            float ahead = all - grad_of(1 - s->rank, i);
            if (s->got[i] != all && s->got[i] != ahead) {
                s->bad_round = c;
                s->bad_elem = i;
            }
        }
        if (seen.min_clock < (uint64_t)c) {
            s->bad_round = c;
            s->bad_elem = -1;
        }
    }
    return NULL;
}

TPS_TEST(ps_staleness, with_k_zero_every_pull_of_a_round_sees_every_push_of_it)
{
    start(0);
    tps_sess s = {
        .session = S, .shards = 2, .staleness = 0, .lr = 1, .init = init, .n = N};
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        st[r] = (stepper){.c = tps_client(r, &s, NULL, TPS_TIMEOUT_MS), .rank = r};
        for (int i = 0; i < N; i++)
            st[r].g[i] = grad_of(r, i);
    }
    for (int r = 0; r < 2; r++)
        cr_assert(pthread_create(&th[r], NULL, step_main, &st[r]) == 0);
    for (int r = 0; r < 2; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < 2; r++) {
        cr_assert(st[r].rc == 0, "rank %d: %s: %s", r, ferry_err_name(st[r].rc),
                  st[r].err);
        cr_assert(st[r].bad_round == 0,
                  "rank %d's pull of round %d missed a push of it (element %d)", r,
                  st[r].bad_round, st[r].bad_elem);
    }
}

/* ---- pulls left parked
 * ------------------------------------------------------------------ */

TPS_TEST(ps_staleness, the_sweeper_ends_a_pull_whose_caller_gave_up)
{
    start(0);
    push(0, 1, 1);
    rpc_call *c = pull_start(0, 5, 0, 300);
    tps_reply r;
    int rc = tps_pull_finish(c, NULL, 0, &r);
    cr_assert(rc == FERRY_ETIMEDOUT, "the parked pull ended with %s: %s",
              ferry_err_name(rc), r.err);
    /* The shutdown waits for the parked call to end: the sweeper, which
     * looks every 100 ms, ends it long before the 3 s grace would. */
    double t0 = tps_now_ms();
    rpc_server_shutdown(T.r[0].server, 3000);
    double took = tps_now_ms() - t0;
    cr_assert(took < 1500,
              "the server's shutdown waited %.0f ms for a pull the sweeper "
              "should have ended",
              took);
    took = tps_stop_server(0);
    cr_assert(took < 1500, "rpc_server_destroy took %.0f ms", took);
}

static double cancel_at;

static bool cancelled_after(void *arg)
{
    (void)arg;
    return tps_now_ms() >= cancel_at;
}

TPS_TEST(ps_staleness,
         a_client_that_cancels_a_parked_pull_returns_and_the_sweeper_ends_it)
{
    start(0);
    tps_sess s = {
        .session = S, .shards = 2, .staleness = 0, .lr = 1, .init = init, .n = N};
    rt_ps_client *c = tps_client(0, &s, NULL, TPS_TIMEOUT_MS);
    float got[N];
    rt_ps_seen seen;
    char err[TPS_ERRLEN] = "";
    cancel_at = tps_now_ms() + 200;
    double t0 = tps_now_ms();
    int rc = rt_ps_pull(c, got, 3, 0, &seen, cancelled_after, NULL, err, sizeof err);
    double took = tps_now_ms() - t0;
    cr_assert(rc == FERRY_ECANCELED, "got %s: %s", ferry_err_name(rc), err);
    cr_assert(took >= 150 && took < 2000, "the cancelled pull returned after %.0f ms",
              took);
    /* Each shutdown waits for the server's calls to end, the parked pull's
     * included: the sweeper ends it long before the 3 s grace would. */
    for (int k = 0; k < 2; k++) {
        t0 = tps_now_ms();
        rpc_server_shutdown(T.r[k].server, 3000);
        took = tps_now_ms() - t0;
        cr_assert(took < 1500, "rank %d's shutdown waited %.0f ms for a cancelled pull",
                  k, took);
    }
}

TPS_TEST(ps_staleness, store_shutdown_fails_parked_pulls_at_once)
{
    start(0);
    rpc_call *c = pull_start(0, 2, 0, TPS_TIMEOUT_MS);
    rpc_call *d = pull_start(1, 7, 0, TPS_TIMEOUT_MS);
    assert_parked(c, 200, "nobody pushed");
    cr_assert(!d->done);
    rt_ps_store_shutdown(T.r[0].store);
    double t0 = tps_now_ms();
    tps_reply r;
    int rc = tps_pull_finish(c, NULL, 0, &r);
    double took = tps_now_ms() - t0;
    cr_assert(rc == FERRY_ECANCELED, "the parked pull ended with %s: %s",
              ferry_err_name(rc), r.err);
    cr_assert(strstr(r.err, "the session ended on this worker"), "%s", r.err);
    cr_assert(took < 1000, "the parked pull failed %.0f ms after the shutdown", took);
    rc = tps_pull_finish(d, NULL, 0, &r);
    cr_assert(rc == FERRY_ECANCELED, "the second parked pull ended with %s: %s",
              ferry_err_name(rc), r.err);
    /* New pulls are refused, even those that would not wait. */
    Ferry__PullRequest rq = pull_req(0, 0, 0);
    rc = tps_pull_raw(0, &rq, NULL, 0, &r);
    cr_assert(rc == FERRY_EUNAVAIL, "a pull after the shutdown: %s: %s",
              ferry_err_name(rc), r.err);
    cr_assert(strstr(r.err, "shutting down"), "%s", r.err);
    rt_ps_store_shutdown(T.r[0].store); /* idempotent */
    took = tps_stop_server(0);
    cr_assert(took < 1500, "rpc_server_destroy took %.0f ms", took);
}

/* ---- a push that pulls, held by the bound ---------------------------------------------
 */

static float pg[32];

static rpc_call *push_pull_start(uint32_t from, uint64_t step, int64_t timeout)
{
    Ferry__PushRequest rq = FERRY__PUSH_REQUEST__INIT;
    rq.job = S;
    rq.shard = 0;
    rq.from_rank = from;
    rq.worker_step = step;
    rq.kind = FERRY__PUSH_KIND__PUSH_GRADIENT;
    rq.samples = 1;
    rq.pull = true;
    for (int i = 0; i < 32; i++)
        pg[i] = g[i];
    return tps_push_start(0, &rq, pg, 32, timeout);
}

TPS_TEST(ps_staleness, a_push_that_pulls_is_applied_at_once_and_answered_by_the_bound)
{
    start(0);
    rpc_call *c = push_pull_start(0, 1, TPS_TIMEOUT_MS);
    assert_parked(c, 300, "rank 1 at step 0");
    /* The push itself is in: a step-0 read sees it. */
    tps_reply r = pull_now(1, 0, 0, NULL);
    cr_assert(r.version == 1, "the parked push-pull's push is not applied: version %llu",
              (unsigned long long)r.version);
    push(1, 1, 1);
    float vals[32];
    double t0 = tps_now_ms();
    int rc = tps_push_finish(c, vals, 32, &r);
    cr_assert(rc == 0, "%s: %s", ferry_err_name(rc), r.err);
    cr_assert(tps_now_ms() - t0 < 1000);
    /* It carries the values as of the push that let it go. */
    cr_assert(r.n == 32 && r.version == 2 && r.min_clock == 1 && r.staleness == 0,
              "%zu floats, version %llu, min_clock %llu, staleness %llu", r.n,
              (unsigned long long)r.version, (unsigned long long)r.min_clock,
              (unsigned long long)r.staleness);
    for (int i = 0; i < 32; i++)
        cr_assert(vals[i] == init[i] - 2 * g[i], "element %d: %.1f", i, (double)vals[i]);
}

TPS_TEST(ps_staleness,
         a_parked_push_that_pulls_ends_when_its_caller_gives_up_or_at_shutdown)
{
    start(0);
    rpc_call *c = push_pull_start(0, 1, 300);
    tps_reply r;
    int rc = tps_push_finish(c, NULL, 0, &r);
    cr_assert(rc == FERRY_ETIMEDOUT, "%s: %s", ferry_err_name(rc), r.err);
    /* Whether the sweeper ended it is seen at the end: the shutdown would
     * wait its grace for it. */
    c = push_pull_start(0, 2, TPS_TIMEOUT_MS);
    assert_parked(c, 200, "rank 1 at step 0");
    rt_ps_store_shutdown(T.r[0].store);
    double t0 = tps_now_ms();
    rc = tps_push_finish(c, NULL, 0, &r);
    cr_assert(rc == FERRY_ECANCELED, "%s: %s", ferry_err_name(rc), r.err);
    cr_assert(tps_now_ms() - t0 < 1000);
    /* One that comes after the shutdown does not stay either. */
    c = push_pull_start(0, 3, TPS_TIMEOUT_MS);
    t0 = tps_now_ms();
    rc = tps_push_finish(c, NULL, 0, &r);
    cr_assert(rc != 0, "a push-pull after the shutdown was answered");
    cr_assert(tps_now_ms() - t0 < 1000, "a push-pull after the shutdown took %.0f ms",
              tps_now_ms() - t0);
    /* Nothing was left parked: the server stops without waiting. */
    t0 = tps_now_ms();
    rpc_server_shutdown(T.r[0].server, 3000);
    cr_assert(tps_now_ms() - t0 < 1500, "the shutdown waited %.0f ms", tps_now_ms() - t0);
}

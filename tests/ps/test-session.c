/* tests/ps — a session's end: rt_ps_close with a linger keeps the shards
 * readable until it passes, then they are gone (NOT_FOUND); with 0 they go
 * at once and the pulls parked on them fail; the store's destroy frees the
 * sessions still held, lingering ones included (the leak check at the end
 * of each test, in sanitizer builds, is what sees that). */
#include "tps.h"

#include <string.h>

TestSuite(ps_session, .timeout = 60);

#define N 40

static float init[N];

static void start(int world, uint64_t session)
{
    for (int i = 0; i < N; i++)
        init[i] = (float)(7 * i);
    tps_start(world);
    tps_sess s = {
        .session = session, .shards = 2, .staleness = 0, .lr = 1, .init = init, .n = N};
    tps_open_all(&s);
}

static int pull0(uint64_t session, tps_reply *r, float *vals)
{
    Ferry__PullRequest rq = FERRY__PULL_REQUEST__INIT;
    rq.job = session;
    rq.shard = 0;
    rq.from_rank = 0;
    return tps_pull_raw(0, &rq, vals, N, r);
}

TPS_TEST(ps_session, close_with_a_linger_keeps_the_shards_readable_until_it_passes)
{
    start(2, 61);
    rt_ps_close(T.r[0].store, 61, 600);
    double closed = tps_now_ms();
    float vals[N];
    tps_reply r;
    int rc = pull0(61, &r, vals);
    cr_assert(rc == 0, "a pull right after the close: %s: %s", ferry_err_name(rc), r.err);
    cr_assert(memcmp(vals, init, 32 * sizeof(float)) == 0);
    /* Gone once the linger has passed (the sweeper looks every 100 ms). */
    double gone_at = 0;
    while (tps_now_ms() - closed < 5000) {
        double before = tps_now_ms();
        rc = pull0(61, &r, NULL);
        if (rc == FERRY_ENOENT) {
            gone_at = before - closed;
            break;
        }
        cr_assert(rc == 0, "a pull while lingering: %s: %s", ferry_err_name(rc), r.err);
        tps_sleep_ms(50);
    }
    cr_assert(gone_at > 0, "the session was still there 5 s after a 600 ms linger");
    cr_assert(gone_at >= 550, "the session went after %.0f ms of a 600 ms linger",
              gone_at);
    cr_assert(strstr(r.err, "no parameter-server session 61"), "%s", r.err);
    /* Rank 1 still holds its shard: it closed nothing. */
    Ferry__PullRequest rq = FERRY__PULL_REQUEST__INIT;
    rq.job = 61;
    rq.shard = 1;
    cr_assert(tps_pull_raw(1, &rq, NULL, 0, &r) == 0, "%s", r.err);
    /* The id can be opened again now. */
    char err[TPS_ERRLEN] = "";
    tps_sess s = {
        .session = 61, .shards = 2, .staleness = 0, .lr = 1, .init = init, .n = N};
    rc = tps_open(0, &s, err, sizeof err);
    cr_assert(rc == 0, "reopening: %s: %s", ferry_err_name(rc), err);
}

TPS_TEST(ps_session, close_with_zero_frees_at_once_and_fails_parked_pulls)
{
    start(2, 62);
    Ferry__PullRequest rq = FERRY__PULL_REQUEST__INIT;
    rq.job = 62;
    rq.shard = 0;
    rq.worker_step = 3; /* nobody pushed: parked */
    rpc_call *c = tps_pull_start(0, &rq, TPS_TIMEOUT_MS);
    tps_run_loop_ms(200);
    cr_assert(!c->done, "the pull was not parked");
    rt_ps_close(T.r[0].store, 62, 0);
    tps_reply r;
    int rc = tps_pull_finish(c, NULL, 0, &r);
    cr_assert(rc == FERRY_ECANCELED, "the parked pull ended with %s: %s",
              ferry_err_name(rc), r.err);
    rc = pull0(62, &r, NULL);
    cr_assert(rc == FERRY_ENOENT, "a pull after the close: %s: %s", ferry_err_name(rc),
              r.err);
    cr_assert(rt_ps_leave(T.r[0].store, 62, 1) == FERRY_ENOENT);
    rt_ps_shard_stats st;
    cr_assert(rt_ps_take_stats(T.r[0].store, 62, &st) == FERRY_ENOENT);
    /* Closing what is not held is a no-op. */
    rt_ps_close(T.r[0].store, 62, 0);
    rt_ps_close(T.r[0].store, 99, 100);
    rt_ps_close(NULL, 62, 0);
}

TPS_TEST(ps_session, store_destroy_frees_open_and_lingering_sessions)
{
    start(2, 63);
    tps_sess s = {.session = 64,
                  .shards = 3,
                  .staleness = -1,
                  .algo = RT_PS_EASGD,
                  .init = init,
                  .n = N};
    tps_open_all(&s);
    s.session = 65;
    s.algo = RT_PS_DYNSGD;
    s.lr = 0.5f;
    tps_open_all(&s);
    /* 64 lingers far past the test; 63 and 65 stay open; a pull stays
     * parked on 63. */
    rt_ps_close(T.r[0].store, 64, 60000);
    rt_ps_close(T.r[1].store, 64, 60000);
    Ferry__PullRequest rq = FERRY__PULL_REQUEST__INIT;
    rq.job = 63;
    rq.shard = 0;
    rq.worker_step = 9;
    rpc_call *c = tps_pull_start(0, &rq, TPS_TIMEOUT_MS);
    tps_run_loop_ms(100);
    cr_assert(!c->done);
    tps_reply r;
    cr_assert(pull0(64, &r, NULL) == 0, "the lingering session: %s", r.err);
    /* What the worker does when it stops: fail the parked pulls, stop the
     * server, free the store. */
    rt_ps_store_shutdown(T.r[0].store);
    cr_assert(tps_pull_finish(c, NULL, 0, &r) == FERRY_ECANCELED, "%s", r.err);
    for (int k = 0; k < 2; k++) {
        double took = tps_stop_server(k);
        cr_assert(took < 1500, "rank %d's server took %.0f ms to stop", k, took);
        rt_ps_store_destroy(T.r[k].store);
        T.r[k].store = NULL;
    }
    rt_ps_store_destroy(NULL);
}

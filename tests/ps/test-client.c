/* tests/ps — the client's patience: a peer that has not yet opened the
 * session, or is not yet listening, is retried until the client's timeout;
 * one that never comes fails the call within it, with an error naming the
 * shard, its rank and address. */
#include "tps.h"

#include <pthread.h>
#include <string.h>

#include "tcommon.h"

TestSuite(ps_client, .timeout = 60);

#define S 71
#define N 100 /* shard 0: [0, 64) on rank 0; shard 1: [64, 100) on rank 1 */

static float init[N];
static tps_sess sess;

static void start(void)
{
    for (int i = 0; i < N; i++)
        init[i] = (float)(3 * i + 1);
    tps_start(2);
    sess = (tps_sess){
        .session = S, .shards = 2, .staleness = -1, .lr = 1, .init = init, .n = N};
}

typedef struct later {
    int delay_ms, rc;
    char err[TPS_ERRLEN];
    bool restart; /* restart rank 1's server, rather than open the session */
} later;

static void *later_main(void *p)
{
    later *l = p;
    tps_sleep_ms(l->delay_ms);
    if (l->restart)
        l->rc = tps_restart_server(1);
    else
        l->rc = tps_open(1, &sess, l->err, sizeof l->err);
    return NULL;
}

static void pull_while(later *l, int64_t timeout_ms, int min_ms)
{
    rt_ps_client *c = tps_client(0, &sess, NULL, timeout_ms);
    pthread_t th;
    cr_assert(pthread_create(&th, NULL, later_main, l) == 0);
    float got[N];
    memset(got, 0, sizeof got);
    rt_ps_seen seen;
    char err[TPS_ERRLEN] = "";
    double t0 = tps_now_ms();
    int rc = rt_ps_pull(c, got, 0, 0, &seen, NULL, NULL, err, sizeof err);
    double took = tps_now_ms() - t0;
    pthread_join(th, NULL);
    cr_assert(l->rc == 0, "the late start: %s: %s", ferry_err_name(l->rc), l->err);
    cr_assert(rc == 0, "the pull after %.0f ms: %s: %s", took, ferry_err_name(rc), err);
    cr_assert(took >= min_ms,
              "the pull returned after %.0f ms, before the peer was there", took);
    cr_assert(memcmp(got, init, sizeof init) == 0, "the pull got other values");
    /* And a push goes through on the same client. */
    float g[N];
    for (int i = 0; i < N; i++)
        g[i] = 1;
    rc = rt_ps_push(c, g, FERRY__PUSH_KIND__PUSH_GRADIENT, 1, 1, &seen, NULL, NULL, err,
                    sizeof err);
    cr_assert(rc == 0, "the push: %s: %s", ferry_err_name(rc), err);
    rc = rt_ps_pull(c, got, 0, 0, &seen, NULL, NULL, err, sizeof err);
    cr_assert(rc == 0, "the second pull: %s: %s", ferry_err_name(rc), err);
    for (int i = 0; i < N; i++)
        cr_assert(got[i] == init[i] - 1, "element %d: %.1f", i, (double)got[i]);
}

TPS_TEST(ps_client, a_peer_that_opens_the_session_late_is_waited_for)
{
    start();
    char err[TPS_ERRLEN] = "";
    cr_assert(tps_open(0, &sess, err, sizeof err) == 0, "%s", err);
    later l = {.delay_ms = 200};
    pull_while(&l, 5000, 150);
}

TPS_TEST(ps_client, a_peer_that_listens_late_is_waited_for)
{
    start();
    tps_open_all(&sess);
    tps_stop_server(1);
    later l = {.delay_ms = 200, .restart = true};
    pull_while(&l, 8000, 150);
}

TPS_TEST(ps_client, a_peer_that_never_listens_fails_within_the_timeout)
{
    start();
    tps_open_all(&sess);
    char nowhere[32];
    snprintf(nowhere, sizeof nowhere, "127.0.0.1:%d", tcom_free_port());
    const char *peers[2] = {T.peers[0], nowhere};
    rt_ps_client *c = tps_client(0, &sess, peers, 700);
    float got[N];
    rt_ps_seen seen;
    char err[TPS_ERRLEN] = "";
    double t0 = tps_now_ms();
    int rc = rt_ps_pull(c, got, 0, 0, &seen, NULL, NULL, err, sizeof err);
    double took = tps_now_ms() - t0;
    cr_assert(rc == FERRY_EUNAVAIL || rc == FERRY_ETIMEDOUT, "got %s: %s",
              ferry_err_name(rc), err);
    cr_assert(took >= 600 && took < 700 + 1000, "the pull failed after %.0f ms of 700",
              took);
    cr_assert(strstr(err, "shard 1") && strstr(err, "rank 1") && strstr(err, nowhere),
              "the error \"%s\" does not name shard 1, rank 1 and %s", err, nowhere);
    /* Shard 0, on a live peer, is not blamed. */
    cr_assert(!strstr(err, "shard 0"), "%s", err);
}

TPS_TEST(ps_client, a_session_never_opened_fails_within_the_timeout)
{
    start();
    char err[TPS_ERRLEN] = "";
    cr_assert(tps_open(0, &sess, err, sizeof err) == 0, "%s", err);
    rt_ps_client *c = tps_client(0, &sess, NULL, 500);
    float g[N] = {0};
    rt_ps_seen seen;
    double t0 = tps_now_ms();
    int rc = rt_ps_push(c, g, FERRY__PUSH_KIND__PUSH_GRADIENT, 1, 1, &seen, NULL, NULL,
                        err, sizeof err);
    double took = tps_now_ms() - t0;
    cr_assert(rc == FERRY_ENOENT, "got %s: %s", ferry_err_name(rc), err);
    cr_assert(took >= 400 && took < 500 + 1000, "the push failed after %.0f ms of 500",
              took);
    cr_assert(strstr(err, "shard 1") && strstr(err, "rank 1") && strstr(err, T.peers[1]),
              "the error \"%s\" does not name shard 1, rank 1 and %s", err, T.peers[1]);
    /* Shard 0 took the push meanwhile (a push is not all or nothing). */
    uint64_t version;
    tps_snapshot(0, S, 0, NULL, 0, &version, NULL);
    cr_assert(version == 1, "shard 0 at version %llu", (unsigned long long)version);
}

TPS_TEST(ps_client, bad_options_are_refused)
{
    start();
    rt_ps_client *c = NULL;
    char err[TPS_ERRLEN] = "";
    rt_ps_client_opts o = {.session = S, .rank = 2, .world = 2, .n = N, .peers = T.peers};
    cr_assert(rt_ps_client_create(&o, &c, err, sizeof err) == FERRY_EINVAL && !c);
    o.rank = 0;
    o.n = 0;
    cr_assert(rt_ps_client_create(&o, &c, err, sizeof err) == FERRY_EINVAL && !c);
    o.n = N;
    o.peers = NULL;
    cr_assert(rt_ps_client_create(&o, &c, err, sizeof err) == FERRY_EINVAL && !c);
    rt_ps_client_destroy(NULL);
}

/* tests/ps — what a push does to a shard under each algorithm: DOWNPOUR
 * steps the optimizer with the session's rate whatever the staleness,
 * DynSGD divides the step by staleness + 1, EASGD adds the pushed values
 * as they are, and a cosine schedule over the samples scales the rate.
 * Two ranks, two shards, through rt_ps_client; even integers so that every
 * halving is exact. */
#include "tps.h"

#include <string.h>

TestSuite(ps_algo, .timeout = 60);

#define N 50 /* shard 0: [0, 32) on rank 0; shard 1: [32, 50) on rank 1 */

static float init[N], g[N], got[N];

static void fill(void)
{
    for (int i = 0; i < N; i++) {
        init[i] = (float)(1000 + 3 * i);
        g[i] = (float)(2 * (i % 6) + 2);
    }
}

static void push(rt_ps_client *c, int kind, const float *v, uint32_t samples)
{
    rt_ps_seen seen;
    char err[TPS_ERRLEN] = "";
    int rc = rt_ps_push(c, v, kind, 1, samples, &seen, NULL, NULL, err, sizeof err);
    cr_assert(rc == 0, "push: %s: %s", ferry_err_name(rc), err);
}

static void pull(rt_ps_client *c, float *into)
{
    rt_ps_seen seen;
    char err[TPS_ERRLEN] = "";
    int rc = rt_ps_pull(c, into, 0, 0, &seen, NULL, NULL, err, sizeof err);
    cr_assert(rc == 0, "pull: %s: %s", ferry_err_name(rc), err);
}

/* Pull (versions 0), then push g twice from those versions: the second is
 * one version stale. Returns the pulled values in `got`. */
static void two_pushes_from_one_pull(rt_ps_algo algo)
{
    fill();
    tps_start(2);
    tps_sess s = {.session = 3,
                  .shards = 2,
                  .staleness = -1,
                  .algo = algo,
                  .lr = 1,
                  .init = init,
                  .n = N};
    tps_open_all(&s);
    rt_ps_client *c = tps_client(0, &s, NULL, TPS_TIMEOUT_MS);
    pull(c, got);
    cr_assert(memcmp(got, init, sizeof init) == 0, "the first pull is not the init");
    push(c, FERRY__PUSH_KIND__PUSH_GRADIENT, g, 1);
    push(c, FERRY__PUSH_KIND__PUSH_GRADIENT, g, 1);
    pull(c, got);
    for (int r = 0; r < 2; r++) {
        rt_ps_shard_stats st;
        cr_assert(rt_ps_take_stats(T.r[r].store, 3, &st) == 0);
        cr_assert(st.pushes == 2 && st.staleness[0] == 1 && st.staleness[1] == 1,
                  "rank %d: %llu pushes, staleness 0: %llu, 1: %llu", r,
                  (unsigned long long)st.pushes, (unsigned long long)st.staleness[0],
                  (unsigned long long)st.staleness[1]);
    }
}

TPS_TEST(ps_algo, dynsgd_halves_a_push_one_version_stale)
{
    two_pushes_from_one_pull(RT_PS_DYNSGD);
    for (int i = 0; i < N; i++) {
        float want = init[i] - g[i] - g[i] / 2;
        cr_assert(got[i] == want, "element %d: %.2f, want %.2f (init %.0f, g %.0f)", i,
                  (double)got[i], (double)want, (double)init[i], (double)g[i]);
    }
}

TPS_TEST(ps_algo, downpour_applies_a_stale_push_at_the_full_rate)
{
    two_pushes_from_one_pull(RT_PS_DOWNPOUR);
    for (int i = 0; i < N; i++) {
        float want = init[i] - 2 * g[i];
        cr_assert(got[i] == want, "element %d: %.2f, want %.2f", i, (double)got[i],
                  (double)want);
    }
}

TPS_TEST(ps_algo, easgd_adds_elastic_pushes_as_they_are)
{
    fill();
    tps_start(2);
    tps_sess s = {.session = 4,
                  .shards = 2,
                  .staleness = -1,
                  .algo = RT_PS_EASGD,
                  .init = init,
                  .n = N};
    tps_open_all(&s);
    rt_ps_client *c0 = tps_client(0, &s, NULL, TPS_TIMEOUT_MS);
    rt_ps_client *c1 = tps_client(1, &s, NULL, TPS_TIMEOUT_MS);
    float d[N];
    for (int i = 0; i < N; i++)
        d[i] = (float)(i % 5) - 2; /* some negative: added, not subtracted */
    push(c0, FERRY__PUSH_KIND__PUSH_ELASTIC, d, 1);
    push(c1, FERRY__PUSH_KIND__PUSH_ELASTIC, g, 1);
    push(c1, FERRY__PUSH_KIND__PUSH_ELASTIC, d, 1);
    pull(c0, got);
    for (int i = 0; i < N; i++) {
        float want = init[i] + 2 * d[i] + g[i];
        cr_assert(got[i] == want, "element %d: %.2f, want %.2f", i, (double)got[i],
                  (double)want);
    }
}

TPS_TEST(ps_algo, a_cosine_schedule_follows_the_samples_applied)
{
    /* Over 100 samples: the rate for a push is set by the samples applied
     * before it: 0 -> lr, 50 -> lr / 2, 100 and on -> 0. */
    fill();
    tps_start(2);
    tps_sess s = {.session = 5,
                  .shards = 2,
                  .staleness = -1,
                  .lr = 1,
                  .schedule_samples = 100,
                  .init = init,
                  .n = N};
    tps_open_all(&s);
    rt_ps_client *c = tps_client(1, &s, NULL, TPS_TIMEOUT_MS);
    push(c, FERRY__PUSH_KIND__PUSH_GRADIENT, g, 50);
    pull(c, got);
    for (int i = 0; i < N; i++)
        cr_assert(got[i] == init[i] - g[i], "after one push, element %d: %.2f", i,
                  (double)got[i]);
    push(c, FERRY__PUSH_KIND__PUSH_GRADIENT, g, 50);
    pull(c, got);
    for (int i = 0; i < N; i++)
        cr_assert(got[i] == init[i] - g[i] - g[i] / 2,
                  "after two pushes, element %d: %.2f", i, (double)got[i]);
    push(c, FERRY__PUSH_KIND__PUSH_GRADIENT, g, 50);
    pull(c, got);
    for (int i = 0; i < N; i++)
        cr_assert(got[i] == init[i] - g[i] - g[i] / 2,
                  "past the schedule's end, element %d moved to %.2f", i, (double)got[i]);
}

/* tests/ps — a push's sample count is what ends an epoch, so a shard takes
 * no more than its sender can have computed: its slice of the global batch
 * a local step, push_steps steps a push, its local steps in all. A push
 * claiming more is refused (INVALID_ARGUMENT, naming the rank, its
 * address and the bound) and changes nothing: the shard's values, version
 * and samples stay, and the sender's next honest push is taken.
 *
 * A 2-rank session of 40 floats, global batch 7 (rank 0's slice 4, rank
 * 1's 3), 2 steps a push; rank 0 pushes to shard 1, held by rank 1. */
#include "tps.h"

#include <string.h>

TestSuite(ps_samples, .timeout = 60);

#define SESSION 41
#define N       40
#define LEN     8 /* shard 1's floats: [32, 40) */
#define BATCH   7
#define STEPS   2

static float init[N];

static void start(void)
{
    for (int i = 0; i < N; i++)
        init[i] = (float)(i + 1);
    tps_start(2);
    tps_sess s = {.session = SESSION,
                  .shards = 2,
                  .staleness = -1,
                  .lr = 1,
                  .batch = BATCH,
                  .push_steps = STEPS,
                  .init = init,
                  .n = N};
    tps_open_all(&s);
}

static int push(uint32_t from, uint64_t step, uint32_t samples, tps_reply *r)
{
    Ferry__PushRequest rq = FERRY__PUSH_REQUEST__INIT;
    rq.job = SESSION;
    rq.shard = 1;
    rq.from_rank = from;
    rq.worker_step = step;
    rq.kind = FERRY__PUSH_KIND__PUSH_GRADIENT;
    rq.samples = samples;
    float g[LEN];
    for (int i = 0; i < LEN; i++)
        g[i] = 1e6f; /* would show in the values if it were applied */
    return tps_push_raw(1, &rq, g, LEN, 0, r);
}

/* Refused, naming the sender and the bound, and nothing changed. */
static void assert_refused(uint32_t from, uint64_t step, uint32_t samples,
                           uint64_t version, uint64_t taken, const char *what)
{
    float before[LEN], after[LEN];
    uint64_t v0, s0, v1, s1;
    tps_snapshot(1, SESSION, 1, before, LEN, &v0, &s0);
    tps_reply r;
    int rc = push(from, step, samples, &r);
    cr_assert(rc == FERRY_EINVAL, "%s: got %s (%s), want EINVAL", what,
              ferry_err_name(rc), r.err);
    char rank[32];
    snprintf(rank, sizeof rank, "from rank %u (ipv", from);
    cr_assert(strstr(r.err, rank), "%s: the refusal does not name its sender: %s", what,
              r.err);
    cr_assert(strstr(r.err, "global batch of 7"), "%s: the refusal gives no bound: %s",
              what, r.err);
    tps_snapshot(1, SESSION, 1, after, LEN, &v1, &s1);
    cr_assert(v1 == version && s1 == taken && v0 == v1 && s0 == s1,
              "%s: version %llu, samples %llu after the refusal, want %llu and %llu",
              what, (unsigned long long)v1, (unsigned long long)s1,
              (unsigned long long)version, (unsigned long long)taken);
    cr_assert(memcmp(before, after, sizeof before) == 0, "%s: the values changed", what);
}

static void assert_taken(uint32_t from, uint64_t step, uint32_t samples, const char *what)
{
    tps_reply r;
    int rc = push(from, step, samples, &r);
    cr_assert(rc == 0, "%s: %s (%s)", what, ferry_err_name(rc), r.err);
}

TPS_TEST(ps_samples, a_push_claiming_2_32_minus_1_samples_is_refused)
{
    start();
    assert_refused(0, 1, UINT32_MAX, 0, 0, "2^32-1 samples at step 1");
    /* However many steps it says it has taken: one push carries two. */
    assert_refused(0, UINT64_MAX / 2, UINT32_MAX, 0, 0, "2^32-1 samples at step 2^63");
    assert_taken(0, 1, 4, "rank 0's slice of one step");
    uint64_t version, samples;
    tps_snapshot(1, SESSION, 1, NULL, 0, &version, &samples);
    cr_assert(version == 1 && samples == 4, "version %llu samples %llu",
              (unsigned long long)version, (unsigned long long)samples);
}

TPS_TEST(ps_samples, a_push_is_bounded_by_the_senders_own_slice)
{
    start();
    /* Rank 1's slice of a batch of 7 is 3; rank 0's is 4. */
    assert_refused(1, 1, 4, 0, 0, "rank 1 claiming rank 0's slice");
    assert_taken(1, 1, 3, "rank 1's slice");
    /* Two steps a push: 8 for rank 0, not 9, whatever its clock says. */
    assert_refused(0, 10, 9, 1, 3, "rank 0 claiming three steps in one push");
    assert_taken(0, 10, 8, "rank 0's two steps");
}

TPS_TEST(ps_samples, pushes_together_claim_no_more_than_the_steps_computed)
{
    start();
    /* By local step 3 rank 0 has computed 12 samples at most. */
    assert_taken(0, 2, 8, "steps 1 and 2");
    assert_refused(0, 2, 1, 1, 8, "a sample more at step 2");
    assert_taken(0, 3, 4, "step 3");
    assert_refused(0, 3, 1, 2, 12, "a sample more at step 3");
}

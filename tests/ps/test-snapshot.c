/* tests/ps — what a checkpoint keeps of a shard: rt_ps_snapshot copies the
 * values, the optimizer's moments and steps, the version and the samples
 * of each shard a rank holds; a session opened with a shard's state to
 * continue from holds exactly that state, the other shards starting from
 * the initial values; a state of another span is refused. */
#include <string.h>

#include <criterion/criterion.h>

#include "runtime/optim/optim.h"
#include "runtime/ps/ps.h"

#define N 64 /* two shards of 32 floats */

TestSuite(ps_snapshot, .timeout = 30);

static const uint8_t secret[RT_PS_SECRET_BYTES] = "0123456789abcdef0123456789ABCDEF";

static int open_one(rt_ps_store *st, const float *init, const rt_ps_shard_state *resume,
                    int n_resume, char *err, size_t errlen)
{
    rt_optim_opts opt = {.kind = RT_OPT_SGD, .lr = 0.1f, .momentum = 0.9f};
    rt_optim_defaults(&opt);
    rt_ps_session_opts o = {.session = 7,
                            .rank = 0,
                            .world = 1,
                            .shards = 2,
                            .staleness = -1,
                            .algo = RT_PS_DOWNPOUR,
                            .optim = &opt,
                            .batch = 8,
                            .push_steps = 1,
                            .init = init,
                            .n = N,
                            .secret = secret,
                            .resume = resume,
                            .n_resume = n_resume};
    return rt_ps_open(st, &o, err, errlen);
}

Test(ps_snapshot, a_shard_continues_from_its_state_and_the_snapshot_reads_it_back)
{
    float init[N], vals[32], mom[32];
    for (int i = 0; i < N; i++)
        init[i] = (float)i;
    for (int i = 0; i < 32; i++) {
        vals[i] = -1.5f * (float)i;
        mom[i] = 0.25f * (float)i;
    }
    rt_ps_shard_state from = {.index = 1,
                              .shards = 2,
                              .lo = 32,
                              .hi = 64,
                              .values = vals,
                              .v = mom,
                              .t = 41,
                              .version = 40,
                              .samples = 320};
    rt_ps_store *st;
    cr_assert_eq(rt_ps_store_create(&st), 0);
    char err[256] = "";
    cr_assert_eq(open_one(st, init, &from, 1, err, sizeof err), 0, "%s", err);
    rt_ps_shard_state s0, s1, s2;
    cr_assert_eq(rt_ps_snapshot(st, 7, 0, &s0), 0);
    cr_assert_eq(rt_ps_snapshot(st, 7, 1, &s1), 0);
    cr_assert_eq(rt_ps_snapshot(st, 7, 2, &s2), FERRY_ENOENT);
    cr_assert_eq(rt_ps_snapshot(st, 8, 0, &s2), FERRY_ENOENT);
    /* Shard 0: from init, nothing applied, its momentum zero. */
    cr_assert(s0.index == 0 && s0.shards == 2 && s0.lo == 0 && s0.hi == 32);
    cr_assert(s0.version == 0 && s0.samples == 0 && s0.t == 0 && !s0.m && s0.v);
    cr_assert_arr_eq(s0.values, init, 32 * sizeof(float));
    for (int i = 0; i < 32; i++)
        cr_assert_eq(s0.v[i], 0.0f);
    /* Shard 1: exactly the state it continued from. */
    cr_assert(s1.index == 1 && s1.lo == 32 && s1.hi == 64);
    cr_assert(s1.version == 40 && s1.samples == 320 && s1.t == 41 && !s1.m && s1.v);
    cr_assert_arr_eq(s1.values, vals, sizeof vals);
    cr_assert_arr_eq(s1.v, mom, sizeof mom);
    rt_ps_shard_state_free(&s0);
    rt_ps_shard_state_free(&s1);
    rt_ps_close(st, 7, 0);
    rt_ps_store_destroy(st);
}

Test(ps_snapshot, a_state_of_another_span_or_optimizer_is_refused)
{
    float init[N] = {0}, vals[32] = {0}, mom[32] = {0};
    rt_ps_store *st;
    cr_assert_eq(rt_ps_store_create(&st), 0);
    char err[256] = "";
    rt_ps_shard_state wrong_span = {
        .index = 1, .shards = 2, .lo = 30, .hi = 62, .values = vals, .v = mom};
    cr_assert_eq(open_one(st, init, &wrong_span, 1, err, sizeof err), FERRY_EINVAL);
    /* An Adam state (two moments) for an sgd shard. */
    rt_ps_shard_state adam = {
        .index = 0, .shards = 2, .lo = 0, .hi = 32, .values = vals, .m = mom, .v = mom};
    cr_assert_eq(open_one(st, init, &adam, 1, err, sizeof err), FERRY_EINVAL);
    rt_ps_shard_state ok = {
        .index = 0, .shards = 2, .lo = 0, .hi = 32, .values = vals, .v = mom};
    cr_assert_eq(open_one(st, init, &ok, 1, err, sizeof err), 0, "%s", err);
    rt_ps_close(st, 7, 0);
    rt_ps_store_destroy(st);
}

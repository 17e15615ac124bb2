/* tests/ps — Push and Pull refuse what does not fit, and a refusal changes
 * nothing: NOT_FOUND (FERRY_ENOENT) for a session or shard not held here,
 * INVALID_ARGUMENT (FERRY_EINVAL) for a wrong rank, length, version, kind
 * or head, each with a text that says what was expected; PERMISSION_DENIED
 * (FERRY_EACCES) without the session's secret; on a real worker,
 * UNAUTHENTICATED (FERRY_EUNAUTH) without the cluster token.
 *
 * Every request starts from one that would be accepted — rank 0's push to
 * shard 1, held by rank 1, of a 2-rank session of 40 floats (shard 1 is
 * [32, 40)) — and spoils exactly one thing. Afterwards both shards hold
 * their initial values at version 0, and the push unspoilt is applied. */
#include "tps.h"

#include <string.h>

TestSuite(ps_refuse, .timeout = 60);

#define SESSION 31
#define EASGD   32 /* a second session, elastic */
#define N       40
#define LEN     8 /* shard 1's floats */

static float init[N];

typedef void (*spoil_push)(Ferry__PushRequest *rq, size_t *bytes);
typedef void (*spoil_pull)(Ferry__PullRequest *rq);

static void start(void)
{
    for (int i = 0; i < N; i++)
        init[i] = (float)(i + 1);
    tps_start(2);
    tps_sess s = {
        .session = SESSION, .shards = 2, .staleness = 0, .lr = 1, .init = init, .n = N};
    tps_open_all(&s);
    s.session = EASGD;
    s.algo = RT_PS_EASGD;
    tps_open_all(&s);
}

static Ferry__PushRequest good_push(void)
{
    Ferry__PushRequest rq = FERRY__PUSH_REQUEST__INIT;
    rq.job = SESSION;
    rq.shard = 1;
    rq.from_rank = 0;
    rq.worker_step = 1;
    rq.version = 0;
    rq.kind = FERRY__PUSH_KIND__PUSH_GRADIENT;
    rq.samples = 1;
    return rq;
}

static Ferry__PullRequest good_pull(void)
{
    Ferry__PullRequest rq = FERRY__PULL_REQUEST__INIT;
    rq.job = SESSION;
    rq.shard = 1;
    rq.from_rank = 0;
    return rq;
}

/* Both shards of both sessions as they were opened. */
static void assert_untouched(const char *after)
{
    uint64_t sessions[] = {SESSION, EASGD};
    for (int k = 0; k < 2; k++)
        for (int sh = 0; sh < 2; sh++) {
            float vals[N];
            uint64_t version, samples;
            tps_snapshot(sh, sessions[k], sh, vals, N, &version, &samples);
            size_t lo = sh ? 32 : 0, len = sh ? LEN : 32;
            cr_assert(version == 0 && samples == 0,
                      "after %s, shard %d of session %llu is at version %llu with %llu "
                      "samples",
                      after, sh, (unsigned long long)sessions[k],
                      (unsigned long long)version, (unsigned long long)samples);
            cr_assert(memcmp(vals, init + lo, len * sizeof(float)) == 0,
                      "after %s, shard %d of session %llu changed", after, sh,
                      (unsigned long long)sessions[k]);
        }
}

/* The unspoilt push still goes through: the refusal left no lock held. */
static void assert_still_works(void)
{
    float big[LEN];
    for (int i = 0; i < LEN; i++)
        big[i] = 1;
    Ferry__PushRequest rq = good_push();
    tps_reply r;
    int rc = tps_push_raw(1, &rq, big, LEN, 0, &r);
    cr_assert(rc == 0, "the push unspoilt: %s: %s", ferry_err_name(rc), r.err);
    cr_assert(r.version == 1);
}

static void assert_says(const tps_reply *r, int want, const char *must1,
                        const char *must2)
{
    cr_assert(r->rc == want, "got %s (%s), want %s", ferry_err_name(r->rc), r->err,
              ferry_err_name(want));
    cr_assert(strstr(r->err, must1), "the error text \"%s\" does not say \"%s\"", r->err,
              must1);
    cr_assert(!must2 || strstr(r->err, must2),
              "the error text \"%s\" does not say \"%s\"", r->err, must2);
}

static void refuse_push(spoil_push spoil, int target, int want, const char *must1,
                        const char *must2)
{
    start();
    Ferry__PushRequest rq = good_push();
    size_t bytes = LEN * sizeof(float);
    spoil(&rq, &bytes);
    float big[64];
    for (int i = 0; i < 64; i++)
        big[i] = 1e6f; /* would show in the values if it were applied */
    tps_reply r;
    tps_push_raw(target, &rq, big, 0, bytes, &r);
    assert_says(&r, want, must1, must2);
    assert_untouched("the refused push");
    assert_still_works();
}

static void refuse_pull(spoil_pull spoil, int target, int want, const char *must1,
                        const char *must2)
{
    start();
    Ferry__PullRequest rq = good_pull();
    spoil(&rq);
    tps_reply r;
    float vals[64];
    tps_pull_raw(target, &rq, vals, 64, &r);
    assert_says(&r, want, must1, must2);
    assert_untouched("the refused pull");
    assert_still_works();
}

/* ---- Push ---------------------------------------------------------------------- */

static void push_unknown_session(Ferry__PushRequest *rq, size_t *b)
{
    (void)b;
    rq->job = 999;
}
TPS_TEST(ps_refuse, a_push_to_an_unknown_session)
{
    refuse_push(push_unknown_session, 1, FERRY_ENOENT, "no parameter-server session 999",
                NULL);
}

static void push_not_held(Ferry__PushRequest *rq, size_t *b)
{
    (void)b;
    rq->shard = 0;
}
TPS_TEST(ps_refuse, a_push_to_a_shard_another_rank_holds)
{
    refuse_push(push_not_held, 1, FERRY_ENOENT, "shard 0 of session 31 is not held here",
                NULL);
}

static void push_past_the_shards(Ferry__PushRequest *rq, size_t *b)
{
    (void)b;
    rq->shard = 3;
}
TPS_TEST(ps_refuse, a_push_to_a_shard_past_the_last)
{
    refuse_push(push_past_the_shards, 1, FERRY_ENOENT, "shard 3", "not held here");
}

static void push_short(Ferry__PushRequest *rq, size_t *b)
{
    (void)rq;
    *b = (LEN - 1) * sizeof(float);
}
TPS_TEST(ps_refuse, a_push_of_the_wrong_length)
{
    refuse_push(push_short, 1, FERRY_EINVAL, "holds 8 floats", "carries 7");
}

static void push_long(Ferry__PushRequest *rq, size_t *b)
{
    (void)rq;
    *b = 32 * sizeof(float); /* shard 0's length, to shard 1 */
}
TPS_TEST(ps_refuse, a_push_of_another_shards_length)
{
    refuse_push(push_long, 1, FERRY_EINVAL, "holds 8 floats", "carries 32");
}

static void push_ragged(Ferry__PushRequest *rq, size_t *b)
{
    (void)rq;
    *b = LEN * sizeof(float) - 2;
}
TPS_TEST(ps_refuse, a_push_that_is_not_whole_floats)
{
    refuse_push(push_ragged, 1, FERRY_EINVAL, "30 payload bytes", "whole floats");
}

static void push_bad_rank(Ferry__PushRequest *rq, size_t *b)
{
    (void)b;
    rq->from_rank = 2;
}
TPS_TEST(ps_refuse, a_push_from_a_rank_past_the_world)
{
    refuse_push(push_bad_rank, 1, FERRY_EINVAL, "rank 2 of session 31", "2 ranks");
}

static void push_ahead(Ferry__PushRequest *rq, size_t *b)
{
    (void)b;
    rq->version = 5;
}
TPS_TEST(ps_refuse, a_push_from_a_version_ahead_of_the_shard)
{
    refuse_push(push_ahead, 1, FERRY_EINVAL, "version 5 of shard 1", "ahead");
}

static void push_elastic(Ferry__PushRequest *rq, size_t *b)
{
    (void)b;
    rq->kind = FERRY__PUSH_KIND__PUSH_ELASTIC;
}
TPS_TEST(ps_refuse, an_elastic_push_to_a_downpour_session)
{
    refuse_push(push_elastic, 1, FERRY_EINVAL, "takes gradient pushes", NULL);
}

static void push_gradient_to_easgd(Ferry__PushRequest *rq, size_t *b)
{
    (void)b;
    rq->job = EASGD;
}
TPS_TEST(ps_refuse, a_gradient_push_to_an_easgd_session)
{
    refuse_push(push_gradient_to_easgd, 1, FERRY_EINVAL, "takes elastic", NULL);
}

static void garbage(rpc_channel *ch, const char *method, const uint8_t *head, size_t len,
                    int want, const char *must)
{
    float payload[LEN] = {1e6f};
    tps_reply r;
    tps_call_bytes(ch, method, head, len, payload, sizeof payload, &r);
    assert_says(&r, want, must, NULL);
}

TPS_TEST(ps_refuse, a_push_or_pull_whose_head_is_not_its_message)
{
    start();
    /* Well-formed protobuf, but field 1 (job, a varint) as bytes: rpc passes
     * it on, and the handler cannot unpack it. */
    static const uint8_t head[] = {0x0a, 0x01, 0x00};
    garbage(tps_channel(1), PROTO_METHOD_PUSH, head, sizeof head, FERRY_EINVAL,
            "not a PushRequest");
    garbage(tps_channel(1), PROTO_METHOD_PULL, head, sizeof head, FERRY_EINVAL,
            "not a PullRequest");
    assert_untouched("the garbage");
    assert_still_works();
}

TPS_TEST(ps_refuse, a_push_or_pull_whose_head_is_not_protobuf)
{
    start();
    /* Field 1 as a varint that never ends: rpc itself refuses it, as
     * INVALID_ARGUMENT (gRPC's code for a malformed request). */
    static const uint8_t head[] = {0x08, 0xff, 0xff, 0xff};
    garbage(tps_channel(1), PROTO_METHOD_PUSH, head, sizeof head, FERRY_EINVAL,
            "bad varint");
    garbage(tps_channel(1), PROTO_METHOD_PULL, head, sizeof head, FERRY_EINVAL,
            "bad varint");
    assert_untouched("the garbage");
    assert_still_works();
}

/* ---- Pull ---------------------------------------------------------------------- */

static void pull_unknown_session(Ferry__PullRequest *rq)
{
    rq->job = 999;
}
TPS_TEST(ps_refuse, a_pull_from_an_unknown_session)
{
    refuse_pull(pull_unknown_session, 1, FERRY_ENOENT, "no parameter-server session 999",
                NULL);
}

static void pull_not_held(Ferry__PullRequest *rq)
{
    rq->shard = 1;
}
TPS_TEST(ps_refuse, a_pull_of_a_shard_another_rank_holds)
{
    refuse_pull(pull_not_held, 0, FERRY_ENOENT, "shard 1 of session 31 is not held here",
                NULL);
}

static void pull_bad_rank(Ferry__PullRequest *rq)
{
    rq->from_rank = 7;
}
TPS_TEST(ps_refuse, a_pull_from_a_rank_past_the_world)
{
    refuse_pull(pull_bad_rank, 1, FERRY_EINVAL, "rank 7 of session 31", NULL);
}

/* ---- the session's secret --------------------------------------------------------- */

/* A request's own secret: none at all (data set, so the fixture does not
 * put TPS_SECRET in), one byte off, or one byte short. */
static uint8_t other_secret[RT_PS_SECRET_BYTES];

static ProtobufCBinaryData no_secret(void)
{
    return (ProtobufCBinaryData){.len = 0, .data = other_secret};
}

static ProtobufCBinaryData wrong_secret(void)
{
    memcpy(other_secret, TPS_SECRET, sizeof other_secret);
    other_secret[sizeof other_secret - 1] ^= 1;
    return (ProtobufCBinaryData){.len = sizeof other_secret, .data = other_secret};
}

static ProtobufCBinaryData short_secret(void)
{
    memcpy(other_secret, TPS_SECRET, sizeof other_secret);
    return (ProtobufCBinaryData){.len = sizeof other_secret - 1, .data = other_secret};
}

#define NO_SECRET "does not carry the session's secret"

static void push_no_secret(Ferry__PushRequest *rq, size_t *b)
{
    (void)b;
    rq->secret = no_secret();
}
static void push_wrong_secret(Ferry__PushRequest *rq, size_t *b)
{
    (void)b;
    rq->secret = wrong_secret();
}
static void push_short_secret(Ferry__PushRequest *rq, size_t *b)
{
    (void)b;
    rq->secret = short_secret();
}
TPS_TEST(ps_refuse, a_push_without_the_sessions_secret)
{
    refuse_push(push_no_secret, 1, FERRY_EACCES, NO_SECRET, "session 31");
}
TPS_TEST(ps_refuse, a_push_with_a_wrong_secret)
{
    refuse_push(push_wrong_secret, 1, FERRY_EACCES, NO_SECRET, "session 31");
}
TPS_TEST(ps_refuse, a_push_with_a_secret_one_byte_short)
{
    refuse_push(push_short_secret, 1, FERRY_EACCES, NO_SECRET, "session 31");
}

/* Checked before the shard and the rank: a caller without the secret
 * learns nothing of how the session is laid out. */
static void push_no_secret_not_held(Ferry__PushRequest *rq, size_t *b)
{
    (void)b;
    rq->secret = no_secret();
    rq->shard = 0;
    rq->from_rank = 7;
}
TPS_TEST(ps_refuse, a_push_without_the_secret_is_told_nothing_of_the_shards)
{
    refuse_push(push_no_secret_not_held, 1, FERRY_EACCES, NO_SECRET, "session 31");
}

static void pull_no_secret(Ferry__PullRequest *rq)
{
    rq->secret = no_secret();
    rq->worker_step = 5; /* would park: staleness 0, no rank has pushed */
}
static void pull_wrong_secret(Ferry__PullRequest *rq)
{
    rq->secret = wrong_secret();
}
TPS_TEST(ps_refuse, a_pull_without_the_sessions_secret_is_refused_not_parked)
{
    refuse_pull(pull_no_secret, 1, FERRY_EACCES, NO_SECRET, "session 31");
}
TPS_TEST(ps_refuse, a_pull_with_a_wrong_secret)
{
    refuse_pull(pull_wrong_secret, 1, FERRY_EACCES, NO_SECRET, "session 31");
}

TPS_TEST(ps_refuse, a_session_or_a_client_without_a_secret_is_refused)
{
    start();
    char err[TPS_ERRLEN] = "";
    rt_optim_opts opt = {.kind = RT_OPT_SGD, .lr = 1};
    rt_optim_defaults(&opt);
    rt_ps_session_opts o = {.session = 42,
                            .rank = 0,
                            .world = 2,
                            .optim = &opt,
                            .batch = TPS_BATCH,
                            .push_steps = TPS_PUSH_STEPS,
                            .init = init,
                            .n = N};
    cr_assert(rt_ps_open(T.r[0].store, &o, err, sizeof err) == FERRY_EINVAL);
    cr_assert(strstr(err, "without its secret"), "%s", err);
    rt_ps_client_opts co = {.session = SESSION, .rank = 0, .world = 2, .n = N,
                            .peers = T.peers};
    rt_ps_client *c = NULL;
    cr_assert(rt_ps_client_create(&co, &c, err, sizeof err) == FERRY_EINVAL && !c);
    cr_assert(strstr(err, "without its secret"), "%s", err);
    /* The same session with its secret opens: only the secret was missing. */
    o.secret = TPS_SECRET;
    int rc = rt_ps_open(T.r[0].store, &o, err, sizeof err);
    cr_assert(rc == 0, "%s: %s", ferry_err_name(rc), err);
    assert_untouched("the refused open");
}

/* ---- opening ------------------------------------------------------------------- */

TPS_TEST(ps_refuse, a_session_opened_twice_or_with_bad_options)
{
    start();
    char err[TPS_ERRLEN] = "";
    tps_sess s = {
        .session = SESSION, .shards = 2, .staleness = 0, .lr = 1, .init = init, .n = N};
    int rc = tps_open(0, &s, err, sizeof err);
    cr_assert(rc == FERRY_EEXIST, "opened twice: %s", ferry_err_name(rc));
    cr_assert(strstr(err, "31") && strstr(err, "already open"), "%s", err);
    s.session = 40;
    s.n = 0;
    cr_assert(tps_open(0, &s, err, sizeof err) == FERRY_EINVAL);
    s.n = N;
    s.init = NULL;
    cr_assert(tps_open(0, &s, err, sizeof err) == FERRY_EINVAL);
    s.init = init;
    rt_ps_session_opts o = {
        .session = 41, .rank = 2, .world = 2, .init = init, .n = N, .algo = RT_PS_EASGD};
    cr_assert(rt_ps_open(T.r[0].store, &o, err, sizeof err) == FERRY_EINVAL);
    o.rank = 0;
    o.algo = RT_PS_DOWNPOUR; /* and no optimizer */
    cr_assert(rt_ps_open(T.r[0].store, &o, err, sizeof err) == FERRY_EINVAL);
    /* Nothing of these was kept: 40 and 41 are unknown. */
    Ferry__PullRequest rq = good_pull();
    rq.job = 40;
    rq.shard = 0;
    tps_reply r;
    cr_assert(tps_pull_raw(0, &rq, NULL, 0, &r) == FERRY_ENOENT, "%s", r.err);
    rq.job = 41;
    cr_assert(tps_pull_raw(0, &rq, NULL, 0, &r) == FERRY_ENOENT, "%s", r.err);
    assert_untouched("the refused opens");
}

/* ---- the token, on a real worker -----------------------------------------------------
 */

TPS_TEST(ps_refuse, a_worker_serves_push_and_pull_only_with_the_token)
{
    tps_start_worker();
    rpc_channel *none = tps_channel_to(T.worker_addr, NULL);
    rpc_channel *wrong = tps_channel_to(
        T.worker_addr, "feedfacefeedfacefeedfacefeedfacefeedfacefeedfacefeed"
                       "facefeedfacf");
    rpc_channel *good = tps_channel_to(T.worker_addr, TPS_TOKEN);
    Ferry__PushRequest pu = good_push();
    Ferry__PullRequest pl = good_pull();
    uint8_t push_head[64], pull_head[64];
    size_t push_len = ferry__push_request__pack(&pu, push_head);
    size_t pull_len = ferry__pull_request__pack(&pl, pull_head);
    float payload[LEN] = {0};
    tps_reply r;
    rpc_channel *refused[] = {none, wrong};
    const char *why[] = {"missing cluster token", "wrong cluster token"};
    for (int k = 0; k < 2; k++) {
        tps_call_bytes(refused[k], PROTO_METHOD_PUSH, push_head, push_len, payload,
                       sizeof payload, &r);
        assert_says(&r, FERRY_EUNAUTH, why[k], NULL);
        tps_call_bytes(refused[k], PROTO_METHOD_PULL, pull_head, pull_len, NULL, 0, &r);
        assert_says(&r, FERRY_EUNAUTH, why[k], NULL);
    }
    /* With the token they reach the store, which holds no session. */
    tps_call_bytes(good, PROTO_METHOD_PUSH, push_head, push_len, payload, sizeof payload,
                   &r);
    assert_says(&r, FERRY_ENOENT, "no parameter-server session 31", NULL);
    tps_call_bytes(good, PROTO_METHOD_PULL, pull_head, pull_len, NULL, 0, &r);
    assert_says(&r, FERRY_ENOENT, "no parameter-server session 31", NULL);
}

TPS_TEST(ps_refuse, a_client_with_a_wrong_token_fails_at_once)
{
    tps_start_worker();
    const char *peers[1] = {T.worker_addr};
    rt_ps_client_opts o = {.session = SESSION,
                           .rank = 0,
                           .world = 1,
                           .n = N,
                           .peers = peers,
                           .token = "not the token",
                           .timeout_ms = 5000,
                           .secret = TPS_SECRET};
    rt_ps_client *c = NULL;
    char err[TPS_ERRLEN] = "";
    int rc = rt_ps_client_create(&o, &c, err, sizeof err);
    cr_assert(rc == 0, "%s", err);
    T.clients[0] = c;
    float got[N];
    rt_ps_seen seen;
    double t0 = tps_now_ms();
    rc = rt_ps_pull(c, got, 0, 0, &seen, NULL, NULL, err, sizeof err);
    double took = tps_now_ms() - t0;
    cr_assert(rc == FERRY_EUNAUTH, "got %s: %s", ferry_err_name(rc), err);
    /* Not retried until the timeout as a peer not there yet would be. */
    cr_assert(took < 2000, "the refused pull took %.0f ms", took);
    cr_assert(strstr(err, "shard 0") && strstr(err, "rank 0") &&
                  strstr(err, T.worker_addr),
              "the error \"%s\" does not name the shard, rank and address", err);
}

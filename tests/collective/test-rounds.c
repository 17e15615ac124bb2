/* tests/collective — the all-reduce of 4 ranks as exchange rounds (rank r
 * with r ^ 1, then with r ^ 2) for buffers up to RT_EX_MAX_BYTES, the ring
 * above: which one ran shows in how many chunks each rank sent. Every rank
 * ends with the same bits, NaN payloads included; a silent rank is named
 * by the ranks that wait on it; a chunk from a rank that is not the
 * round's partner, or of a round past the last, is refused and disturbs
 * nothing. */
#include "tcoll.h"

#include <math.h>
#include <string.h>

TestSuite(rounds, .timeout = 60);

#define W 4

static uint64_t chunks_sent(int rank)
{
    rt_comm_stats st;
    rt_comm_get_stats(R.r[rank].comm, &st);
    return st.chunks_sent;
}

/* Chunks of 64 KiB keep the 4 MiB collectives below to a few hundred
 * calls. */
#define CHUNK_FLOATS ((size_t)16384)

static void sum_and_count(size_t n, uint64_t want_sends, const char *what)
{
    float **bufs = co_bufs(W, n, 3);
    double *want, *mag;
    co_reference(bufs, W, n, &want, &mag);
    uint64_t before[W];
    for (int r = 0; r < W; r++)
        before[r] = chunks_sent(r);
    co_allreduce_arg a = {bufs, n};
    co_run_ok(co_allreduce_fn, &a, what);
    co_assert_sums(bufs, W, n, want, mag, CO_F32_REL(W), CO_F32_ABS, what);
    co_assert_identical(bufs, W, n, what);
    for (int r = 0; r < W; r++)
        cr_assert(chunks_sent(r) - before[r] == want_sends,
                  "%s: rank %d sent %llu chunks, want %llu", what, r,
                  (unsigned long long)(chunks_sent(r) - before[r]),
                  (unsigned long long)want_sends);
    co_free(want);
    co_free(mag);
    co_free_bufs(bufs, W);
}

CO_TEST(rounds, small_buffers_go_in_two_exchange_rounds_and_big_ones_round_the_ring)
{
    co_start(W);
    rt_comm_opts o =
        co_opts(1, CHUNK_FLOATS * sizeof(float), RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    /* 4 chunks and a bit: each of 2 rounds sends all 5. */
    sum_and_count(4 * CHUNK_FLOATS + 3, 2 * 5, "5 chunks in exchange rounds");
    /* The largest exchange: RT_EX_MAX_BYTES in chunks, twice. */
    size_t max = RT_EX_MAX_BYTES / sizeof(float);
    sum_and_count(max, 2 * (max / CHUNK_FLOATS), "the largest exchange");
    /* One float more runs the ring: 2 (W - 1) steps of a segment each (the
     * first segment, a float longer, sends one chunk more on the steps
     * that carry it: one of the W - 1 of each phase). */
    size_t n = max + 1, seg = n / W, chunks = (seg + CHUNK_FLOATS - 1) / CHUNK_FLOATS;
    uint64_t ring = 2 * (W - 1) * chunks;
    float **bufs = co_bufs(W, n, 4);
    uint64_t before[W];
    for (int r = 0; r < W; r++)
        before[r] = chunks_sent(r);
    co_allreduce_arg a = {bufs, n};
    co_run_ok(co_allreduce_fn, &a, "one float past the largest exchange");
    co_assert_identical(bufs, W, n, "one float past the largest exchange");
    for (int r = 0; r < W; r++) {
        uint64_t sent = chunks_sent(r) - before[r];
        cr_assert(sent >= ring && sent <= ring + 2,
                  "rank %d sent %llu chunks: not the ring's %llu (+2)", r,
                  (unsigned long long)sent, (unsigned long long)ring);
    }
    co_free_bufs(bufs, W);
}

/* Where every rank holds a NaN with a payload of its own, all four keep
 * the same one: each pair adds the lower rank's value first. */
CO_TEST(rounds, four_ranks_keep_the_same_nan_payload)
{
    co_start(W);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    size_t n = 3 * CO_CHUNK_FLOATS + 5;
    float **bufs = co_bufs(W, n, 6);
    size_t at[] = {0, CO_CHUNK_FLOATS, n - 1};
    for (size_t k = 0; k < 3; k++)
        for (int r = 0; r < W; r++) {
            uint32_t p = 0x7fc00001u + (uint32_t)(r << 8) + (uint32_t)k;
            memcpy(&bufs[r][at[k]], &p, sizeof p);
        }
    /* And one NaN on rank 3 alone, where the others hold numbers. */
    uint32_t lone = 0x7fc0abcdu;
    memcpy(&bufs[3][7], &lone, sizeof lone);
    co_allreduce_arg a = {bufs, n};
    co_run_ok(co_allreduce_fn, &a, "all-reduce of NaNs with four payloads");
    for (size_t k = 0; k < 3; k++)
        cr_assert(isnan(bufs[0][at[k]]), "[%zu]: NaN became %g", at[k],
                  (double)bufs[0][at[k]]);
    cr_assert(isnan(bufs[0][7]), "a lone NaN became %g", (double)bufs[0][7]);
    co_assert_identical(bufs, W, n, "all-reduce of NaNs with four payloads");
    co_free_bufs(bufs, W);
}

#define SILENT_TIMEOUT_MS 800
#define SILENT_SLACK_MS   2500

/* Rank 2 never joins: rank 3 waits on it in round 0, rank 0 in round 1
 * (after its round with rank 1); both name it, its address and the
 * round. Rank 1 waits on rank 3, stuck behind it. */
CO_TEST(rounds, a_silent_rank_is_named_by_the_ranks_whose_partner_it_is)
{
    co_start(W);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, SILENT_TIMEOUT_MS);
    co_join_all(&o);
    size_t n = 2 * CO_CHUNK_FLOATS;
    float **bufs = co_bufs(W, n, 1);
    co_silent_arg s = {{bufs, n}, 2};
    co_result res[CO_MAX_RANKS];
    co_run(co_allreduce_all_but_fn, &s, res);
    int waiters[] = {3, 0};
    const char *round[] = {"exchange round 0", "exchange round 1"};
    for (int i = 0; i < 2; i++) {
        co_result *x = &res[waiters[i]];
        double ms = x->end_ms - x->start_ms;
        cr_assert(x->rc == FERRY_ETIMEDOUT, "rank %d: got %s (%s), want ETIMEDOUT",
                  waiters[i], ferry_err_name(x->rc), x->err);
        cr_assert(ms <= SILENT_TIMEOUT_MS + SILENT_SLACK_MS,
                  "rank %d failed after %.0f ms with a timeout of %d ms", waiters[i], ms,
                  SILENT_TIMEOUT_MS);
        cr_assert(strstr(x->err, "rank 2") && strstr(x->err, R.r[2].addr),
                  "rank %d's error \"%s\" does not name rank 2 at %s", waiters[i], x->err,
                  R.r[2].addr);
        cr_assert(strstr(x->err, round[i]), "rank %d's error \"%s\" does not say \"%s\"",
                  waiters[i], x->err, round[i]);
    }
    cr_assert(res[1].rc != 0, "rank 1 finished without rank 3's second round");
    co_free_bufs(bufs, W);
}

/* A hand-made exchange chunk to rank 1 of a 4-rank session, spoilt by
 * `spoil`: refused with EINVAL and a text with `must`; an all-reduce
 * afterwards still sums right. */
static void refuse_and_recover(void (*spoil)(Ferry__ReduceChunkRequest *),
                               const char *must)
{
    co_start(W);
    rt_comm_opts o = co_opts(31, CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    co_client_to(1);
    size_t n = CO_CHUNK_FLOATS;
    Ferry__ReduceChunkRequest req = FERRY__REDUCE_CHUNK_REQUEST__INIT;
    req.job = 31;
    req.step = 1;
    req.phase = 3; /* exchange */
    req.ring_step = 0;
    req.from_rank = 0;
    req.count = n;
    req.elem = FERRY__ELEM__ELEM_F32;
    req.secret = co_secret_field();
    spoil(&req);
    float *payload = co_alloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        payload[i] = 1e6f; /* would show in the sum if it were kept */
    char err[CO_ERRLEN];
    int rc = co_send_chunk(&req, payload, n * sizeof(float), err, sizeof err);
    co_free(payload);
    cr_assert(rc == FERRY_EINVAL, "got %s (%s), want EINVAL", ferry_err_name(rc), err);
    cr_assert(strstr(err, must), "the error text \"%s\" does not say \"%s\"", err, must);

    co_allreduce_check(n, 2, "all-reduce after a refused chunk");
}

static void from_a_rank_not_the_partner(Ferry__ReduceChunkRequest *r)
{
    r->ring_step = 1; /* rank 1's round-1 partner is rank 3 */
    r->from_rank = 0;
}

CO_TEST(rounds, refuses_an_exchange_chunk_from_a_rank_not_the_partner_of_its_round)
{
    refuse_and_recover(from_a_rank_not_the_partner, "receives it from rank 3 only");
}

static void a_round_past_the_last(Ferry__ReduceChunkRequest *r)
{
    r->ring_step = 2; /* 4 ranks: rounds 0 and 1 */
    r->from_rank = 1 ^ 4;
}

CO_TEST(rounds, refuses_an_exchange_chunk_of_a_round_past_the_last)
{
    refuse_and_recover(a_round_past_the_last, "round 2");
}

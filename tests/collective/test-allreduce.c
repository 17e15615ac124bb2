/* tests/collective — the ring all-reduce against a direct sum in double.
 *
 * Inputs are distinct random floats in [-1, 1) per rank. The float32 ring
 * adds W terms in an order that depends on the segment, so each result is
 * within CO_F32_REL(W) * sum |x_i| of the exact sum (see tcoll.h); and since
 * the all-gather copies each segment's owner's values, every rank must end
 * with the same bits. */
#include "tcoll.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

TestSuite(allreduce, .timeout = 60);

/* Sums one buffer of n floats (seeded `seed`) on every rank and checks. */
static void sum_and_check(size_t n, uint64_t seed)
{
    char what[96];
    snprintf(what, sizeof what, "all-reduce of %zu floats on %d ranks", n, R.world);
    co_allreduce_check(n, seed, what);
}

/* Lengths around the world (segments of 0 or 1 float), around one chunk,
 * and around world chunks (one chunk per segment, then two). */
static void lengths_around_the_chunk(int world)
{
    co_start(world);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    size_t c = CO_CHUNK_FLOATS, w = (size_t)world;
    const size_t lengths[] = {0, 1,     w - 1,     w,     w + 1,     c - 1,
                              c, c + 1, w * c - 1, w * c, w * c + 1, 3 * w * c + 7};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++)
        sum_and_check(lengths[i], 100 + i);
    rt_comm_stats st;
    rt_comm_get_stats(R.r[0].comm, &st);
    cr_assert(st.ops == sizeof lengths / sizeof lengths[0],
              "stats.ops %llu after %zu ops", (unsigned long long)st.ops,
              sizeof lengths / sizeof lengths[0]);
}

CO_TEST(allreduce, sums_lengths_around_the_chunk_on_2_ranks)
{
    lengths_around_the_chunk(2);
}

CO_TEST(allreduce, sums_lengths_around_the_chunk_on_3_ranks)
{
    lengths_around_the_chunk(3);
}

CO_TEST(allreduce, sums_lengths_around_the_chunk_on_4_ranks)
{
    lengths_around_the_chunk(4);
}

#define BIG ((size_t)(1u << 20) + 3)

static void big_buffer(int world, size_t chunk_bytes)
{
    co_start(world);
    rt_comm_opts o = co_opts(7, chunk_bytes, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    sum_and_check(BIG, 7);
}

CO_TEST(allreduce, sums_a_mebifloat_plus_3_at_the_default_chunk_on_2_ranks)
{
    big_buffer(2, 0);
}

CO_TEST(allreduce, sums_a_mebifloat_plus_3_at_the_default_chunk_on_3_ranks)
{
    big_buffer(3, 0);
}

CO_TEST(allreduce, sums_a_mebifloat_plus_3_at_the_default_chunk_on_4_ranks)
{
    big_buffer(4, 0);
}

CO_TEST(allreduce, sums_a_mebifloat_plus_3_in_64k_chunks_on_3_ranks)
{
    big_buffer(3, 64 << 10);
}

/* The chunk size is rounded to 64 bytes: an odd one must still work, on
 * both ends alike. */
CO_TEST(allreduce, an_odd_chunk_size_still_sums)
{
    co_start(3);
    rt_comm_opts o = co_opts(1, 1000, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    sum_and_check(5000, 1);
}

/* The plain path's stats: every rank sends every segment but one in each of
 * the two phases, so across the ranks 2 (W-1) n floats go out, in
 * 2 (W-1) * (chunks of all segments) calls; each byte sent is received
 * raw. */
CO_TEST(allreduce, stats_count_the_chunks_and_bytes_of_the_ring)
{
    int w = 3;
    size_t n = 10007, c = CO_CHUNK_FLOATS;
    co_start(w);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    sum_and_check(n, 3);
    uint64_t chunks = 0, sent = 0, wire = 0, ops = 0, lz4 = 0;
    for (int r = 0; r < w; r++) {
        rt_comm_stats st;
        rt_comm_get_stats(R.r[r].comm, &st);
        chunks += st.chunks_sent;
        sent += st.bytes_sent;
        wire += st.wire_received;
        ops += st.ops;
        lz4 += st.chunks_lz4;
        /* Every session was registered before the first send. */
        cr_assert(st.retries == 0, "rank %d retried %llu times", r,
                  (unsigned long long)st.retries);
    }
    size_t seg_chunks = 0;
    for (int s = 0; s < w; s++) {
        size_t len = n / (size_t)w + ((size_t)s < n % (size_t)w);
        seg_chunks += (len + c - 1) / c;
    }
    cr_assert(ops == (uint64_t)w, "ops %llu", (unsigned long long)ops);
    cr_assert(sent == 2 * (uint64_t)(w - 1) * n * sizeof(float),
              "bytes_sent %llu, want %llu", (unsigned long long)sent,
              (unsigned long long)(2 * (uint64_t)(w - 1) * n * sizeof(float)));
    cr_assert(chunks == 2 * (uint64_t)(w - 1) * seg_chunks, "chunks_sent %llu, want %llu",
              (unsigned long long)chunks,
              (unsigned long long)(2 * (uint64_t)(w - 1) * seg_chunks));
    cr_assert(wire == sent, "wire_received %llu, bytes_sent %llu (no compression)",
              (unsigned long long)wire, (unsigned long long)sent);
    cr_assert(lz4 == 0, "chunks_lz4 %llu without compression", (unsigned long long)lz4);
}

/* NaN and Inf in one rank's input pass through the sum: NaN stays NaN,
 * +Inf stays +Inf where no -Inf is added, +Inf + -Inf is NaN. */
CO_TEST(allreduce, nan_and_inf_pass_through_the_sum)
{
    int w = 3;
    size_t n = 3 * CO_CHUNK_FLOATS + 11;
    co_start(w);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    float **bufs = co_bufs(w, n, 5);
    /* One in each segment, and at a chunk's first and last float. */
    size_t nan_at[] = {0, n / 2, n - 1}, pinf_at[] = {1, CO_CHUNK_FLOATS, n - 2},
           ninf_at[] = {2, n / 3 + 1}, both_at[] = {3, CO_CHUNK_FLOATS - 1};
    for (size_t k = 0; k < 3; k++) {
        bufs[k % 3][nan_at[k]] = NAN;
        bufs[(k + 1) % 3][pinf_at[k]] = INFINITY;
    }
    for (size_t k = 0; k < 2; k++) {
        bufs[2][ninf_at[k]] = -INFINITY;
        bufs[0][both_at[k]] = INFINITY;
        bufs[1][both_at[k]] = -INFINITY;
    }
    float **in = co_copy_bufs(bufs, w, n);
    co_allreduce_arg a = {bufs, n};
    co_run_ok(co_allreduce_fn, &a, "all-reduce with NaN and Inf");
    co_assert_identical(bufs, w, n, "all-reduce with NaN and Inf");
    for (int r = 0; r < w; r++) {
        for (size_t k = 0; k < 3; k++) {
            cr_assert(isnan(bufs[r][nan_at[k]]), "rank %d [%zu]: NaN became %g", r,
                      nan_at[k], (double)bufs[r][nan_at[k]]);
            cr_assert(isinf(bufs[r][pinf_at[k]]) && bufs[r][pinf_at[k]] > 0,
                      "rank %d [%zu]: +Inf became %g", r, pinf_at[k],
                      (double)bufs[r][pinf_at[k]]);
        }
        for (size_t k = 0; k < 2; k++) {
            cr_assert(isinf(bufs[r][ninf_at[k]]) && bufs[r][ninf_at[k]] < 0,
                      "rank %d [%zu]: -Inf became %g", r, ninf_at[k],
                      (double)bufs[r][ninf_at[k]]);
            cr_assert(isnan(bufs[r][both_at[k]]), "rank %d [%zu]: +Inf + -Inf gave %g", r,
                      both_at[k], (double)bufs[r][both_at[k]]);
        }
    }
    /* The finite elements are still sums. */
    double *want, *mag;
    co_reference(in, w, n, &want, &mag);
    for (int r = 0; r < w; r++)
        for (size_t i = 0; i < n; i++)
            if (isfinite(want[i]))
                cr_assert(fabs((double)bufs[r][i] - want[i]) <=
                              CO_F32_REL(w) * mag[i] + CO_F32_ABS,
                          "rank %d [%zu]: got %g, want %g", r, i, (double)bufs[r][i],
                          want[i]);
    co_free(want);
    co_free(mag);
    co_free_bufs(in, w);
    co_free_bufs(bufs, w);
}

/* Two ranks exchange their buffers and each adds the other's: where both
 * hold a NaN, with different payloads, the sum keeps one of them, and both
 * ranks must keep the same one. */
CO_TEST(allreduce, two_ranks_keep_the_same_nan_payload)
{
    int w = 2;
    size_t n = 3 * CO_CHUNK_FLOATS + 5;
    co_start(w);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    float **bufs = co_bufs(w, n, 6);
    size_t at[] = {0, CO_CHUNK_FLOATS, n - 1};
    for (size_t k = 0; k < 3; k++) {
        uint32_t p0 = 0x7fc00001u + (uint32_t)k, p1 = 0x7fc00100u + (uint32_t)k;
        memcpy(&bufs[0][at[k]], &p0, sizeof p0);
        memcpy(&bufs[1][at[k]], &p1, sizeof p1);
    }
    co_allreduce_arg a = {bufs, n};
    co_run_ok(co_allreduce_fn, &a, "all-reduce of NaNs with two payloads");
    for (size_t k = 0; k < 3; k++)
        cr_assert(isnan(bufs[0][at[k]]), "[%zu]: NaN became %g", at[k],
                  (double)bufs[0][at[k]]);
    co_assert_identical(bufs, w, n, "all-reduce of NaNs with two payloads");
    co_free_bufs(bufs, w);
}

/* A world of one: nothing to send, the buffer is its own sum. */
CO_TEST(allreduce, a_world_of_1_leaves_the_buffer_as_it_is)
{
    co_start(1);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    size_t n = 3 * CO_CHUNK_FLOATS + 1;
    float **bufs = co_bufs(1, n, 1);
    float **in = co_copy_bufs(bufs, 1, n);
    char err[CO_ERRLEN] = "";
    int rc = rt_comm_allreduce(R.r[0].comm, bufs[0], n, NULL, NULL, err, sizeof err);
    cr_assert(rc == 0, "all-reduce: %s: %s", ferry_err_name(rc), err);
    cr_assert(memcmp(bufs[0], in[0], n * sizeof(float)) == 0);
    rc = rt_comm_broadcast(R.r[0].comm, bufs[0], n, 0, NULL, NULL, err, sizeof err);
    cr_assert(rc == 0, "broadcast: %s: %s", ferry_err_name(rc), err);
    cr_assert(memcmp(bufs[0], in[0], n * sizeof(float)) == 0);
    co_free_bufs(in, 1);
    co_free_bufs(bufs, 1);
}

/* tests/collective — the compressed paths.
 *
 * lz4: chunks travel lz4-framed where that pays (rpc's AUTO), so a sparse
 * buffer (mostly zeros) arrives compressed and dense random data raw; the
 * sum is float32 either way. Small integers sum exactly.
 *
 * fp16: values travel as IEEE half and are summed in float32. Each of the
 * W - 1 reduce-scatter sends rounds a partial sum (|p| <= sum |x_i|) to half
 * (relative 2^-11, or 2^-25 absolute among subnormals), each addition rounds
 * in float32 (2^-24), and the owner rounds its complete segment to half
 * before the all-gather. So |got - want| <= W * 2^-11 * sum |x_i| +
 * (W - 1) * 2^-24 * sum |x_i| + W * 2^-25; the checks use
 * (W + 1) * 2^-11 * sum |x_i| + W * 2^-24. Every result is a half value,
 * the same bits on every rank. */
#include "tcoll.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

TestSuite(lz4, .timeout = 60);
TestSuite(fp16, .timeout = 60);

#define LZ4_CHUNK ((size_t)64 << 10)

/* Mostly zeros: one float in 16 is a small integer (1..8), at places that
 * differ per rank. */
static float **sparse_bufs(int world, size_t n, uint64_t seed)
{
    float **b = co_bufs(world, n, seed);
    for (int r = 0; r < world; r++) {
        float *x = b[r];
        for (size_t i = 0; i < n; i++) {
            uint32_t h = (uint32_t)((i * 2654435761u) ^ ((uint64_t)r * 40503u + seed));
            h ^= h >> 13;
            h *= 0x5bd1e995u;
            h ^= h >> 15;
            x[i] = (h & 15) == 0 ? (float)(1 + (h >> 4) % 8) : 0.0f;
        }
    }
    return b;
}

CO_TEST(lz4, sums_a_sparse_buffer_exactly_and_receives_it_lz4_framed)
{
    int w = 3;
    size_t n = 200003;
    co_start(w);
    rt_comm_opts o = co_opts(1, LZ4_CHUNK, RT_COMPRESS_LZ4, CO_TIMEOUT_MS);
    co_join_all(&o);
    float **bufs = sparse_bufs(w, n, 1);
    double *want, *mag;
    co_reference(bufs, w, n, &want, &mag);
    co_allreduce_arg a = {bufs, n};
    co_run_ok(co_allreduce_fn, &a, "lz4 all-reduce of a sparse buffer");
    co_assert_sums(bufs, w, n, want, mag, 0, 0, "lz4 all-reduce of a sparse buffer");
    co_assert_identical(bufs, w, n, "lz4 all-reduce of a sparse buffer");

    uint64_t sent = 0, wire = 0;
    for (int r = 0; r < w; r++) {
        rt_comm_stats st;
        rt_comm_get_stats(R.r[r].comm, &st);
        cr_assert(st.chunks_lz4 > 0,
                  "rank %d received no lz4-framed chunk of %llu (sent %llu bytes, "
                  "received %llu on the wire)",
                  r, (unsigned long long)st.chunks_sent,
                  (unsigned long long)st.bytes_sent,
                  (unsigned long long)st.wire_received);
        sent += st.bytes_sent;
        wire += st.wire_received;
    }
    cr_assert(wire * 2 < sent,
              "a sparse buffer should compress: %llu bytes sent, %llu on the wire",
              (unsigned long long)sent, (unsigned long long)wire);
    co_free(want);
    co_free(mag);
    co_free_bufs(bufs, w);
}

CO_TEST(lz4, sums_dense_random_data_correctly)
{
    int w = 3;
    size_t n = 200003;
    co_start(w);
    rt_comm_opts o = co_opts(1, LZ4_CHUNK, RT_COMPRESS_LZ4, CO_TIMEOUT_MS);
    co_join_all(&o);
    co_allreduce_check(n, 2, "lz4 all-reduce of dense data");
}

CO_TEST(lz4, sums_a_sparse_buffer_exactly_in_4k_chunks_on_4_ranks)
{
    int w = 4;
    size_t n = 4 * CO_CHUNK_FLOATS + 9;
    co_start(w);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_LZ4, CO_TIMEOUT_MS);
    co_join_all(&o);
    float **bufs = sparse_bufs(w, n, 3);
    double *want, *mag;
    co_reference(bufs, w, n, &want, &mag);
    co_allreduce_arg a = {bufs, n};
    co_run_ok(co_allreduce_fn, &a, "lz4 all-reduce in 4 KiB chunks");
    co_assert_sums(bufs, w, n, want, mag, 0, 0, "lz4 all-reduce in 4 KiB chunks");
    co_assert_identical(bufs, w, n, "lz4 all-reduce in 4 KiB chunks");
    co_free(want);
    co_free(mag);
    co_free_bufs(bufs, w);
}

/* ---- fp16 ---------------------------------------------------------------------- */

#define F16_REL(w) ((double)((w) + 1) * 0x1p-11)
#define F16_ABS(w) ((double)(w)*0x1p-24)

static void assert_half_values(float *const *bufs, int world, size_t n, const char *what)
{
    float *copy = co_alloc((n ? n : 1) * sizeof(float));
    cr_assert(copy);
    for (int r = 0; r < world; r++) {
        if (n)
            memcpy(copy, bufs[r], n * sizeof(float));
        rt_half_round(copy, n);
        for (size_t i = 0; i < n; i++)
            if (memcmp(&copy[i], &bufs[r][i], sizeof(float)) != 0 &&
                !(isnan(copy[i]) && isnan(bufs[r][i])))
                cr_assert_fail("%s: rank %d element %zu is %.9g, not a half value (%.9g)",
                               what, r, i, (double)bufs[r][i], (double)copy[i]);
    }
    co_free(copy);
}

static void fp16_sum(int w, size_t n, size_t chunk_bytes, uint64_t seed)
{
    co_start(w);
    rt_comm_opts o = co_opts(1, chunk_bytes, RT_COMPRESS_FP16, CO_TIMEOUT_MS);
    co_join_all(&o);
    float **bufs = co_bufs(w, n, seed);
    double *want, *mag;
    co_reference(bufs, w, n, &want, &mag);
    char what[96];
    snprintf(what, sizeof what, "fp16 all-reduce of %zu floats on %d ranks", n, w);
    co_allreduce_arg a = {bufs, n};
    co_run_ok(co_allreduce_fn, &a, what);
    co_assert_sums(bufs, w, n, want, mag, F16_REL(w), F16_ABS(w), what);
    co_assert_identical(bufs, w, n, what);
    assert_half_values(bufs, w, n, what);
    co_free(want);
    co_free(mag);
    co_free_bufs(bufs, w);
}

CO_TEST(fp16, sums_within_half_precision_bit_identical_on_3_ranks)
{
    fp16_sum(3, 5 * CO_CHUNK_FLOATS + 17, CO_CHUNK_BYTES, 1);
}

CO_TEST(fp16, sums_within_half_precision_bit_identical_on_4_ranks)
{
    fp16_sum(4, 100003, 0, 2);
}

CO_TEST(fp16, sums_within_half_precision_bit_identical_on_2_ranks)
{
    fp16_sum(2, 3, CO_CHUNK_BYTES, 3);
}

/* Small values become half subnormals (or zero) on the wire: still within
 * the absolute part of the bound. */
CO_TEST(fp16, tiny_values_stay_within_the_subnormal_bound)
{
    int w = 3;
    size_t n = 3001;
    co_start(w);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_FP16, CO_TIMEOUT_MS);
    co_join_all(&o);
    float **bufs = co_bufs(w, n, 4);
    for (int r = 0; r < w; r++)
        for (size_t i = 0; i < n; i++)
            bufs[r][i] *= 1e-5f;
    double *want, *mag;
    co_reference(bufs, w, n, &want, &mag);
    co_allreduce_arg a = {bufs, n};
    co_run_ok(co_allreduce_fn, &a, "fp16 all-reduce of tiny values");
    co_assert_sums(bufs, w, n, want, mag, F16_REL(w), F16_ABS(w),
                   "fp16 all-reduce of tiny values");
    co_assert_identical(bufs, w, n, "fp16 all-reduce of tiny values");
    co_free(want);
    co_free(mag);
    co_free_bufs(bufs, w);
}

CO_TEST(fp16, nan_and_inf_survive_the_half_wire)
{
    int w = 3;
    size_t n = 2 * CO_CHUNK_FLOATS + 1;
    co_start(w);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_FP16, CO_TIMEOUT_MS);
    co_join_all(&o);
    float **bufs = co_bufs(w, n, 5);
    bufs[0][0] = NAN;
    bufs[1][n / 2] = INFINITY;
    bufs[2][n - 1] = -INFINITY;
    co_allreduce_arg a = {bufs, n};
    co_run_ok(co_allreduce_fn, &a, "fp16 all-reduce with NaN and Inf");
    for (int r = 0; r < w; r++) {
        cr_assert(isnan(bufs[r][0]), "rank %d: NaN became %g", r, (double)bufs[r][0]);
        cr_assert(isinf(bufs[r][n / 2]) && bufs[r][n / 2] > 0, "rank %d: +Inf became %g",
                  r, (double)bufs[r][n / 2]);
        cr_assert(isinf(bufs[r][n - 1]) && bufs[r][n - 1] < 0, "rank %d: -Inf became %g",
                  r, (double)bufs[r][n - 1]);
        for (size_t i = 1; i < n - 1; i++)
            cr_assert(i == n / 2 || isfinite(bufs[r][i]), "rank %d [%zu]: %g", r, i,
                      (double)bufs[r][i]);
    }
    co_assert_identical(bufs, w, n, "fp16 all-reduce with NaN and Inf");
    co_free_bufs(bufs, w);
}

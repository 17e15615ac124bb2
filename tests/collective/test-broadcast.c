/* tests/collective — broadcast: every rank ends with the root's floats,
 * bit for bit, and the root's buffer is left as it was. */
#include "tcoll.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

TestSuite(broadcast, .timeout = 60);

/* Broadcasts n floats from `root`; the other ranks start with different
 * random values (and a NaN), which must all be overwritten. */
static void broadcast_and_check(size_t n, int root, uint64_t seed)
{
    int w = R.world;
    float **bufs = co_bufs(w, n, seed);
    for (int r = 0; r < w; r++)
        if (r != root && n > 0)
            bufs[r][n / 2] = NAN;
    float *want = co_alloc((n ? n : 1) * sizeof(float));
    cr_assert(want);
    if (n)
        memcpy(want, bufs[root], n * sizeof(float));
    char what[96];
    snprintf(what, sizeof what, "broadcast of %zu floats from rank %d of %d", n, root, w);
    co_broadcast_arg a = {bufs, n, root};
    co_run_ok(co_broadcast_fn, &a, what);
    for (int r = 0; r < w; r++)
        for (size_t i = 0; i < n; i++)
            if (memcmp(&bufs[r][i], &want[i], sizeof(float)) != 0)
                cr_assert_fail("%s: rank %d element %zu: got %.9g, root had %.9g", what,
                               r, i, (double)bufs[r][i], (double)want[i]);
    co_free(want);
    co_free_bufs(bufs, w);
}

static const size_t lengths[] = {
    0, 1, 2, CO_CHUNK_FLOATS - 1, CO_CHUNK_FLOATS + 1, 3 * CO_CHUNK_FLOATS + 5, 100003};
#define N_LENGTHS (sizeof lengths / sizeof lengths[0])

CO_TEST(broadcast, copies_root_0s_floats_to_every_rank_of_3)
{
    co_start(3);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    for (size_t i = 0; i < N_LENGTHS; i++)
        broadcast_and_check(lengths[i], 0, 10 + i);
}

CO_TEST(broadcast, copies_a_non_zero_roots_floats_to_every_rank_of_4)
{
    co_start(4);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    for (size_t i = 0; i < N_LENGTHS; i++)
        broadcast_and_check(lengths[i], 2, 20 + i);
    /* The last rank, whose right neighbour is rank 0. */
    broadcast_and_check(CO_CHUNK_FLOATS * 2 + 3, 3, 30);
}

CO_TEST(broadcast, works_between_2_ranks_from_either_root)
{
    co_start(2);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    broadcast_and_check(5 * CO_CHUNK_FLOATS + 1, 1, 40);
    broadcast_and_check(5 * CO_CHUNK_FLOATS + 1, 0, 41);
}

/* fp16 compresses the all-reduce only: a broadcast (parameters) is exact. */
CO_TEST(broadcast, is_exact_in_an_fp16_session)
{
    co_start(3);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_FP16, CO_TIMEOUT_MS);
    co_join_all(&o);
    broadcast_and_check(3 * CO_CHUNK_FLOATS + 5, 1, 50);
}

CO_TEST(broadcast, is_exact_in_an_lz4_session)
{
    co_start(3);
    rt_comm_opts o = co_opts(1, 64 << 10, RT_COMPRESS_LZ4, CO_TIMEOUT_MS);
    co_join_all(&o);
    broadcast_and_check(100003, 2, 60);
}

/* A root outside the world is the caller's mistake, refused at the start;
 * it fails nothing, so the session goes on. */
CO_TEST(broadcast, a_root_outside_the_world_is_refused_and_the_session_goes_on)
{
    co_start(2);
    rt_comm_opts o = co_opts(1, CO_CHUNK_BYTES, RT_COMPRESS_NONE, CO_TIMEOUT_MS);
    co_join_all(&o);
    float x[4] = {1, 2, 3, 4};
    rt_comm_op *op = NULL;
    int rc = rt_comm_broadcast_start(R.r[0].comm, x, 4, 2, &op);
    cr_assert(rc == FERRY_EINVAL, "root 2 of 2: %s", ferry_err_name(rc));
    cr_assert(op == NULL);
    rc = rt_comm_broadcast_start(R.r[0].comm, x, 4, -1, &op);
    cr_assert(rc == FERRY_EINVAL, "root -1: %s", ferry_err_name(rc));
    cr_assert(op == NULL);
    broadcast_and_check(CO_CHUNK_FLOATS + 1, 1, 70);
}

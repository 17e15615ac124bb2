/* tests/data — a rank's shard: the shards cover a set once in rank order
 * whatever its size, each rank's batches come from its shard only and
 * keep the sizes of an unsharded loader's slices, the block shuffle is a
 * function of (seed, rank, epoch) that keeps whole blocks within a window,
 * and a sharded loader reads an .npy in place as it reads a copy. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/data_int.h"
#include "tdata.h"
#include "tfiles.h"

#define FEAT 6

/* Row i is {i, i, ...}, label i. */
static rt_dataset make_set(size_t n)
{
    rt_dataset ds = {.n = n, .features = FEAT, .c = 1, .h = 1, .w = FEAT, .classes = 1};
    ds.x = malloc((n ? n : 1) * FEAT * sizeof(float));
    ds.labels = malloc((n ? n : 1) * sizeof(int32_t));
    cr_assert(ds.x && ds.labels);
    for (size_t i = 0; i < n; i++) {
        for (int j = 0; j < FEAT; j++)
            ds.x[i * FEAT + j] = (float)i;
        ds.labels[i] = (int32_t)i;
    }
    return ds;
}

static rt_loader *sharded(const rt_dataset *ds, int batch, int rank, int world,
                          bool shuffle)
{
    rt_loader_opts o = {.batch = batch,
                        .rank = rank,
                        .world = world,
                        .seed = 11,
                        .shuffle = shuffle,
                        .shard = true};
    rt_loader *l = NULL;
    cr_assert_eq(rt_loader_create(ds, &o, &l), 0);
    return l;
}

TD_TEST(shard, the_shards_cover_the_set_once_in_rank_order_whatever_the_sizes)
{
    const size_t cases[][3] = {{1003, 64, 3}, {1000, 64, 4}, {10, 64, 4},
                               {5, 2, 4},     {0, 8, 2},     {777, 1, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        size_t n = cases[c][0], batch = cases[c][1], world = cases[c][2], at = 0;
        for (int r = 0; r < (int)world; r++) {
            size_t lo, len;
            rt_shard_of(n, batch, r, (int)world, &lo, &len);
            cr_expect_eq(lo, at, "n %zu batch %zu world %zu: rank %d starts at %zu", n,
                         batch, world, r, lo);
            at = lo + len;
        }
        cr_expect_eq(at, n, "n %zu batch %zu world %zu: the shards end at %zu", n, batch,
                     world, at);
    }
}

/* Every rank's epoch: the same steps, each rank's slice of every global
 * batch as large as an unsharded loader's, drawn from its shard, and the
 * set seen once over all ranks. */
static void check_epoch(size_t n, int batch, int world, bool shuffle)
{
    rt_dataset ds = make_set(n);
    rt_loader *l[8];
    size_t lo[8], len[8];
    for (int r = 0; r < world; r++) {
        l[r] = sharded(&ds, batch, r, world, shuffle);
        rt_shard_of(n, (size_t)batch, r, world, &lo[r], &len[r]);
        cr_assert_eq(rt_loader_begin(l[r], 2), 0);
    }
    unsigned *seen = calloc(n ? n : 1, sizeof *seen);
    cr_assert(seen);
    size_t steps = rt_loader_steps(l[0]);
    for (size_t k = 0; k < steps; k++) {
        size_t gstart = k * (size_t)batch;
        size_t gsize = n - gstart < (size_t)batch ? n - gstart : (size_t)batch;
        for (int r = 0; r < world; r++) {
            const rt_batch_host *b = rt_loader_next(l[r]);
            cr_assert_not_null(b, "rank %d step %zu", r, k);
            size_t start, want;
            rt_rank_slice(gsize, r, world, &start, &want);
            cr_assert_eq((size_t)b->n, want, "rank %d step %zu: %d samples", r, k, b->n);
            for (int i = 0; i < b->n; i++) {
                size_t id = (size_t)b->labels[i];
                cr_assert(id >= lo[r] && id < lo[r] + len[r],
                          "rank %d got sample %zu, outside its shard [%zu, %zu)", r, id,
                          lo[r], lo[r] + len[r]);
                cr_assert_eq(b->x[(size_t)i * FEAT + FEAT - 1], (float)id);
                seen[id]++;
            }
        }
    }
    for (int r = 0; r < world; r++) {
        cr_expect_null(rt_loader_next(l[r]), "rank %d has no step more", r);
        rt_loader_destroy(l[r]);
    }
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(seen[i], 1, "sample %zu seen %u times", i, seen[i]);
    free(seen);
    rt_dataset_free(&ds);
}

TD_TEST(shard, each_rank_reads_its_shard_only_and_the_ranks_the_set_once)
{
    check_epoch(1003, 64, 3, true);
    check_epoch(1000, 64, 4, true);
    check_epoch(10, 64, 4, true);
    check_epoch(5, 2, 4, true);
    check_epoch(1003, 64, 1, true);
    check_epoch(1003, 64, 3, false);
}

TD_TEST(shard, without_shuffle_a_shard_is_read_in_file_order)
{
    rt_dataset ds = make_set(1003);
    rt_loader *l = sharded(&ds, 60, 1, 3, false);
    size_t lo, len, next;
    rt_shard_of(1003, 60, 1, 3, &lo, &len);
    next = lo;
    cr_assert_eq(rt_loader_begin(l, 0), 0);
    const rt_batch_host *b;
    while ((b = rt_loader_next(l)))
        for (int i = 0; i < b->n; i++)
            cr_assert_eq((size_t)b->labels[i], next++);
    cr_expect_eq(next, lo + len);
    rt_loader_destroy(l);
    rt_dataset_free(&ds);
}

#define LO    100
#define LEN   1005
#define BROWS 10

static void order(uint32_t *perm, uint64_t seed, int rank, int epoch)
{
    uint32_t blocks[128];
    cr_assert(rt_shard_blocks(LEN, BROWS) <= 128);
    rt_shard_order(perm, blocks, LO, LEN, BROWS, true, seed, rank, epoch);
}

TD_TEST(shard, the_block_shuffle_keeps_whole_blocks_within_a_window)
{
    static uint32_t p[LEN];
    order(p, 7, 1, 2);
    size_t window = BROWS * RT_SHARD_WINDOW_BLOCKS, in_place = 0;
    /* Windows of whole blocks: each window's positions hold exactly the
     * rows of the RT_SHARD_WINDOW_BLOCKS blocks whose rows it holds. */
    static size_t count[LEN], window_of[LEN];
    size_t w = 0, blocks_in_w = 0;
    for (size_t i = 0; i < LEN; i++) {
        cr_assert(p[i] >= LO && p[i] < LO + LEN, "sample %u outside the shard", p[i]);
        size_t block = (p[i] - LO) / BROWS;
        if (count[block]++ == 0) {
            if (blocks_in_w == RT_SHARD_WINDOW_BLOCKS) {
                for (size_t b = 0; b < LEN / BROWS + 1; b++)
                    cr_assert(window_of[b] != w + 1 || !count[b] ||
                                  count[b] == (b == LEN / BROWS ? LEN % BROWS : BROWS),
                              "block %zu is split across windows", b);
                w++;
                blocks_in_w = 0;
            }
            window_of[block] = w + 1;
            blocks_in_w++;
        }
        cr_assert_eq(window_of[block], w + 1, "block %zu is split across windows", block);
        in_place += p[i] == LO + i;
    }
    for (size_t b = 0; b < rt_shard_blocks(LEN, BROWS); b++)
        cr_assert_eq(count[b], b == LEN / BROWS ? LEN % BROWS : BROWS, "block %zu", b);
    cr_expect(in_place < 20, "shuffled: %zu of %d in place", in_place, LEN);
    /* The blocks themselves moved: the first window is not the first
     * RT_SHARD_WINDOW_BLOCKS blocks of the file. */
    size_t early = 0;
    for (size_t i = 0; i < window; i++)
        early += (p[i] - LO) / BROWS < RT_SHARD_WINDOW_BLOCKS;
    cr_expect(early < window, "the first window holds the file's first blocks");
}

TD_TEST(shard, the_block_shuffle_depends_on_seed_rank_and_epoch_only)
{
    static uint32_t a[LEN], b[LEN], c[LEN], d[LEN], e[LEN];
    order(a, 7, 1, 2);
    order(b, 7, 1, 2);
    order(c, 7, 1, 3);
    order(d, 7, 0, 2);
    order(e, 8, 1, 2);
    cr_expect_eq(memcmp(a, b, sizeof a), 0, "the same (seed, rank, epoch)");
    cr_expect_neq(memcmp(a, c, sizeof a), 0, "another epoch");
    cr_expect_neq(memcmp(a, d, sizeof a), 0, "another rank");
    cr_expect_neq(memcmp(a, e, sizeof a), 0, "another seed");
}

TD_TEST(shard, blocks_are_a_quarter_mebibyte_of_the_file)
{
    cr_expect_eq(rt_shard_block_rows(3136), RT_SHARD_BLOCK_BYTES / 3136);
    cr_expect_eq(rt_shard_block_rows(RT_SHARD_BLOCK_BYTES * 3), 1, "a huge row: 1");
}

/* 700 float32 samples of FEAT in an .npy and its labels; the set read in
 * place, and a copy of it in memory. */
TD_TEST(shard, a_sharded_loader_reads_an_npy_in_place_as_it_reads_a_copy)
{
    size_t n = 700;
    float *x = malloc(n * FEAT * sizeof *x);
    int32_t *y = malloc(n * sizeof *y);
    cr_assert(x && y);
    for (size_t i = 0; i < n * FEAT; i++)
        x[i] = (float)((i * 7919) % 1013) * 0.25f;
    for (size_t i = 0; i < n; i++)
        y[i] = (int32_t)(i % 5);
    uint64_t xs[] = {n, FEAT}, ys[] = {n};
    tf_write_npy(td_path("x.npy"), "<f4", xs, 2, x, n * FEAT * sizeof *x);
    tf_write_npy(td_path("y.npy"), "<i4", ys, 1, y, n * sizeof *y);
    char xp[256], yp[256];
    snprintf(xp, sizeof xp, "%s", td_path("x.npy"));
    snprintf(yp, sizeof yp, "%s", td_path("y.npy"));
    rt_data_source s = {.path = xp, .labels = yp, .test_path = xp, .test_labels = yp,
                        .normalize = "none"};
    rt_dataset tr, te;
    char err[512] = "";
    cr_assert_eq(rt_data_source_load(&s, NULL, &tr, &te, err, sizeof err), 0, "%s", err);
    cr_assert(tr.mapped && !tr.x && tr.n == n);
    rt_dataset copy = {.n = n, .features = FEAT, .c = 1, .h = 1, .w = FEAT,
                       .classes = tr.classes, .x = x, .labels = y};
    for (int r = 0; r < 3; r++) {
        rt_loader *a = sharded(&tr, 50, r, 3, true), *b = sharded(&copy, 50, r, 3, true);
        cr_assert_eq(rt_loader_begin(a, 1), 0);
        cr_assert_eq(rt_loader_begin(b, 1), 0);
        const rt_batch_host *ha, *hb;
        while ((ha = rt_loader_next(a))) {
            hb = rt_loader_next(b);
            cr_assert(hb && ha->n == hb->n);
            cr_assert(memcmp(ha->x, hb->x, (size_t)ha->n * FEAT * sizeof(float)) == 0);
            cr_assert(memcmp(ha->labels, hb->labels, (size_t)ha->n * sizeof(int32_t)) == 0);
        }
        cr_expect_null(rt_loader_next(b));
        rt_loader_destroy(a);
        rt_loader_destroy(b);
    }
    rt_dataset_free(&tr);
    rt_dataset_free(&te);
    free(x);
    free(y);
}

/* 400 samples of 4 float32 with a NaN at sample 350 (rank 1's shard of 2
 * at a batch of 40), and a clean test file. */
static rt_data_source nan_in_rank_1(char paths[4][256])
{
    enum { N = 400, F = 4, T = 100 };
    static float x[N * F], tx[T * F];
    static int32_t y[N], ty[T];
    for (int i = 0; i < N * F; i++)
        x[i] = (float)(i % 9);
    for (int i = 0; i < T * F; i++)
        tx[i] = (float)(i % 5);
    x[350 * F + 2] = NAN;
    uint64_t xs[] = {N, F}, ys[] = {N}, ts[] = {T, F}, tys[] = {T};
    const char *names[] = {"nx.npy", "ny.npy", "tx.npy", "ty.npy"};
    tf_write_npy(td_path(names[0]), "<f4", xs, 2, x, sizeof x);
    tf_write_npy(td_path(names[1]), "<i4", ys, 1, y, sizeof y);
    tf_write_npy(td_path(names[2]), "<f4", ts, 2, tx, sizeof tx);
    tf_write_npy(td_path(names[3]), "<i4", tys, 1, ty, sizeof ty);
    for (int i = 0; i < 4; i++)
        snprintf(paths[i], 256, "%s", td_path(names[i]));
    return (rt_data_source){.path = paths[0],
                            .labels = paths[1],
                            .test_path = paths[2],
                            .test_labels = paths[3],
                            .normalize = "none",
                            .world = 2,
                            .batch = 40,
                            .test_batch = 40};
}

static int load(const rt_data_source *s, char *err, size_t errlen)
{
    rt_dataset tr, te;
    int rc = rt_data_source_load(s, NULL, &tr, &te, err, errlen);
    if (rc == 0) {
        cr_expect(tr.mapped, "read in place");
        rt_dataset_free(&tr);
        rt_dataset_free(&te);
    }
    return rc;
}

TD_TEST(shard, without_normalising_a_rank_checks_only_its_shards_for_nan)
{
    char paths[4][256], err[512] = "";
    rt_data_source s = nan_in_rank_1(paths);
    s.rank = 0;
    cr_expect_eq(load(&s, err, sizeof err), 0, "rank 0 reads no NaN: %s", err);
    s.rank = 1;
    td_expect_err(load(&s, err, sizeof err), FERRY_ECORRUPT, err, paths[0]);
    cr_expect(strstr(err, "1 NaN or infinite values, the first at sample 350, number 2"),
              "%s", err);
}

TD_TEST(shard, normalising_or_no_shards_checks_the_whole_set)
{
    char paths[4][256], err[512] = "";
    rt_data_source s = nan_in_rank_1(paths);
    s.normalize = "standard";
    td_expect_err(load(&s, err, sizeof err), FERRY_ECORRUPT, err, paths[0]);
    s.normalize = "none";
    s.world = 0;
    td_expect_err(load(&s, err, sizeof err), FERRY_ECORRUPT, err, paths[0]);
    cr_expect(strstr(err, "at sample 350, number 2"), "%s", err);
}

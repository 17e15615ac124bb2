/* tests/data — the loader: every sample once an epoch, the shuffle a pure
 * function of (seed, epoch), W ranks' slices adding up to one rank's batch,
 * empty slices, regression targets, and the prefetch thread's lifecycle
 * (begin again, destroy mid-epoch, the held batch left alone). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tdata.h"

#define FEAT 5

/* n samples whose row i is {i, i + 0.5, ...} and label i: a batch says
 * exactly which samples it holds. With `regression`, targets {-i, 2i}
 * instead of labels. */
static rt_dataset make_set(size_t n, bool regression)
{
    rt_dataset ds = {.n = n, .features = FEAT, .c = 1, .h = 1, .w = FEAT};
    ds.x = malloc((n ? n : 1) * FEAT * sizeof(float));
    cr_assert(ds.x);
    for (size_t i = 0; i < n; i++)
        for (int j = 0; j < FEAT; j++)
            ds.x[i * FEAT + j] = (float)i + 0.5f * (float)j;
    if (regression) {
        ds.outputs = 2;
        ds.targets = malloc((n ? n : 1) * 2 * sizeof(float));
        cr_assert(ds.targets);
        for (size_t i = 0; i < n; i++) {
            ds.targets[2 * i] = -(float)i;
            ds.targets[2 * i + 1] = 2.0f * (float)i;
        }
    } else {
        ds.classes = 10;
        ds.labels = malloc((n ? n : 1) * sizeof(int32_t));
        cr_assert(ds.labels);
        for (size_t i = 0; i < n; i++)
            ds.labels[i] = (int32_t)i;
    }
    return ds;
}

static rt_loader *make_loader(const rt_dataset *ds, int batch, int rank, int world,
                              uint64_t seed, bool shuffle)
{
    rt_loader_opts o = {
        .batch = batch, .rank = rank, .world = world, .seed = seed, .shuffle = shuffle};
    rt_loader *l = NULL;
    cr_assert_eq(rt_loader_create(ds, &o, &l), 0);
    cr_assert_not_null(l);
    return l;
}

/* Checks a batch's rows agree with its labels (or targets); appends the
 * sample ids to ids[*count]. */
static void take(const rt_batch_host *b, size_t *ids, size_t *count)
{
    cr_assert_eq((uintptr_t)b->x % 64, 0, "x is 64-byte aligned");
    for (int i = 0; i < b->n; i++) {
        size_t id = (size_t)b->x[(size_t)i * FEAT];
        for (int j = 0; j < FEAT; j++)
            cr_assert_eq(b->x[(size_t)i * FEAT + j], (float)id + 0.5f * (float)j);
        if (b->labels)
            cr_assert_eq((size_t)b->labels[i], id);
        else
            cr_assert(b->targets[2 * i] == -(float)id &&
                      b->targets[2 * i + 1] == 2.0f * (float)id);
        ids[(*count)++] = id;
    }
}

/* One whole epoch's sample ids in order; returns how many. */
static size_t epoch_order(rt_loader *l, int epoch, size_t *ids)
{
    cr_assert_eq(rt_loader_begin(l, epoch), 0);
    size_t count = 0, steps = 0;
    const rt_batch_host *b;
    while ((b = rt_loader_next(l)) != NULL) {
        take(b, ids, &count);
        steps++;
    }
    cr_expect_eq(steps, rt_loader_steps(l));
    cr_expect_null(rt_loader_next(l), "the end of an epoch stays the end");
    return count;
}

static void expect_each_once(const size_t *ids, size_t count, size_t n)
{
    cr_assert_eq(count, n);
    bool *seen = calloc(n ? n : 1, 1);
    cr_assert(seen);
    for (size_t i = 0; i < count; i++) {
        cr_assert(ids[i] < n);
        cr_assert(!seen[ids[i]], "sample %zu seen twice", ids[i]);
        seen[ids[i]] = true;
    }
    free(seen);
}

TD_TEST(loader, every_sample_comes_exactly_once_an_epoch)
{
    rt_dataset ds = make_set(1000, false);
    rt_loader *l = make_loader(&ds, 64, 0, 1, 5, true);
    cr_expect_eq(rt_loader_steps(l), 16);
    size_t *ids = malloc(1000 * sizeof *ids);
    for (int e = 0; e < 3; e++)
        expect_each_once(ids, epoch_order(l, e, ids), 1000);
    rt_loader_destroy(l);
    free(ids);
    rt_dataset_free(&ds);
}

TD_TEST(loader, the_shuffle_depends_on_seed_and_epoch_only)
{
    rt_dataset ds = make_set(500, false);
    rt_loader *a = make_loader(&ds, 32, 0, 1, 9, true);
    rt_loader *b = make_loader(&ds, 100, 0, 1, 9, true); /* another batch size */
    rt_loader *c = make_loader(&ds, 32, 0, 1, 10, true);
    size_t *o[5];
    for (int i = 0; i < 5; i++)
        o[i] = malloc(500 * sizeof(size_t));
    epoch_order(a, 0, o[0]);
    epoch_order(b, 0, o[1]);
    epoch_order(a, 1, o[2]);
    epoch_order(c, 0, o[3]);
    epoch_order(a, 0, o[4]);
    cr_expect_eq(memcmp(o[0], o[1], 500 * sizeof(size_t)), 0, "same (seed, epoch)");
    cr_expect_eq(memcmp(o[0], o[4], 500 * sizeof(size_t)), 0, "epoch 0 again");
    cr_expect_neq(memcmp(o[0], o[2], 500 * sizeof(size_t)), 0, "another epoch");
    cr_expect_neq(memcmp(o[0], o[3], 500 * sizeof(size_t)), 0, "another seed");
    size_t fixed = 0;
    for (size_t i = 0; i < 500; i++)
        fixed += o[0][i] == i;
    cr_expect(fixed < 20, "shuffled: %zu of 500 in place", fixed);
    for (int i = 0; i < 5; i++)
        free(o[i]);
    rt_loader_destroy(a);
    rt_loader_destroy(b);
    rt_loader_destroy(c);
    rt_dataset_free(&ds);
}

TD_TEST(loader, without_shuffle_the_order_is_the_data_sets)
{
    rt_dataset ds = make_set(70, false);
    rt_loader *l = make_loader(&ds, 16, 0, 1, 1, false);
    size_t ids[70];
    for (int e = 0; e < 2; e++) {
        cr_assert_eq(epoch_order(l, e, ids), 70);
        for (size_t i = 0; i < 70; i++)
            cr_expect_eq(ids[i], i);
    }
    rt_loader_destroy(l);
    rt_dataset_free(&ds);
}

/* For W ranks over n samples with global batch B, step by step: each
 * rank's slice has the size the contract gives, and the slices in rank
 * order are the single rank's batch. */
static void check_world(size_t n, int batch, int world, bool regression)
{
    rt_dataset ds = make_set(n, regression);
    rt_loader *one = make_loader(&ds, batch, 0, 1, 77, true);
    rt_loader *r[3];
    for (int k = 0; k < world; k++)
        r[k] = make_loader(&ds, batch, k, world, 77, true);
    size_t *ref = malloc((size_t)batch * sizeof *ref);
    size_t *cat = malloc((size_t)batch * sizeof *cat);
    for (int e = 0; e < 2; e++) {
        cr_assert_eq(rt_loader_begin(one, e), 0);
        for (int k = 0; k < world; k++) {
            cr_assert_eq(rt_loader_begin(r[k], e), 0);
            cr_assert_eq(rt_loader_steps(r[k]), rt_loader_steps(one));
        }
        size_t total = 0;
        for (size_t s = 0; s < rt_loader_steps(one); s++) {
            size_t nref = 0, ncat = 0;
            take(rt_loader_next(one), ref, &nref);
            size_t left = n - s * (size_t)batch;
            size_t want_size = left < (size_t)batch ? left : (size_t)batch;
            cr_assert_eq(nref, want_size);
            for (int k = 0; k < world; k++) {
                const rt_batch_host *b = rt_loader_next(r[k]);
                cr_assert_not_null(b);
                size_t want = nref / world + ((size_t)k < nref % world ? 1 : 0);
                cr_expect_eq((size_t)b->n, want, "W=%d step %zu rank %d: %d samples",
                             world, s, k, b->n);
                take(b, cat, &ncat);
            }
            cr_assert_eq(ncat, nref);
            cr_expect_eq(memcmp(ref, cat, nref * sizeof *ref), 0,
                         "W=%d epoch %d step %zu: slices differ from one rank's batch",
                         world, e, s);
            total += nref;
        }
        cr_expect_eq(total, n);
        cr_expect_null(rt_loader_next(one));
        for (int k = 0; k < world; k++)
            cr_expect_null(rt_loader_next(r[k]));
    }
    free(ref);
    free(cat);
    rt_loader_destroy(one);
    for (int k = 0; k < world; k++)
        rt_loader_destroy(r[k]);
    rt_dataset_free(&ds);
}

TD_TEST(loader, w_ranks_slices_make_up_one_ranks_batch)
{
    /* 103 = 10 * 10 + 3: a short last batch; 10 and 3 not divisible by 3. */
    for (int w = 1; w <= 3; w++)
        check_world(103, 10, w, false);
    check_world(103, 11, 3, false); /* slices of 4, 4, 3 */
    check_world(64, 16, 2, false);  /* everything divides */
}

TD_TEST(loader, w_ranks_slices_carry_regression_targets)
{
    check_world(50, 8, 3, true);
}

TD_TEST(loader, a_global_batch_smaller_than_the_world_gives_empty_slices)
{
    /* 5 samples, batch 2, 3 ranks: steps of 2, 2, 1 samples. */
    rt_dataset ds = make_set(5, false);
    rt_loader *r[3];
    for (int k = 0; k < 3; k++) {
        r[k] = make_loader(&ds, 2, k, 3, 3, true);
        cr_assert_eq(rt_loader_begin(r[k], 0), 0);
        cr_expect_eq(rt_loader_steps(r[k]), 3);
    }
    int want[3][3] = {{1, 1, 0}, {1, 1, 0}, {1, 0, 0}};
    size_t ids[5], count = 0;
    for (int s = 0; s < 3; s++)
        for (int k = 0; k < 3; k++) {
            const rt_batch_host *b = rt_loader_next(r[k]);
            cr_assert_not_null(b, "step %d rank %d", s, k);
            cr_expect_eq(b->n, want[s][k], "step %d rank %d: %d samples", s, k, b->n);
            cr_expect_not_null(b->x);
            take(b, ids, &count);
        }
    expect_each_once(ids, count, 5);
    for (int k = 0; k < 3; k++) {
        cr_expect_null(rt_loader_next(r[k]));
        rt_loader_destroy(r[k]);
    }
    rt_dataset_free(&ds);
}

TD_TEST(loader, a_batch_larger_than_the_set_is_one_step)
{
    rt_dataset ds = make_set(7, false);
    rt_loader *l = make_loader(&ds, 1000, 1, 2, 3, true);
    cr_expect_eq(rt_loader_steps(l), 1);
    cr_assert_eq(rt_loader_begin(l, 0), 0);
    const rt_batch_host *b = rt_loader_next(l);
    cr_assert_not_null(b);
    cr_expect_eq(b->n, 3, "rank 1 of 2 gets the smaller half of 7");
    cr_expect_null(rt_loader_next(l));
    rt_loader_destroy(l);
    rt_dataset_free(&ds);
}

TD_TEST(loader, an_empty_set_has_no_steps)
{
    rt_dataset ds = make_set(0, false);
    rt_loader *l = make_loader(&ds, 8, 0, 1, 3, true);
    cr_expect_eq(rt_loader_steps(l), 0);
    cr_assert_eq(rt_loader_begin(l, 0), 0);
    cr_expect_null(rt_loader_next(l));
    rt_loader_destroy(l);
    rt_dataset_free(&ds);
}

TD_TEST(loader, next_before_begin_is_null)
{
    rt_dataset ds = make_set(10, false);
    rt_loader *l = make_loader(&ds, 4, 0, 1, 3, true);
    cr_expect_null(rt_loader_next(l));
    rt_loader_destroy(l);
    rt_dataset_free(&ds);
}

TD_TEST(loader, begin_again_mid_epoch_starts_the_new_epoch_whole)
{
    rt_dataset ds = make_set(300, false);
    rt_loader *l = make_loader(&ds, 20, 0, 1, 4, true);
    rt_loader *fresh = make_loader(&ds, 20, 0, 1, 4, true);
    size_t want[300], got[300], count = 0;
    epoch_order(fresh, 1, want);

    cr_assert_eq(rt_loader_begin(l, 0), 0);
    for (int i = 0; i < 4; i++) /* part way, with the thread working ahead */
        take(rt_loader_next(l), got, &count);
    cr_assert_eq(rt_loader_begin(l, 1), 0);
    cr_assert_eq(rt_loader_begin(l, 1), 0); /* twice in a row */
    count = 0;
    const rt_batch_host *b;
    while ((b = rt_loader_next(l)) != NULL)
        take(b, got, &count);
    cr_assert_eq(count, 300);
    cr_expect_eq(memcmp(want, got, sizeof want), 0, "the same as a fresh loader's");
    cr_expect_eq(rt_loader_begin(l, -1), FERRY_EINVAL);
    rt_loader_destroy(l);
    rt_loader_destroy(fresh);
    rt_dataset_free(&ds);
}

TD_TEST(loader, the_batch_in_hand_stays_intact_while_the_thread_works_ahead)
{
    rt_dataset ds = make_set(200, false);
    rt_loader *l = make_loader(&ds, 10, 0, 1, 0, false);
    cr_assert_eq(rt_loader_begin(l, 0), 0);
    for (size_t s = 0; s < 20; s++) {
        const rt_batch_host *b = rt_loader_next(l);
        cr_assert_not_null(b);
        usleep(1000); /* room for the thread to fill every slot it may */
        size_t ids[10], count = 0;
        take(b, ids, &count);
        cr_assert_eq(count, 10);
        for (size_t i = 0; i < 10; i++)
            cr_assert_eq(ids[i], s * 10 + i, "step %zu was overwritten", s);
    }
    cr_expect_null(rt_loader_next(l));
    rt_loader_destroy(l);
    rt_dataset_free(&ds);
}

TD_TEST(loader, destroy_stops_the_thread_at_any_point)
{
    rt_dataset ds = make_set(2000, false);
    rt_loader *l = make_loader(&ds, 8, 0, 1, 1, true);
    rt_loader_destroy(l); /* never begun */
    l = make_loader(&ds, 8, 0, 1, 1, true);
    cr_assert_eq(rt_loader_begin(l, 0), 0);
    rt_loader_destroy(l); /* the thread may be shuffling */
    l = make_loader(&ds, 8, 0, 1, 1, true);
    cr_assert_eq(rt_loader_begin(l, 0), 0);
    for (int i = 0; i < 3; i++)
        cr_assert_not_null(rt_loader_next(l));
    rt_loader_destroy(l); /* mid-epoch, the ring full */
    l = make_loader(&ds, 8, 0, 1, 1, true);
    size_t *ids = malloc(2000 * sizeof *ids);
    epoch_order(l, 0, ids);
    rt_loader_destroy(l); /* at the end of an epoch */
    rt_loader_destroy(NULL);
    free(ids);
    rt_dataset_free(&ds);
}

TD_TEST(loader, bad_options_are_einval)
{
    rt_dataset ds = make_set(10, false);
    rt_loader *l = (rt_loader *)&ds;
    rt_loader_opts ok = {.batch = 4, .rank = 0, .world = 1};
    rt_loader_opts o = ok;
    o.batch = 0;
    cr_expect_eq(rt_loader_create(&ds, &o, &l), FERRY_EINVAL);
    cr_expect_null(l);
    o = ok;
    o.world = 0;
    cr_expect_eq(rt_loader_create(&ds, &o, &l), FERRY_EINVAL);
    o = ok;
    o.rank = 1;
    cr_expect_eq(rt_loader_create(&ds, &o, &l), FERRY_EINVAL);
    o = ok;
    o.rank = -1;
    cr_expect_eq(rt_loader_create(&ds, &o, &l), FERRY_EINVAL);
    cr_expect_eq(rt_loader_create(NULL, &ok, &l), FERRY_EINVAL);
    cr_expect_eq(rt_loader_create(&ds, NULL, &l), FERRY_EINVAL);
    cr_expect_eq(rt_loader_create(&ds, &ok, NULL), FERRY_EINVAL);
    rt_dataset none = ds;
    none.labels = NULL;
    cr_expect_eq(rt_loader_create(&none, &ok, &l), FERRY_EINVAL, "no labels nor targets");
    cr_expect_eq(rt_loader_begin(NULL, 0), FERRY_EINVAL);
    cr_expect_null(rt_loader_next(NULL));
    cr_expect_eq(rt_loader_steps(NULL), 0);
    rt_dataset_free(&ds);
}

TD_TEST(loader, batches_of_the_real_training_set_hold_its_rows)
{
    td_need_fmnist();
    rt_dataset ds;
    char err[512] = "";
    cr_assert_eq(rt_fmnist_load(NULL, true, &ds, err, sizeof err), 0, "%s", err);
    const size_t row = 784 * sizeof(float);

    /* In order: batch s is rows [128 s, 128 s + 128) of the set. */
    rt_loader *l = make_loader(&ds, 128, 0, 1, 2024, false);
    cr_expect_eq(rt_loader_steps(l), 469);
    cr_assert_eq(rt_loader_begin(l, 0), 0);
    size_t count = 0;
    const rt_batch_host *b;
    while ((b = rt_loader_next(l)) != NULL) {
        cr_assert_eq((uintptr_t)b->x % 64, 0);
        cr_assert_eq((uintptr_t)b->labels % 64, 0);
        cr_assert_eq(memcmp(b->x, ds.x + count * 784, (size_t)b->n * row), 0,
                     "batch at sample %zu", count);
        cr_assert_eq(memcmp(b->labels, ds.labels + count, (size_t)b->n * 4), 0);
        count += (size_t)b->n;
    }
    cr_expect_eq(count, 60000);
    rt_loader_destroy(l);

    /* Shuffled, on rank 1 of 2: half the set, classes in proportion. */
    l = make_loader(&ds, 128, 1, 2, 2024, true);
    cr_assert_eq(rt_loader_begin(l, 3), 0);
    size_t hist[10] = {0};
    count = 0;
    while ((b = rt_loader_next(l)) != NULL) {
        cr_assert_eq(b->n, count < 59904 / 2 ? 64 : 48);
        for (int i = 0; i < b->n; i++)
            hist[b->labels[i]]++;
        count += (size_t)b->n;
    }
    cr_expect_eq(count, 30000);
    for (int c = 0; c < 10; c++)
        cr_expect(hist[c] > 2700 && hist[c] < 3300, "class %d: %zu", c, hist[c]);
    rt_loader_destroy(l);
    rt_dataset_free(&ds);
}

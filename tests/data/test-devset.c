/* The loader's device side on the cpu device: an index_only loader and a
 * set copied to the device (rt_devset) hand the model exactly the batches
 * the host loader gathers — every epoch's shuffle, every rank's slice, the
 * last short batch — which is what keeps a GPU's training bit-identical
 * with the set held on it. tests/cuda runs the gather kernel and a GPU
 * training both ways. */
#include <stdlib.h>
#include <string.h>

#include "runtime/device/device.h"
#include "tcommon.h"
#include "tdata.h"

enum { FEAT = 5 };

static rt_dataset make_set(size_t n, bool regression)
{
    rt_dataset ds = {.n = n, .features = FEAT, .c = 1, .h = 1, .w = FEAT};
    ds.x = malloc(n * FEAT * sizeof(float));
    cr_assert(ds.x);
    for (size_t i = 0; i < n * FEAT; i++)
        ds.x[i] = (float)i * 0.25f - 3.0f;
    if (regression) {
        ds.outputs = 3;
        ds.targets = malloc(n * 3 * sizeof(float));
        cr_assert(ds.targets);
        for (size_t i = 0; i < n * 3; i++)
            ds.targets[i] = -(float)i;
    } else {
        ds.classes = 7;
        ds.labels = malloc(n * sizeof(int32_t));
        cr_assert(ds.labels);
        for (size_t i = 0; i < n; i++)
            ds.labels[i] = (int32_t)(i * 5 % 7);
    }
    return ds;
}

static rt_loader *loader(const rt_dataset *ds, int batch, int rank, int world,
                         bool shuffle, bool index_only)
{
    rt_loader_opts o = {.batch = batch,
                        .rank = rank,
                        .world = world,
                        .seed = 11,
                        .shuffle = shuffle,
                        .index_only = index_only};
    rt_loader *l = NULL;
    cr_assert_eq(rt_loader_create(ds, &o, &l), 0);
    return l;
}

/* Three epochs of both loaders side by side on `dev`. */
static void agree(ferry_device_t *dev, const rt_dataset *ds, int batch, int rank,
                  int world, bool shuffle)
{
    rt_devset *s = NULL;
    char err[256] = "";
    cr_assert_eq(rt_devset_create(dev, ds, &s, err, sizeof err), 0, "%s", err);
    rt_loader *host = loader(ds, batch, rank, world, shuffle, false);
    rt_loader *idx = loader(ds, batch, rank, world, shuffle, true);
    size_t rows = (size_t)batch, outs = (size_t)(ds->outputs ? ds->outputs : 1);
    float *x = dev->ops->alloc(dev, rows * FEAT * sizeof(float));
    float *t = dev->ops->alloc(dev, rows * outs * sizeof(float));
    int32_t *lab = dev->ops->alloc(dev, rows * sizeof(int32_t));
    float *hx = malloc(rows * FEAT * sizeof(float)), *ht = malloc(rows * outs * sizeof(float));
    int32_t *hl = malloc(rows * sizeof(int32_t));
    cr_assert(x && t && lab && hx && ht && hl);
    for (int e = 0; e < 3; e++) {
        cr_assert_eq(rt_loader_begin(host, e), 0);
        cr_assert_eq(rt_loader_begin(idx, e), 0);
        size_t steps = 0;
        const rt_batch_host *a, *b;
        while ((a = rt_loader_next(host))) {
            b = rt_loader_next(idx);
            cr_assert_not_null(b, "epoch %d: the index_only loader ended early", e);
            cr_assert_eq(b->n, a->n, "epoch %d step %zu", e, steps);
            cr_assert(!b->x && !b->labels && !b->targets, "index_only gathered");
            cr_assert(rt_devset_serves(s, b));
            cr_assert_eq(rt_devset_batch(s, b, x, lab, t), 0);
            size_t n = (size_t)a->n;
            cr_assert_eq(dev->ops->download(dev, hx, x, n * FEAT * sizeof(float)), 0);
            cr_assert_eq(memcmp(hx, a->x, n * FEAT * sizeof(float)), 0,
                         "epoch %d step %zu: samples differ", e, steps);
            if (ds->labels) {
                cr_assert_eq(dev->ops->download(dev, hl, lab, n * sizeof(int32_t)), 0);
                cr_assert_eq(memcmp(hl, a->labels, n * sizeof(int32_t)), 0);
            } else {
                cr_assert_eq(dev->ops->download(dev, ht, t, n * outs * sizeof(float)), 0);
                cr_assert_eq(memcmp(ht, a->targets, n * outs * sizeof(float)), 0);
            }
            steps++;
        }
        cr_assert_null(rt_loader_next(idx));
        cr_assert_eq(steps, rt_loader_steps(host));
    }
    dev->ops->free(dev, x);
    dev->ops->free(dev, t);
    dev->ops->free(dev, lab);
    free(hx);
    free(ht);
    free(hl);
    rt_loader_destroy(host);
    rt_loader_destroy(idx);
    rt_devset_destroy(s);
}

static ferry_device_t *cpu(void)
{
    ferry_device_t *dev = NULL;
    char err[256];
    cr_assert_eq(rt_device_open("cpu", &dev, err, sizeof err), 0, "%s", err);
    return dev;
}

Test(devset, gathers_the_host_loaders_batches_every_epoch_rank_and_short_batch)
{
    ferry_device_t *dev = cpu();
    for (int reg = 0; reg < 2; reg++) {
        rt_dataset ds = make_set(103, reg);
        agree(dev, &ds, 16, 0, 1, true);  /* 7 batches, the last of 7 */
        agree(dev, &ds, 16, 2, 3, true);  /* rank 2 of 3: 5 rows, the last 2 */
        agree(dev, &ds, 200, 0, 1, true); /* one batch, smaller than asked */
        agree(dev, &ds, 32, 1, 2, false); /* evaluation: dataset order */
        rt_dataset_free(&ds);
    }
    rt_device_close(dev);
    tcom_assert_no_leaks();
}

Test(devset, a_global_batch_smaller_than_the_world_gives_empty_slices)
{
    ferry_device_t *dev = cpu();
    rt_dataset ds = make_set(10, false);
    agree(dev, &ds, 3, 3, 4, true); /* rank 3 of 4 gets nothing */
    rt_dataset_free(&ds);
    rt_device_close(dev);
    tcom_assert_no_leaks();
}

Test(devset, batches_from_another_set_or_a_host_loader_are_refused)
{
    ferry_device_t *dev = cpu();
    rt_dataset a = make_set(20, false), b = make_set(20, false);
    rt_devset *s = NULL;
    char err[256] = "";
    cr_assert_eq(rt_devset_create(dev, &a, &s, err, sizeof err), 0, "%s", err);
    rt_loader *other = loader(&b, 4, 0, 1, true, true);
    cr_assert_eq(rt_loader_begin(other, 0), 0);
    const rt_batch_host *hb = rt_loader_next(other);
    cr_assert_not_null(hb);
    cr_assert_not(rt_devset_serves(s, hb));
    float *x = dev->ops->alloc(dev, 4 * FEAT * sizeof(float));
    cr_assert_eq(rt_devset_batch(s, hb, x, NULL, NULL), FERRY_EINVAL);
    /* A made-up batch that runs past the permutation. */
    rt_batch_host bad = *hb;
    bad.set = &a;
    bad.pos = 18;
    bad.n = 4;
    cr_assert_eq(rt_devset_batch(s, &bad, x, NULL, NULL), FERRY_EINVAL);
    rt_dataset empty = {.n = 0, .features = FEAT};
    rt_devset *none = NULL;
    cr_assert_eq(rt_devset_create(dev, &empty, &none, err, sizeof err), FERRY_EINVAL);
    cr_assert_null(none);
    dev->ops->free(dev, x);
    rt_loader_destroy(other);
    rt_devset_destroy(s);
    rt_dataset_free(&a);
    rt_dataset_free(&b);
    rt_device_close(dev);
    tcom_assert_no_leaks();
}

Test(devset, its_size_counts_samples_labels_and_the_permutation)
{
    rt_dataset ds = make_set(10, false);
    cr_assert_eq(rt_devset_bytes(&ds), 10 * FEAT * 4 + 10 * 4 + 10 * 4);
    rt_dataset_free(&ds);
    ds = make_set(10, true);
    cr_assert_eq(rt_devset_bytes(&ds), 10 * FEAT * 4 + 10 * 3 * 4 + 10 * 4);
    rt_dataset_free(&ds);
}

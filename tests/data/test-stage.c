/* tests/data — where a set goes on a device, and the staging path of a set
 * too large to hold there. The choice is a pure function of the set's
 * size, the device's budget (half its free memory, or FERRY_DEVSET_MAX_BYTES)
 * and the trainer's host_batches, checked here without a GPU. The stager
 * runs on the cpu device too, which has no copy queue and so uploads into
 * the stager's lanes: the batches it hands the model are checked against
 * the host loader's, every epoch, rank and short batch. tests/cuda runs it
 * with a GPU's copy queue and trains through it. */
#include <stdlib.h>
#include <string.h>

#include "runtime/device/device.h"
#include "tcommon.h"
#include "tdata.h"

enum { FEAT = 6 };

static rt_dataset make_set(size_t n, bool regression)
{
    rt_dataset ds = {.n = n, .features = FEAT, .c = 1, .h = 1, .w = FEAT};
    ds.x = malloc(n * FEAT * sizeof(float));
    cr_assert(ds.x);
    for (size_t i = 0; i < n * FEAT; i++)
        ds.x[i] = (float)i * 0.5f - 7.0f;
    if (regression) {
        ds.outputs = 2;
        ds.targets = malloc(n * 2 * sizeof(float));
        cr_assert(ds.targets);
        for (size_t i = 0; i < n * 2; i++)
            ds.targets[i] = (float)i * -3.0f;
    } else {
        ds.classes = 9;
        ds.labels = malloc(n * sizeof(int32_t));
        cr_assert(ds.labels);
        for (size_t i = 0; i < n; i++)
            ds.labels[i] = (int32_t)(i * 4 % 9);
    }
    return ds;
}

static ferry_device_t *cpu(void)
{
    ferry_device_t *dev = NULL;
    char err[256];
    cr_assert_eq(rt_device_open("cpu", &dev, err, sizeof err), 0, "%s", err);
    return dev;
}

/* ---- the choice ---------------------------------------------------------- */

Test(data_place, the_cpu_reads_in_place_whatever_the_sizes)
{
    cr_assert_eq(rt_data_place_choose(FERRY_DEVICE_CPU, false, 10, 100),
                 RT_DATA_IN_PLACE);
    cr_assert_eq(rt_data_place_choose(FERRY_DEVICE_CPU, false, 1000, 100),
                 RT_DATA_IN_PLACE);
    cr_assert_eq(rt_data_place_choose(FERRY_DEVICE_CPU, true, 10, 100), RT_DATA_IN_PLACE);
}

Test(data_place, a_gpu_holds_a_set_within_the_budget_and_stages_a_larger_one)
{
    cr_assert_eq(rt_data_place_choose(FERRY_DEVICE_CUDA, false, 100, 100),
                 RT_DATA_ON_DEVICE);
    cr_assert_eq(rt_data_place_choose(FERRY_DEVICE_CUDA, false, 0, 0), RT_DATA_ON_DEVICE);
    cr_assert_eq(rt_data_place_choose(FERRY_DEVICE_CUDA, false, 101, 100),
                 RT_DATA_STAGED);
    cr_assert_eq(rt_data_place_choose(FERRY_DEVICE_CUDA, false, 1, 0), RT_DATA_STAGED);
    /* Fashion-MNIST (~190 MB) on an 80 GB GPU, and on a 256 MB one. */
    size_t fm = 60000ul * (784 + 2) * 4, b = 0;
    cr_assert_eq(rt_devset_budget(80ul << 30, NULL, &b), 0);
    cr_assert_eq(rt_data_place_choose(FERRY_DEVICE_CUDA, false, fm, b),
                 RT_DATA_ON_DEVICE);
    cr_assert_eq(rt_devset_budget(256ul << 20, NULL, &b), 0);
    cr_assert_eq(rt_data_place_choose(FERRY_DEVICE_CUDA, false, fm, b), RT_DATA_STAGED);
}

Test(data_place, host_batches_upload_on_a_gpu)
{
    cr_assert_eq(rt_data_place_choose(FERRY_DEVICE_CUDA, true, 1, 100), RT_DATA_UPLOADED);
    cr_assert_eq(rt_data_place_choose(FERRY_DEVICE_CUDA, true, 1000, 100),
                 RT_DATA_UPLOADED);
    cr_assert_str_eq(rt_data_place_name(RT_DATA_STAGED), "staged");
    cr_assert_str_eq(rt_data_place_name(RT_DATA_ON_DEVICE), "on the device");
}

Test(data_place, the_budget_is_half_the_free_memory_or_the_limit_given)
{
    size_t b = 1;
    cr_assert_eq(rt_devset_budget(1000, NULL, &b), 0);
    cr_assert_eq(b, 500);
    cr_assert_eq(rt_devset_budget(1001, "", &b), 0);
    cr_assert_eq(b, 500);
    cr_assert_eq(rt_devset_budget(1000, "0", &b), 0);
    cr_assert_eq(b, 0);
    cr_assert_eq(rt_devset_budget(1000, "123456", &b), 0);
    cr_assert_eq(b, 123456);
    cr_assert_eq(rt_devset_budget(0, "3k", &b), 0);
    cr_assert_eq(b, 3072);
    cr_assert_eq(rt_devset_budget(0, "5K", &b), 0);
    cr_assert_eq(b, 5120);
    cr_assert_eq(rt_devset_budget(0, "7M", &b), 0);
    cr_assert_eq(b, 7ul << 20);
    cr_assert_eq(rt_devset_budget(0, "2G", &b), 0);
    cr_assert_eq(b, 2ul << 30);
}

Test(data_place, a_limit_that_is_not_a_size_is_refused)
{
    const char *bad[] = {"-1",          "x",  "12q", "1MB",
                         "1.5G",        " 5", "k",   "99999999999999999999",
                         "17179869184G"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        size_t b = 42;
        cr_assert_eq(rt_devset_budget(1000, bad[i], &b), FERRY_EINVAL, "'%s'", bad[i]);
        cr_assert_eq(b, 42, "'%s' changed the budget", bad[i]);
    }
}

Test(data_place, the_environment_limit_reaches_devset_create)
{
    ferry_device_t *dev = cpu();
    rt_dataset ds = make_set(10, false);
    rt_devset *s = NULL;
    char err[256] = "";
    /* Criterion forks each test: the variable stays in this one. */
    setenv(RT_DEVSET_LIMIT_ENV, "100", 1);
    cr_assert_eq(rt_devset_create(dev, &ds, &s, err, sizeof err), FERRY_ENOSPC);
    cr_assert_null(s);
    cr_assert(strstr(err, RT_DEVSET_LIMIT_ENV), "the limit's source unnamed: %s", err);
    setenv(RT_DEVSET_LIMIT_ENV, "lots", 1);
    cr_assert_eq(rt_devset_create(dev, &ds, &s, err, sizeof err), FERRY_EINVAL);
    cr_assert(strstr(err, "lots"), "%s", err);
    rt_data_place p;
    cr_assert_eq(rt_data_place_for(dev, &ds, false, &p, err, sizeof err), 0);
    cr_assert_eq(p, RT_DATA_IN_PLACE);
    setenv(RT_DEVSET_LIMIT_ENV, "1k", 1);
    cr_assert_eq(rt_devset_create(dev, &ds, &s, err, sizeof err), 0, "%s", err);
    rt_devset_destroy(s);
    unsetenv(RT_DEVSET_LIMIT_ENV);
    rt_dataset_free(&ds);
    rt_device_close(dev);
    tcom_assert_no_leaks();
}

/* ---- the loader's allocator ------------------------------------------------- */

typedef struct counting {
    int allocs, frees;
} counting;

static void *count_alloc(void *arg, size_t bytes)
{
    ((counting *)arg)->allocs++;
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

static void count_free(void *arg, void *p)
{
    ((counting *)arg)->frees++;
    free(p);
}

Test(data_place, a_loader_gathers_into_the_memory_its_allocator_gives)
{
    for (int reg = 0; reg < 2; reg++) {
        rt_dataset ds = make_set(20, reg);
        counting c = {0};
        rt_loader_opts o = {.batch = 8,
                            .world = 1,
                            .seed = 1,
                            .host_alloc = count_alloc,
                            .host_free = count_free,
                            .host_arg = &c};
        rt_loader *l = NULL;
        cr_assert_eq(rt_loader_create(&ds, &o, &l), 0);
        /* Three slots of samples and labels (or targets). */
        cr_assert_eq(c.allocs, 6);
        cr_assert_eq(rt_loader_begin(l, 0), 0);
        cr_assert_not_null(rt_loader_next(l));
        rt_loader_destroy(l);
        cr_assert_eq(c.frees, 6);
        /* One without the other is a mistake. */
        o.host_free = NULL;
        l = (rt_loader *)1;
        cr_assert_eq(rt_loader_create(&ds, &o, &l), FERRY_EINVAL);
        cr_assert_null(l);
        rt_dataset_free(&ds);
    }
}

/* ---- the stager on the cpu ------------------------------------------------- */

static rt_loader *loader(const rt_dataset *ds, int batch, int rank, int world,
                         rt_stager *s)
{
    rt_loader_opts o = {
        .batch = batch, .rank = rank, .world = world, .seed = 5, .shuffle = true};
    if (s)
        rt_stager_loader_opts(s, &o);
    rt_loader *l = NULL;
    cr_assert_eq(rt_loader_create(ds, &o, &l), 0);
    return l;
}

/* Three epochs of a plain loader and a staged one side by side: each staged
 * batch, read back from the device, is the plain loader's; the lanes
 * alternate and a batch stays put until the call after next. */
static void agree(ferry_device_t *dev, const rt_dataset *ds, int batch, int rank,
                  int world)
{
    int rows = (batch + world - 1) / world;
    rt_stager *s = NULL;
    char err[256] = "";
    cr_assert_eq(rt_stager_create(dev, ds, rows, &s, err, sizeof err), 0, "%s", err);
    cr_assert_not(rt_stager_async(s), "the cpu has no copy queue");
    rt_loader *plain = loader(ds, batch, rank, world, NULL);
    rt_loader *staged = loader(ds, batch, rank, world, s);
    size_t outs = ds->labels ? 1 : (size_t)ds->outputs;
    float *hx = malloc((size_t)rows * FEAT * sizeof(float)),
          *ht = malloc((size_t)rows * outs * sizeof(float));
    float *prev_x = NULL, *prev_copy = malloc((size_t)rows * FEAT * sizeof(float));
    int prev_n = 0;
    cr_assert(hx && ht && prev_copy);
    for (int e = 0; e < 3; e++) {
        cr_assert_eq(rt_loader_begin(plain, e), 0);
        cr_assert_eq(rt_loader_begin(staged, e), 0);
        const rt_batch_host *a, *h;
        size_t step = 0;
        while ((a = rt_loader_next(plain))) {
            h = rt_loader_next(staged);
            cr_assert_not_null(h);
            ferry_batch_t b;
            cr_assert_eq(rt_stager_batch(s, h, &b), 0);
            cr_assert_eq(b.n, a->n);
            cr_assert_neq((void *)b.x, (void *)prev_x, "two batches in one lane");
            size_t n = (size_t)a->n;
            cr_assert_eq(dev->ops->download(dev, hx, b.x, n * FEAT * sizeof(float)), 0);
            cr_assert_eq(memcmp(hx, a->x, n * FEAT * sizeof(float)), 0,
                         "epoch %d step %zu: samples differ", e, step);
            if (ds->labels) {
                cr_assert_null(b.targets);
                cr_assert_eq(dev->ops->download(dev, ht, b.labels, n * sizeof(int32_t)),
                             0);
                cr_assert_eq(memcmp(ht, a->labels, n * sizeof(int32_t)), 0);
            } else {
                cr_assert_null(b.labels);
                cr_assert_eq(dev->ops->download(dev, ht, b.targets, n * outs * 4), 0);
                cr_assert_eq(memcmp(ht, a->targets, n * outs * 4), 0);
            }
            /* The previous batch is still there. */
            if (prev_x)
                cr_assert_eq(memcmp(prev_x, prev_copy, (size_t)prev_n * FEAT * 4), 0);
            memcpy(prev_copy, hx, n * FEAT * sizeof(float));
            prev_x = (float *)b.x;
            prev_n = a->n;
            step++;
        }
        cr_assert_null(rt_loader_next(staged));
    }
    free(hx);
    free(ht);
    free(prev_copy);
    rt_loader_destroy(plain);
    rt_loader_destroy(staged);
    rt_stager_destroy(s);
}

Test(stager, hands_the_model_the_host_loaders_batches_every_epoch_rank_and_short_batch)
{
    ferry_device_t *dev = cpu();
    for (int reg = 0; reg < 2; reg++) {
        rt_dataset ds = make_set(101, reg);
        agree(dev, &ds, 16, 0, 1);  /* 7 batches, the last of 5 */
        agree(dev, &ds, 16, 1, 3);  /* rank 1 of 3 */
        agree(dev, &ds, 300, 0, 1); /* one batch */
        agree(dev, &ds, 3, 3, 4);   /* rank 3 of 4: empty slices */
        rt_dataset_free(&ds);
    }
    rt_device_close(dev);
    tcom_assert_no_leaks();
}

Test(stager, refuses_a_batch_larger_than_its_lanes_or_of_another_shape)
{
    ferry_device_t *dev = cpu();
    rt_dataset ds = make_set(40, false), reg = make_set(40, true);
    rt_stager *s = NULL;
    char err[256] = "";
    cr_assert_eq(rt_stager_create(dev, &ds, 8, &s, err, sizeof err), 0, "%s", err);
    rt_loader *big = loader(&ds, 16, 0, 1, s);
    cr_assert_eq(rt_loader_begin(big, 0), 0);
    const rt_batch_host *h = rt_loader_next(big);
    ferry_batch_t b;
    cr_assert_eq(rt_stager_batch(s, h, &b), FERRY_EINVAL);
    rt_loader *other = loader(&reg, 4, 0, 1, s);
    cr_assert_eq(rt_loader_begin(other, 0), 0);
    cr_assert_eq(rt_stager_batch(s, rt_loader_next(other), &b), FERRY_EINVAL,
                 "targets staged into a labels stager");
    rt_loader_destroy(big);
    rt_loader_destroy(other);
    rt_stager_destroy(s);
    rt_stager *none = (rt_stager *)1;
    cr_assert_eq(rt_stager_create(dev, &ds, 0, &none, err, sizeof err), FERRY_EINVAL);
    cr_assert_null(none);
    rt_stager_destroy(NULL);
    rt_dataset_free(&ds);
    rt_dataset_free(&reg);
    rt_device_close(dev);
    tcom_assert_no_leaks();
}

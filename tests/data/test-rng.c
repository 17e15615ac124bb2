/* tests/data — the seeded generator the shuffles and the linear set draw
 * from: reproducible by (seed, stream), bounded draws in range and even,
 * normals with unit variance, and the loader's shuffle unbiased. Every
 * count below comes from a fixed seed: the bounds are wide (4+ standard
 * deviations) and the results never change from run to run. */
#include <math.h>
#include <string.h>

#include "runtime/data/data_int.h"
#include "tdata.h"

TD_TEST(rng, a_seed_and_stream_fix_the_sequence)
{
    rt_rng a, b, c, d;
    rt_rng_seed(&a, 1, 0);
    rt_rng_seed(&b, 1, 0);
    rt_rng_seed(&c, 1, 1);
    rt_rng_seed(&d, 2, 0);
    int same_c = 0, same_d = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = rt_rng_next(&a);
        cr_assert_eq(x, rt_rng_next(&b));
        same_c += x == rt_rng_next(&c);
        same_d += x == rt_rng_next(&d);
    }
    cr_expect_eq(same_c, 0, "another stream is another sequence");
    cr_expect_eq(same_d, 0, "another seed is another sequence");
}

TD_TEST(rng, bounded_draws_stay_in_range_and_are_even)
{
    rt_rng r;
    rt_rng_seed(&r, 99, 0);
    cr_expect_eq(rt_rng_below(&r, 0), 0);
    cr_expect_eq(rt_rng_below(&r, 1), 0);
    uint64_t big = (UINT64_C(1) << 63) + 1;
    for (int i = 0; i < 1000; i++)
        cr_assert_lt(rt_rng_below(&r, big), big);
    size_t count[6] = {0};
    for (int i = 0; i < 60000; i++) {
        uint64_t v = rt_rng_below(&r, 6);
        cr_assert_lt(v, 6);
        count[v]++;
    }
    for (int k = 0; k < 6; k++)
        cr_expect(count[k] > 9600 && count[k] < 10400, "%d drawn %zu times", k, count[k]);
    for (int i = 0; i < 1000; i++) {
        double u = rt_rng_uniform(&r);
        cr_assert(u > 0 && u <= 1, "uniform %g", u);
    }
}

TD_TEST(rng, normals_have_zero_mean_and_unit_variance)
{
    rt_rng r;
    rt_rng_seed(&r, 5, 0);
    double s = 0, s2 = 0;
    int n = 100000;
    for (int i = 0; i < n; i++) {
        double x = rt_rng_normal(&r);
        s += x;
        s2 += x * x;
    }
    double mean = s / n, var = s2 / n - mean * mean;
    cr_expect(fabs(mean) < 0.015, "mean %f", mean);
    cr_expect(fabs(var - 1) < 0.03, "variance %f", var);
}

TD_TEST(rng, the_loaders_shuffle_puts_each_sample_anywhere_evenly)
{
    /* 5 samples, 3,000 epochs: each sample lands at each position about
     * 600 times (sd ~22) if the Fisher-Yates shuffle is unbiased. */
    rt_dataset ds = {.n = 5, .features = 1, .c = 1, .h = 1, .w = 1, .classes = 5};
    float x[5] = {0, 1, 2, 3, 4};
    int32_t labels[5] = {0, 1, 2, 3, 4};
    ds.x = x;
    ds.labels = labels;
    rt_loader_opts o = {.batch = 5, .world = 1, .seed = 31, .shuffle = true};
    rt_loader *l;
    cr_assert_eq(rt_loader_create(&ds, &o, &l), 0);
    size_t at[5][5] = {{0}};
    for (int e = 0; e < 3000; e++) {
        cr_assert_eq(rt_loader_begin(l, e), 0);
        const rt_batch_host *b = rt_loader_next(l);
        cr_assert(b && b->n == 5);
        for (int p = 0; p < 5; p++)
            at[b->labels[p]][p]++;
    }
    rt_loader_destroy(l);
    for (int s = 0; s < 5; s++)
        for (int p = 0; p < 5; p++)
            cr_expect(at[s][p] > 500 && at[s][p] < 700, "sample %d at %d: %zu times", s,
                      p, at[s][p]);
}

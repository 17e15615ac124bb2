/* The models' initial parameters: PyTorch's default for its layers
 * (uniform within 1/sqrt(fan_in), weights and biases alike), drawn from the
 * context's seeded generator, so a seed gives the same bits every time,
 * and untrained classifiers that are no better than chance. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "tcommon.h"
#include "tmodels.h"

static const char *const models[] = {"mlp", "cnn", "linreg"};

Test(models_init, the_same_seed_gives_bit_identical_parameters_and_another_does_not)
{
    for (size_t k = 0; k < sizeof models / sizeof *models; k++) {
        tmodel a, b, c;
        tm_open(&a, models[k], 1, 42);
        tm_open(&b, models[k], 8, 42);
        tm_open(&c, models[k], 1, 43);
        float *pa = tm_init(&a), *pb = tm_init(&b), *pc = tm_init(&c);
        cr_expect(memcmp(pa, pb, a.len * sizeof *pa) == 0,
                  "%s: seed 42 twice gives different parameters", models[k]);
        size_t same = 0;
        for (size_t j = 0; j < a.len; j++)
            same += pa[j] == pc[j] && pa[j] != 0.0f;
        cr_expect_lt(same, a.len / 100 + 1, "%s: seeds 42 and 43 share %zu of %zu values",
                     models[k], same, a.len);
        free(pa);
        free(pb);
        free(pc);
        tm_close(&a);
        tm_close(&b);
        tm_close(&c);
    }
    tcom_assert_no_leaks();
}

/* A layer's fan-in from its weight's shape: [in][out] for a dense layer,
 * [out][in][kh][kw] for a convolution. A bias has its weight's. */
static int fan_in(const ferry_param_t *p)
{
    if (p->shape[2] > 0)
        return p->shape[1] * p->shape[2] * (p->shape[3] > 0 ? p->shape[3] : 1);
    return p->shape[0];
}

Test(models_init, parameters_are_uniform_within_one_over_root_fan_in)
{
    for (size_t k = 0; k < sizeof models / sizeof *models; k++) {
        tmodel t;
        tm_open(&t, models[k], 1, 1);
        float *p = tm_init(&t);
        int fan = 0;
        for (int i = 0; i < t.nparams; i++) {
            const ferry_param_t *pp = &t.m->params[i];
            if (pp->shape[1] > 0)
                fan = fan_in(pp);
            cr_assert_gt(fan, 0, "%s: %s comes before any weight", models[k], pp->name);
            double bound = 1.0 / sqrt(fan), top = 0, sum2 = 0;
            size_t n = tm_count(&t, i);
            for (size_t j = 0; j < n; j++) {
                double v = p[t.off[i] + j];
                cr_assert(fabs(v) <= bound * (1 + 1e-6), "%s: %s[%zu] = %g beyond %g",
                          models[k], pp->name, j, v, bound);
                top = fmax(top, fabs(v));
                sum2 += v * v;
            }
            if (n >= 1000) {
                /* uniform(-b, b): variance b^2 / 3, extremes near b. */
                double var = sum2 / n, want = bound * bound / 3;
                cr_expect(fabs(var - want) < 0.1 * want,
                          "%s: %s has variance %g, uniform within %g has %g", models[k],
                          pp->name, var, bound, want);
                cr_expect_gt(top, 0.99 * bound, "%s: %s", models[k], pp->name);
            }
            /* The padding up to the next tensor stays as the runtime left it. */
            size_t end = i + 1 < t.nparams ? t.off[i + 1] : t.len;
            for (size_t j = t.off[i] + n; j < end; j++)
                cr_assert_eq(p[j], 0.0f, "%s: padding after %s written", models[k],
                             pp->name);
        }
        free(p);
        tm_close(&t);
    }
    tcom_assert_no_leaks();
}

/* Untrained, a classifier of ten classes is as unsure as it can be: its
 * loss on random labels is near ln 10, whatever the seed. */
static void initial_loss(const char *name)
{
    enum { N = 64 };
    for (uint64_t seed = 1; seed <= 3; seed++) {
        tmodel t;
        tm_open(&t, name, N, seed);
        float *p = tm_init(&t);
        uint64_t s = seed * 1000;
        float *x = malloc((size_t)N * t.features * sizeof *x);
        int32_t labels[N];
        cr_assert(x);
        tm_normal(x, (size_t)N * t.features, &s);
        tm_labels(labels, N, t.m->outputs, &s);
        ferry_batch_t b;
        tm_batch(&t, N, x, labels, NULL, &b);
        float loss;
        cr_assert_eq(tm_loss_grad(&t, p, &b, NULL, &loss), 0);
        cr_expect(fabs(loss - log(10.0)) < 0.15,
                  "%s seed %d: initial loss %g, ln 10 is %g", name, (int)seed, loss,
                  log(10.0));
        free(x);
        free(p);
        tm_close(&t);
    }
    tcom_assert_no_leaks();
}

Test(models_init, mlp_starts_near_ln_10)
{
    initial_loss("mlp");
}

Test(models_init, cnn_starts_near_ln_10)
{
    initial_loss("cnn");
}

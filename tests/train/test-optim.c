/* rt_optim: the runtime's optimizers over a flat buffer, against the
 * formulas PyTorch documents, step by step. */
#include <math.h>

#include <criterion/criterion.h>

#include "runtime/device/device.h"
#include "runtime/train/train.h"
#include "tcommon.h"

#define N 37 /* not a multiple of a vector width */

static ferry_device_t *cpu(void)
{
    ferry_device_t *dev;
    char err[256];
    cr_assert_eq(rt_device_open("cpu", &dev, err, sizeof err), 0, "%s", err);
    return dev;
}

static void fill(float *p, float *g, int step)
{
    for (int i = 0; i < N; i++) {
        p[i] = (float)(i - 18) * 0.1f;
        g[i] = (float)sin(i * 0.7 + step) * 0.5f;
    }
}

Test(optim, sgd_with_momentum_and_weight_decay_follows_pytorchs_update)
{
    ferry_device_t *dev = cpu();
    rt_optim_opts o = {
        .kind = RT_OPT_SGD, .lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f};
    rt_optim *opt;
    cr_assert_eq(rt_optim_create(dev, &o, N, &opt), 0);
    float p[N], g[N], dummy[N];
    double want[N], v[N] = {0};
    fill(p, g, 0);
    for (int i = 0; i < N; i++)
        want[i] = p[i];
    for (int step = 0; step < 5; step++) {
        fill(dummy, g, step);
        rt_optim_step(opt, p, g);
        for (int i = 0; i < N; i++) {
            double gi = g[i] + 0.01 * want[i];
            v[i] = 0.9 * v[i] + gi;
            want[i] -= 0.1 * v[i];
            cr_assert_float_eq(p[i], want[i], 1e-5, "step %d element %d", step, i);
        }
    }
    rt_optim_destroy(opt);
    rt_device_close(dev);
    tcom_assert_no_leaks();
}

Test(optim, plain_sgd_needs_no_momentum_buffer)
{
    ferry_device_t *dev = cpu();
    rt_optim_opts o = {.kind = RT_OPT_SGD, .lr = 0.5f};
    rt_optim *opt;
    cr_assert_eq(rt_optim_create(dev, &o, N, &opt), 0);
    float p[N], g[N], before[N];
    fill(p, g, 3);
    for (int i = 0; i < N; i++)
        before[i] = p[i];
    rt_optim_step(opt, p, g);
    for (int i = 0; i < N; i++)
        cr_assert_float_eq(p[i], before[i] - 0.5f * g[i], 1e-6);
    rt_optim_destroy(opt);
    rt_device_close(dev);
    tcom_assert_no_leaks();
}

Test(optim, adam_corrects_its_moments_for_bias_at_every_step)
{
    ferry_device_t *dev = cpu();
    rt_optim_opts o = {.kind = RT_OPT_ADAM};
    rt_optim_defaults(&o);
    cr_assert_float_eq(o.lr, 0.001f, 1e-9);
    cr_assert_float_eq(o.beta2, 0.999f, 1e-9);
    rt_optim *opt;
    cr_assert_eq(rt_optim_create(dev, &o, N, &opt), 0);
    float p[N], g[N];
    double m[N] = {0}, v[N] = {0}, want[N];
    fill(p, g, 0);
    for (int i = 0; i < N; i++)
        want[i] = p[i];
    for (int t = 1; t <= 4; t++) {
        float dummy[N];
        fill(dummy, g, t);
        rt_optim_step(opt, p, g);
        for (int i = 0; i < N; i++) {
            m[i] = 0.9 * m[i] + 0.1 * g[i];
            v[i] = 0.999 * v[i] + 0.001 * (double)g[i] * g[i];
            double mh = m[i] / (1 - pow(0.9, t)), vh = v[i] / (1 - pow(0.999, t));
            want[i] -= 0.001 * mh / (sqrt(vh) + 1e-8);
            cr_assert_float_eq(p[i], want[i], 1e-5, "step %d element %d", t, i);
        }
    }
    rt_optim_destroy(opt);
    rt_device_close(dev);
    tcom_assert_no_leaks();
}

Test(optim, names_parse_and_an_unknown_kind_is_refused)
{
    cr_assert_eq(rt_optim_parse("sgd"), RT_OPT_SGD);
    cr_assert_eq(rt_optim_parse("adam"), RT_OPT_ADAM);
    cr_assert_eq(rt_optim_parse("lbfgs"), 0);
    cr_assert_str_eq(rt_optim_name(RT_OPT_ADAM), "adam");
    ferry_device_t *dev = cpu();
    rt_optim_opts o = {.kind = 7, .lr = 1};
    rt_optim *opt;
    cr_assert_eq(rt_optim_create(dev, &o, N, &opt), FERRY_EINVAL);
    cr_assert_null(opt);
    rt_device_close(dev);
}

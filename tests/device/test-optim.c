/* Optimizer steps against the header's formulas (PyTorch's SGD and Adam)
 * evaluated in double over several steps with fresh gradients each. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tdevice.h"

#define N     1001
#define STEPS 5

static void run_sgd(float lr, float mu, float wd, bool with_v)
{
    uint64_t seed = 123;
    double *p = td_new(N), *v = td_new(N), *g = td_new(N), *got = td_new(N);
    td_rand(p, N, -1, 1, &seed);
    float *dp = td_put(p, N), *dv = with_v ? td_zeros(N) : NULL, *dg = td_zeros(N);
    for (int i = 0; i < N; i++)
        p[i] = (float)p[i];
    for (int t = 1; t <= STEPS; t++) {
        td_rand(g, N, -1, 1, &seed);
        D->ops->free(D, dg);
        dg = td_put(g, N);
        D->ops->sgd_step(D, dp, dg, dv, N, lr, mu, wd);
        for (int i = 0; i < N; i++) {
            double gi = (float)g[i] + (double)wd * p[i];
            v[i] = mu == 0 ? gi : (double)mu * v[i] + gi;
            p[i] -= (double)lr * v[i];
        }
    }
    char what[96];
    snprintf(what, sizeof what, "sgd lr %g mu %g wd %g: p", lr, mu, wd);
    td_get(got, dp, N);
    td_close(got, p, N, 1e-5, what);
    if (with_v) {
        snprintf(what, sizeof what, "sgd lr %g mu %g wd %g: v", lr, mu, wd);
        td_get(got, dv, N);
        td_close(got, v, N, 1e-5, what);
    }
    free(p);
    free(v);
    free(g);
    free(got);
}

Test(optim, sgd_steps_follow_the_formula_with_and_without_momentum_and_decay)
{
    td_open();
    run_sgd(0.1f, 0.f, 0.f, false);
    run_sgd(0.05f, 0.f, 1e-2f, false);
    run_sgd(0.05f, 0.9f, 0.f, true);
    run_sgd(0.05f, 0.9f, 5e-3f, true);
    td_finish();
}

static void run_adam(float lr, float b1, float b2, float eps, float wd)
{
    uint64_t seed = 321;
    double *p = td_new(N), *m = td_new(N), *v = td_new(N), *g = td_new(N);
    double *got = td_new(N);
    td_rand(p, N, -1, 1, &seed);
    float *dp = td_put(p, N), *dm = td_zeros(N), *dv = td_zeros(N);
    for (int i = 0; i < N; i++)
        p[i] = (float)p[i];
    for (int t = 1; t <= STEPS; t++) {
        td_rand(g, N, -1, 1, &seed);
        float *dg = td_put(g, N);
        D->ops->adam_step(D, dp, dg, dm, dv, N, lr, b1, b2, eps, wd, t);
        D->ops->free(D, dg);
        for (int i = 0; i < N; i++) {
            double gi = (float)g[i] + (double)wd * p[i];
            m[i] = b1 * m[i] + (1 - (double)b1) * gi;
            v[i] = b2 * v[i] + (1 - (double)b2) * gi * gi;
            double mh = m[i] / (1 - pow(b1, t)), vh = v[i] / (1 - pow(b2, t));
            p[i] -= lr * mh / (sqrt(vh) + eps);
        }
    }
    char what[96];
    snprintf(what, sizeof what, "adam lr %g wd %g: p", lr, wd);
    td_get(got, dp, N);
    td_close(got, p, N, 1e-5, what);
    snprintf(what, sizeof what, "adam lr %g wd %g: m", lr, wd);
    td_get(got, dm, N);
    td_close(got, m, N, 1e-5, what);
    snprintf(what, sizeof what, "adam lr %g wd %g: v", lr, wd);
    td_get(got, dv, N);
    td_close(got, v, N, 1e-5, what);
    free(p);
    free(m);
    free(v);
    free(g);
    free(got);
}

Test(optim, adam_steps_follow_the_formula_with_bias_correction_and_decay)
{
    td_open();
    run_adam(1e-3f, 0.9f, 0.999f, 1e-8f, 0.f);
    run_adam(1e-2f, 0.8f, 0.99f, 1e-6f, 1e-2f);
    td_finish();
}

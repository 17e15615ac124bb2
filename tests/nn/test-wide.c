/* The cpu device's per-step loops (the optimizer's, the bias and ReLU
 * passes) run eight floats at a time where the CPU has AVX2: the same
 * bits as the plain loop must come out, NaN and negative zero included,
 * over lengths that leave a tail after the last full vector. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device/device.h"

#define ROWS 13
#define COLS 77 /* not a multiple of 8 or 4 */
#define N    (ROWS * COLS)

static ferry_device_t *dev;

static void open_cpu(void)
{
    char err[256];
    cr_assert_eq(rt_device_open("cpu", &dev, err, sizeof err), 0, "%s", err);
}

static void close_cpu(void)
{
    rt_device_close(dev);
}

/* Values of either sign and many magnitudes, with the ones a vector path
 * could get wrong: zeros of both signs, NaN, infinities, subnormals. */
static void fill(float *x, size_t n, uint64_t seed)
{
    static const float odd[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 1e-40f, -1e-40f};
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        if ((seed >> 60) == 0) {
            x[i] = odd[(seed >> 32) % (sizeof odd / sizeof odd[0])];
            continue;
        }
        double u = (double)(seed >> 11) / 9007199254740992.0 - 0.5;
        x[i] = (float)(u * pow(10.0, (double)((seed >> 8) % 7) - 3.0));
    }
}

static void same_bits(const float *got, const float *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        cr_assert(memcmp(&got[i], &want[i], sizeof(float)) == 0,
                  "%s: element %zu is %a, the plain loop gives %a", what, i,
                  (double)got[i], (double)want[i]);
}

Test(cpu_wide, the_sgd_step_gives_the_plain_loops_bits, .init = open_cpu,
     .fini = close_cpu)
{
    static float p[N], g[N], v[N], wp[N], wv[N];
    const float lr = 0.05f, wd = 1e-4f;
    for (int with_mu = 0; with_mu < 2; with_mu++) {
        const float mu = with_mu ? 0.9f : 0.0f;
        fill(p, N, 1), fill(g, N, 2), fill(v, N, 3);
        memcpy(wp, p, sizeof p), memcpy(wv, v, sizeof v);
        dev->ops->sgd_step(dev, p, g, v, N, lr, mu, wd);
        for (size_t i = 0; i < N; i++) {
            if (!with_mu) {
                wp[i] -= lr * (g[i] + wd * wp[i]);
                continue;
            }
            const float vi = mu * wv[i] + (g[i] + wd * wp[i]);
            wv[i] = vi;
            wp[i] -= lr * vi;
        }
        same_bits(p, wp, N, with_mu ? "sgd with momentum: p" : "sgd: p");
        same_bits(v, wv, N, "sgd with momentum: v");
    }
}

Test(cpu_wide, the_bias_passes_give_the_plain_loops_bits, .init = open_cpu,
     .fini = close_cpu)
{
    static float y[N], want[N], dy[N], b[COLS], db[COLS], wdb[COLS];
    fill(b, COLS, 4);
    fill(y, N, 5);
    memcpy(want, y, sizeof y);
    dev->ops->bias_add(dev, y, b, ROWS, COLS);
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < COLS; j++)
            want[i * COLS + j] += b[j];
    same_bits(y, want, N, "bias_add");

    fill(y, N, 6);
    memcpy(want, y, sizeof y);
    dev->ops->bias_relu(dev, y, b, ROWS, COLS);
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < COLS; j++) {
            float s = want[i * COLS + j] + b[j];
            want[i * COLS + j] = s <= 0.f ? 0.f : s;
        }
    same_bits(y, want, N, "bias_relu");

    fill(dy, N, 7);
    dev->ops->bias_grad(dev, db, dy, ROWS, COLS);
    for (int j = 0; j < COLS; j++)
        wdb[j] = 0.f;
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < COLS; j++)
            wdb[j] += dy[i * COLS + j];
    same_bits(db, wdb, COLS, "bias_grad");
}

Test(cpu_wide, relu_and_its_gradient_give_the_plain_loops_bits, .init = open_cpu,
     .fini = close_cpu)
{
    static float x[N], y[N], dy[N], dx[N], want[N];
    fill(x, N, 8);
    dev->ops->relu(dev, y, x, N);
    for (size_t i = 0; i < N; i++)
        want[i] = x[i] <= 0.f ? 0.f : x[i];
    same_bits(y, want, N, "relu");
    memcpy(y, x, sizeof x);
    dev->ops->relu(dev, y, y, N); /* in place */
    same_bits(y, want, N, "relu in place");

    fill(dy, N, 9);
    dev->ops->relu_grad(dev, dx, dy, want, N);
    float wdx[N];
    for (size_t i = 0; i < N; i++)
        wdx[i] = want[i] > 0.f ? dy[i] : 0.f;
    same_bits(dx, wdx, N, "relu_grad");
    dev->ops->relu_grad(dev, dy, dy, want, N); /* in place */
    same_bits(dy, wdx, N, "relu_grad in place");
}

Test(cpu_wide, fill_scale_and_axpy_give_the_plain_loops_bits, .init = open_cpu,
     .fini = close_cpu)
{
    static float x[N], y[N], want[N];
    dev->ops->fill(dev, y, -0.0f, N);
    for (size_t i = 0; i < N; i++)
        want[i] = -0.0f;
    same_bits(y, want, N, "fill");

    fill(y, N, 10);
    memcpy(want, y, sizeof y);
    dev->ops->scale(dev, y, 0.3f, N);
    for (size_t i = 0; i < N; i++)
        want[i] *= 0.3f;
    same_bits(y, want, N, "scale");

    fill(x, N, 11);
    fill(y, N, 12);
    memcpy(want, y, sizeof y);
    dev->ops->axpy(dev, y, -1.7f, x, N);
    for (size_t i = 0; i < N; i++)
        want[i] += -1.7f * x[i];
    same_bits(y, want, N, "axpy");
}

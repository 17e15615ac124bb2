/* bench/train — the eight sgemm products of one MLP training step. */
#include "train_blas.h"

#include <stdint.h>
#include <stdlib.h>

#include <cblas.h>

#include "stats.h"

#define N_LAYERS 3

static const int widths[N_LAYERS + 1] = {784, 256, 128, 10};

struct bench_blas {
    int batch;
    /* a[0] = X, a[i] = H_i: the input of layer i, batch x widths[i] */
    float *a[N_LAYERS];
    /* dz[i]: the gradient at layer i's output, batch x widths[i + 1] */
    float *dz[N_LAYERS];
    /* da[i]: the gradient at layer i's input (i >= 1), batch x widths[i] */
    float *da[N_LAYERS];
    float *w[N_LAYERS], *dw[N_LAYERS]; /* widths[i] x widths[i + 1] */
    float *z[N_LAYERS];                /* layer i's output, batch x widths[i + 1] */
};

static float *fill_new(size_t n, uint64_t *s)
{
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        /* xorshift64: any values will do, as long as they are not denormal */
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        p[i] = (float)((double)(*s >> 11) / 9007199254740992.0 - 0.5) * 0.1f;
    }
    return p;
}

bench_blas *bench_blas_create(int batch)
{
    bench_blas *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->batch = batch;
    uint64_t s = 0x9e3779b97f4a7c15u;
    size_t n = (size_t)batch;
    int ok = 1;
    for (int i = 0; i < N_LAYERS; i++) {
        size_t in = (size_t)widths[i], out = (size_t)widths[i + 1];
        ok &= (b->a[i] = fill_new(n * in, &s)) != NULL;
        ok &= (b->z[i] = fill_new(n * out, &s)) != NULL;
        ok &= (b->dz[i] = fill_new(n * out, &s)) != NULL;
        ok &= (b->da[i] = fill_new(n * in, &s)) != NULL;
        ok &= (b->w[i] = fill_new(in * out, &s)) != NULL;
        ok &= (b->dw[i] = fill_new(in * out, &s)) != NULL;
    }
    if (!ok) {
        bench_blas_destroy(b);
        return NULL;
    }
    return b;
}

void bench_blas_destroy(bench_blas *b)
{
    if (!b)
        return;
    for (int i = 0; i < N_LAYERS; i++) {
        free(b->a[i]);
        free(b->z[i]);
        free(b->dz[i]);
        free(b->da[i]);
        free(b->w[i]);
        free(b->dw[i]);
    }
    free(b);
}

double bench_blas_step_flops(const bench_blas *b)
{
    /* Forward, weight gradient and input gradient each cost 2 * batch * in *
     * out, but the first layer has no input gradient: eight products. */
    double f = 0;
    for (int i = 0; i < N_LAYERS; i++)
        f += 2.0 * b->batch * widths[i] * widths[i + 1] * (i == 0 ? 2 : 3);
    return f;
}

static void step(bench_blas *b)
{
    const int n = b->batch;
    /* forward: Z_i = A_i W_i */
    for (int i = 0; i < N_LAYERS; i++) {
        int in = widths[i], out = widths[i + 1];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, out, in, 1.0f, b->a[i],
                    in, b->w[i], out, 0.0f, b->z[i], out);
    }
    /* backward, last layer first: dW_i = A_i^T dZ_i, then dA_i = dZ_i W_i^T */
    for (int i = N_LAYERS - 1; i >= 0; i--) {
        int in = widths[i], out = widths[i + 1];
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, in, out, n, 1.0f, b->a[i],
                    in, b->dz[i], out, 0.0f, b->dw[i], out);
        if (i > 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, in, out, 1.0f,
                        b->dz[i], out, b->w[i], out, 0.0f, b->da[i], in);
    }
}

double bench_blas_run(bench_blas *b, int steps)
{
    uint64_t t0 = bench_now_ns();
    for (int s = 0; s < steps; s++)
        step(b);
    return (double)(bench_now_ns() - t0) / 1e9;
}

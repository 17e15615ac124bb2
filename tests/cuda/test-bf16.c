/* The bf16 precision: the float32 -> bfloat16 rounding against a reference
 * that picks the nearer of the two neighbouring bfloat16 values in double
 * (ties to the even one), everywhere; on a GPU, products (cublasGemmEx on
 * bfloat16 inputs, float32 sums) and convolutions (bfloat16-rounded inputs)
 * against double references computed from the rounded inputs, which they
 * must meet to float32 summation error (TC_TOL, as fp32 is held to). The cpu's refusal of
 * bf16 is in test-train.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <ferry/error.h>

#include "runtime/device/cuda/cuda_bf16_round.h"
#include "runtime/device/device.h"
#include "tcuda.h"
#include "tref.h"

/* The nearest bfloat16 to f by distance in double, ties to an even last
 * mantissa bit; NaN gives NaN. */
static uint16_t ref_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if (isnan(f))
        return (uint16_t)((u >> 16) | 0x40);
    if (isinf(f))
        return (uint16_t)(u >> 16);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1); /* away from zero */
    float flo = cuda_f32_from_bf16(lo);
    /* hi past the largest finite bfloat16 is infinity; as a rounding
     * target it stands where the next power of two would be. */
    double dhi = (hi & 0x7fff) == 0x7f80 ? copysign(ldexp(1.0, 128), (double)f)
                                         : (double)cuda_f32_from_bf16(hi);
    double dl = fabs((double)f - (double)flo), dh = fabs(dhi - (double)f);
    if (dl < dh)
        return lo;
    if (dh < dl)
        return hi;
    return (lo & 1) ? hi : lo;
}

static void same(float f)
{
    uint16_t got = cuda_bf16_from_f32(f), want = ref_bf16(f);
    uint32_t u;
    memcpy(&u, &f, 4);
    cr_assert_eq(got, want, "0x%08x (%.9g): got 0x%04x want 0x%04x", u, (double)f, got,
                 want);
}

Test(bf16_round, agrees_with_the_nearest_value_ties_to_even_on_edges)
{
    const uint32_t edges[] = {
        0x00000000, 0x80000000, 0x3f800000, 0x3f808000, /* 1 + half an ulp: tie, even */
        0x3f818000,                                     /* tie, odd: up */
        0x3f807fff, 0x3f808001, 0x00000001,             /* the smallest subnormal */
        0x007fffff, 0x00800000, 0x7f7fffff, /* the largest float: to infinity */
        0x7f7f7fff,                         /* just under the tie: largest bf16 */
        0x7f7f8000,                         /* the tie at the top: even is infinity */
        0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, /* signalling NaN: quiet */
        0xffc00001, 0xbf808000, 0xbf818000, 0xc0490fdb,
    };
    for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) {
        float f;
        memcpy(&f, &edges[i], 4);
        same(f);
    }
    float f;
    uint32_t u = 0x7f800001;
    memcpy(&f, &u, 4);
    cr_assert(isnan(cuda_bf16_round(f)), "a signalling NaN stays a NaN");
    u = 0x7f7fffff;
    memcpy(&f, &u, 4);
    cr_assert(isinf(cuda_bf16_round(f)));
    cr_assert_eq(cuda_bf16_round(1.0f), 1.0f);
    cr_assert_eq(cuda_bf16_round(3.140625f), 3.140625f, "a bfloat16 is its own rounding");
}

Test(bf16_round, agrees_with_the_nearest_value_on_random_bit_patterns)
{
    uint64_t s = 0x243f6a8885a308d3ull;
    for (int i = 0; i < 2000000; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        uint32_t u = (uint32_t)(s >> 17);
        if (i & 1) /* half of them exactly on a tie */
            u = (u & 0xffff0000u) | 0x8000u;
        float f;
        memcpy(&f, &u, 4);
        same(f);
    }
}

/* ---- on a GPU --------------------------------------------------------------- */

static double rb(double v)
{
    return (double)cuda_bf16_round((float)v);
}

static void set_bf16(void)
{
    char err[256] = "";
    int rc = rt_device_ext(G)->set_precision(G, RT_PREC_BF16, err, sizeof err);
    cr_assert_eq(rc, 0, "--precision bf16 on %s: %s", G->description, err);
}

Test(cuda_bf16, products_take_bfloat16_inputs_and_sum_in_float32)
{
    tc_gpu();
    set_bf16();
    const int m = 131, n = 70, k = 300;
    uint64_t seed = 5;
    double *a = tc_new((size_t)m * k), *b = tc_new((size_t)k * n);
    double *want = tc_new((size_t)m * n), *got = tc_new((size_t)m * n);
    tc_rand(a, (size_t)m * k, -1, 1, &seed);
    tc_rand(b, (size_t)k * n, -1, 1, &seed);
    float *da = tc_put(G, a, (size_t)m * k), *db = tc_put(G, b, (size_t)k * n);
    float *dc = G->ops->alloc(G, (size_t)m * n * sizeof(float));
    cr_assert_not_null(dc);
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        /* a stored k x m when ta, b stored n x k when tb: the same numbers
         * read another way. */
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double s = 0;
                for (int l = 0; l < k; l++) {
                    double x = ta ? a[(size_t)l * m + i] : a[(size_t)i * k + l];
                    double y = tb ? b[(size_t)j * k + l] : b[(size_t)l * n + j];
                    s += rb(x) * rb(y);
                }
                want[(size_t)i * n + j] = s;
            }
        G->ops->gemm(G, ta, tb, m, n, k, 1.0f, da, db, 0.0f, dc);
        tc_get(G, got, dc, (size_t)m * n);
        /* float32 sums of exact products: far inside bfloat16's own 2^-8. */
        tc_close(got, want, (size_t)m * n, TC_TOL,
                 ta ? (tb ? "TT" : "TN") : (tb ? "NT" : "NN"));
    }
    G->ops->free(G, da);
    G->ops->free(G, db);
    G->ops->free(G, dc);
    free(a);
    free(b);
    free(want);
    free(got);
    tc_finish();
}

/* conv2d and conv2d_grad in bf16 against tref_conv on rounded inputs: y from
 * x and w, dx from w and dy, dw from x and dy rounded; the biases and dbias
 * in float32. */
static void conv_bf16(ferry_conv_t s, uint64_t seed)
{
    cr_assert(ferry_conv_shape(&s));
    size_t nx = (size_t)s.n * s.c * s.h * s.w, nw = (size_t)s.k * s.c * s.r * s.s,
           ny = (size_t)s.n * s.k * s.oh * s.ow;
    double *x = tc_new(nx), *w = tc_new(nw), *bias = tc_new(s.k), *dy = tc_new(ny);
    tc_rand(x, nx, -1, 1, &seed);
    tc_rand(w, nw, -0.5, 0.5, &seed);
    tc_rand(bias, s.k, -0.5, 0.5, &seed);
    tc_rand(dy, ny, -1, 1, &seed);
    double *rx = tc_new(nx), *rw = tc_new(nw), *rdy = tc_new(ny);
    for (size_t i = 0; i < nx; i++)
        rx[i] = rb(x[i]);
    for (size_t i = 0; i < nw; i++)
        rw[i] = rb(w[i]);
    for (size_t i = 0; i < ny; i++)
        rdy[i] = rb(dy[i]);
    double *y = tc_new(ny), *dx = tc_new(nx), *dw = tc_new(nw), *dbias = tc_new(s.k);
    double *fb = tc_new(s.k), *fdy = tc_new(ny);
    for (int i = 0; i < s.k; i++)
        fb[i] = (float)bias[i];
    for (size_t i = 0; i < ny; i++)
        fdy[i] = (float)dy[i];
    tref_conv(&s, rx, rw, fb, rdy, y, dx, dw, NULL);
    tref_conv(&s, rx, rw, NULL, fdy, NULL, NULL, NULL, dbias);
    float *gx = tc_put(G, x, nx), *gw = tc_put(G, w, nw), *gb = tc_put(G, bias, s.k),
          *gdy = tc_put(G, dy, ny);
    float *gy = G->ops->alloc(G, ny * 4), *gdx = G->ops->alloc(G, nx * 4),
          *gdw = G->ops->alloc(G, nw * 4), *gdb = G->ops->alloc(G, (size_t)s.k * 4);
    cr_assert(gy && gdx && gdw && gdb);
    cr_assert_eq(G->ops->conv2d(G, &s, gx, gw, gb, gy), 0);
    cr_assert_eq(G->ops->conv2d_grad(G, &s, gx, gw, gdy, gdx, gdw, gdb), 0);
    double *got = tc_new(nx > ny ? (nx > nw ? nx : nw) : (ny > nw ? ny : nw));
    tc_get(G, got, gy, ny);
    tc_close(got, y, ny, TC_TOL, "bf16 conv2d y");
    tc_get(G, got, gdx, nx);
    tc_close(got, dx, nx, TC_TOL, "bf16 conv2d_grad dx");
    tc_get(G, got, gdw, nw);
    tc_close(got, dw, nw, TC_TOL, "bf16 conv2d_grad dw");
    tc_get(G, got, gdb, s.k);
    tc_close(got, dbias, s.k, TC_TOL, "bf16 conv2d_grad dbias (float32)");
    float *all[] = {gx, gw, gb, gdy, gy, gdx, gdw, gdb};
    for (size_t i = 0; i < 8; i++)
        G->ops->free(G, all[i]);
    double *hosts[] = {x, w, bias, dy, rx, rw, rdy, y, dx, dw, dbias, fb, fdy, got};
    for (size_t i = 0; i < 14; i++)
        free(hosts[i]);
}

Test(cuda_bf16, convolutions_take_bfloat16_inputs_at_the_cnns_shapes, .timeout = 300)
{
    tc_gpu();
    set_bf16();
    conv_bf16(tref_cnn_conv1(32), 11);
    conv_bf16(tref_cnn_conv2(32), 12);
    tc_finish();
}

Test(cuda_bf16, fp32_after_bf16_is_float32_again)
{
    tc_gpu();
    set_bf16();
    char err[256] = "";
    cr_assert_eq(rt_device_ext(G)->set_precision(G, RT_PREC_FP32, err, sizeof err), 0,
                 "%s", err);
    const int m = 33, n = 17, k = 65;
    uint64_t seed = 8;
    double *a = tc_new((size_t)m * k), *b = tc_new((size_t)k * n), *want = tc_new(m * n),
           *got = tc_new(m * n);
    tc_rand(a, (size_t)m * k, -1, 1, &seed);
    tc_rand(b, (size_t)k * n, -1, 1, &seed);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int l = 0; l < k; l++)
                s += (double)(float)a[(size_t)i * k + l] *
                     (double)(float)b[(size_t)l * n + j];
            want[(size_t)i * n + j] = s;
        }
    float *da = tc_put(G, a, (size_t)m * k), *db = tc_put(G, b, (size_t)k * n);
    float *dc = G->ops->alloc(G, (size_t)m * n * sizeof(float));
    G->ops->gemm(G, false, false, m, n, k, 1.0f, da, db, 0.0f, dc);
    tc_get(G, got, dc, (size_t)m * n);
    tc_close(got, want, (size_t)m * n, TC_TOL, "fp32 gemm after bf16");
    G->ops->free(G, da);
    G->ops->free(G, db);
    G->ops->free(G, dc);
    free(a);
    free(b);
    free(want);
    free(got);
    tc_finish();
}

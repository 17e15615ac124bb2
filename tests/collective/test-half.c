/* tests/collective — float32 <-> IEEE binary16, round to nearest even, NaN
 * and Inf surviving; the conversions the fp16 wire relies on. */
#include "tcoll.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

TestSuite(half, .timeout = 30);

static uint16_t to_half(float f)
{
    uint16_t h = 0xDEAD;
    rt_half_from_float(&h, &f, 1);
    return h;
}

static float from_half(uint16_t h)
{
    float f = -12345.0f;
    rt_half_to_float(&f, &h, 1);
    return f;
}

static bool is_half_nan(uint16_t h)
{
    return (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0;
}

Test(half, converts_exact_values_both_ways)
{
    const struct {
        float f;
        uint16_t h;
        const char *what;
    } t[] = {
        {1.0f, 0x3C00, "1"},
        {-2.0f, 0xC000, "-2"},
        {0.5f, 0x3800, "0.5"},
        {65504.0f, 0x7BFF, "the largest finite half"},
        {-65504.0f, 0xFBFF, "the most negative finite half"},
        {0.0f, 0x0000, "zero"},
        {-0.0f, 0x8000, "negative zero"},
        {0x1p-14f, 0x0400, "the smallest normal"},
        {0x1p-24f, 0x0001, "the smallest subnormal"},
        {0x3FFp-24f, 0x03FF, "the largest subnormal"},
        {INFINITY, 0x7C00, "+Inf"},
        {-INFINITY, 0xFC00, "-Inf"},
        {0x1.998p-4f, 0x2E66, "the half nearest 0.1"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        uint16_t h = to_half(t[i].f);
        cr_assert(h == t[i].h, "%s: %a -> 0x%04X, want 0x%04X", t[i].what, (double)t[i].f,
                  h, t[i].h);
        float back = from_half(t[i].h);
        cr_assert(memcmp(&back, &t[i].f, sizeof back) == 0, "%s: 0x%04X -> %a, want %a",
                  t[i].what, t[i].h, (double)back, (double)t[i].f);
    }
}

Test(half, rounds_to_nearest_even)
{
    const struct {
        float f;
        uint16_t h;
        const char *why;
    } t[] = {
        {1.0f + 0x1p-11f, 0x3C00, "a tie goes to the even 1.0"},
        {1.0f + 0x3p-11f, 0x3C02, "a tie goes to the even 1+2^-9"},
        {1.0f + 0x1p-11f + 0x1p-22f, 0x3C01, "just past the tie goes up"},
        {1.0f + 0x1p-11f - 0x1p-23f, 0x3C00, "just below the tie goes down"},
        {0.1f, 0x2E66, "0.1"},
        {65519.99f, 0x7BFF, "below 65520 stays the largest finite"},
        {65520.0f, 0x7C00, "65520 ties to even: Inf"},
        {1e6f, 0x7C00, "overflow becomes Inf"},
        {-1e6f, 0xFC00, "negative overflow becomes -Inf"},
        {1e-8f, 0x0000, "1e-8 underflows to zero"},
        {-1e-8f, 0x8000, "-1e-8 underflows to -0"},
        {0x1p-25f, 0x0000, "half the smallest subnormal ties to even zero"},
        {0x1.8p-24f, 0x0002, "1.5 subnormal steps ties to even 2"},
        {3e-8f, 0x0001, "just above half a step rounds up to the smallest subnormal"},
        {1e-5f, 0x00A8, "1e-5 is subnormal: 167.77 steps of 2^-24 -> 168"},
        {0x1.ffcp-15f, 0x0400, "the largest subnormal plus a half step rounds to normal"},
        {1e-40f, 0x0000, "a float32 subnormal is zero"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        uint16_t h = to_half(t[i].f);
        cr_assert(h == t[i].h, "%s: %a -> 0x%04X, want 0x%04X", t[i].why, (double)t[i].f,
                  h, t[i].h);
    }
}

Test(half, nan_stays_nan_both_ways)
{
    float nans[] = {NAN, -NAN, 0};
    uint32_t signalling = 0x7F800001u; /* a NaN with only the lowest payload bit */
    memcpy(&nans[2], &signalling, sizeof(float));
    for (size_t i = 0; i < 3; i++) {
        uint16_t h = to_half(nans[i]);
        cr_assert(is_half_nan(h), "NaN %zu -> 0x%04X, not a half NaN", i, h);
        cr_assert(isnan(from_half(h)));
    }
    const uint16_t half_nans[] = {0x7C01, 0x7E00, 0xFE00, 0x7FFF};
    for (size_t i = 0; i < 4; i++)
        cr_assert(isnan(from_half(half_nans[i])), "0x%04X is not NaN as a float",
                  half_nans[i]);
}

/* Every half converts to a float and back to itself (NaNs to a NaN). */
Test(half, every_half_round_trips_through_float)
{
    size_t n = 65536;
    uint16_t *h = malloc(n * sizeof *h), *back = malloc(n * sizeof *back);
    float *f = malloc(n * sizeof *f);
    for (size_t i = 0; i < n; i++)
        h[i] = (uint16_t)i;
    rt_half_to_float(f, h, n);
    rt_half_from_float(back, f, n);
    for (size_t i = 0; i < n; i++) {
        if (is_half_nan(h[i]))
            cr_assert(isnan(f[i]) && is_half_nan(back[i]), "NaN 0x%04zX -> %a -> 0x%04X",
                      i, (double)f[i], back[i]);
        else
            cr_assert(back[i] == h[i], "0x%04zX -> %a -> 0x%04X", i, (double)f[i],
                      back[i]);
    }
    free(h);
    free(back);
    free(f);
}

/* Arrays of any length (vector loops and their tails) convert like single
 * values; round is from then to; add_to adds the converted values. */
Test(half, arrays_of_every_length_agree_with_single_values)
{
    for (size_t n = 0; n <= 37; n++) {
        float *x = malloc((n + 1) * sizeof *x), *r = malloc((n + 1) * sizeof *r);
        float *acc = malloc((n + 1) * sizeof *acc);
        uint16_t *h = malloc((n + 1) * sizeof *h);
        co_fill_random(x, n, n);
        for (size_t i = 0; i < n; i++)
            x[i] *= (float)(1 << (i % 16)); /* up to 32768: still finite in half */
        rt_half_from_float(h, x, n);
        memcpy(r, x, n * sizeof *r);
        rt_half_round(r, n);
        for (size_t i = 0; i < n; i++) {
            acc[i] = 0.25f;
            cr_assert(h[i] == to_half(x[i]), "n %zu [%zu]: 0x%04X vs 0x%04X alone", n, i,
                      h[i], to_half(x[i]));
            float want = from_half(h[i]);
            cr_assert(memcmp(&r[i], &want, sizeof want) == 0,
                      "n %zu [%zu]: rt_half_round gave %a, the half is %a", n, i,
                      (double)r[i], (double)want);
            cr_assert(fabsf(r[i] - x[i]) <= fabsf(x[i]) * 0x1p-11f + 0x1p-25f,
                      "n %zu [%zu]: %a rounded to %a", n, i, (double)x[i], (double)r[i]);
        }
        rt_half_add_to_float(acc, h, n);
        for (size_t i = 0; i < n; i++)
            cr_assert(acc[i] == 0.25f + from_half(h[i]), "n %zu [%zu]: add_to gave %a", n,
                      i, (double)acc[i]);
        free(x);
        free(r);
        free(acc);
        free(h);
    }
}

Test(half, round_and_add_carry_nan_and_inf)
{
    float x[] = {NAN, INFINITY, -INFINITY, 70000.0f, 1e-8f, 1.0f + 0x1p-11f};
    rt_half_round(x, 6);
    cr_assert(isnan(x[0]));
    cr_assert(isinf(x[1]) && x[1] > 0);
    cr_assert(isinf(x[2]) && x[2] < 0);
    cr_assert(isinf(x[3]) && x[3] > 0, "70000 rounds to %a, want Inf", (double)x[3]);
    cr_assert(x[4] == 0.0f, "1e-8 rounds to %a, want 0", (double)x[4]);
    cr_assert(x[5] == 1.0f, "1+2^-11 rounds to %a, want 1", (double)x[5]);

    float acc[] = {1.0f, 1.0f, 1.0f, 2.0f};
    const uint16_t h[] = {0x7E00 /* NaN */, 0x7C00 /* Inf */, 0xFC00 /* -Inf */,
                          0x3C00 /* 1 */};
    rt_half_add_to_float(acc, h, 4);
    cr_assert(isnan(acc[0]));
    cr_assert(isinf(acc[1]) && acc[1] > 0);
    cr_assert(isinf(acc[2]) && acc[2] < 0);
    cr_assert(acc[3] == 3.0f);
}

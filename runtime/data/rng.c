/* runtime/data — the seeded generator: splitmix64 spreads (seed, stream)
 * over xoshiro256**'s state (Vigna's recommended seeding), Box-Muller makes
 * normals. Everything here is integer arithmetic but the last step of
 * rt_rng_normal, so a seed draws the same samples on every rank. */
#include "data_int.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void rt_rng_seed(rt_rng *r, uint64_t seed, uint64_t stream)
{
    /* The stream is mixed before it meets the seed, so (s, e) and (s + 1,
     * e - 1) do not start from neighbouring splitmix64 states. */
    uint64_t m = stream;
    uint64_t x = seed ^ splitmix64(&m);
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
    r->has_spare = false;
    r->spare = 0;
}

uint64_t rt_rng_next(rt_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

uint64_t rt_rng_below(rt_rng *r, uint64_t bound)
{
    if (bound == 0)
        return 0;
    /* Lemire's multiply-and-reject: the high half of x * bound is uniform
     * once the low half's few biased values are redrawn. */
    unsigned __int128 m = (unsigned __int128)rt_rng_next(r) * bound;
    uint64_t lo = (uint64_t)m;
    if (lo < bound) {
        uint64_t floor = -bound % bound;
        while (lo < floor) {
            m = (unsigned __int128)rt_rng_next(r) * bound;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

double rt_rng_uniform(rt_rng *r)
{
    return (double)((rt_rng_next(r) >> 11) + 1) * 0x1.0p-53;
}

double rt_rng_normal(rt_rng *r)
{
    if (r->has_spare) {
        r->has_spare = false;
        return r->spare;
    }
    double rad = sqrt(-2.0 * log(rt_rng_uniform(r)));
    double ang = 2.0 * M_PI * rt_rng_uniform(r);
    r->spare = rad * sin(ang);
    r->has_spare = true;
    return rad * cos(ang);
}

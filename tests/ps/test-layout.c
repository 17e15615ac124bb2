/* tests/ps — how the flat buffer splits into shards: rt_ps_shard_span
 * covers [0, n) exactly, in order, on 16-float boundaries, the first shards
 * a block longer, empty shards once there are more shards than blocks; and
 * which rank holds each. Pure functions: no fixture. */
#include "tps.h"

#include <string.h>

TestSuite(ps_layout, .timeout = 30);

static const size_t sizes[] = {1, 15, 16, 17, 1000, 235146};

Test(ps_layout, spans_cover_the_buffer_in_order_on_16_float_boundaries)
{
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k], blocks = (n + 15) / 16;
        for (int shards = 1; shards <= 7; shards++) {
            size_t at = 0, longest = 0, shortest = (size_t)-1;
            int nonempty = 0;
            for (int s = 0; s < shards; s++) {
                rt_ps_span sp = rt_ps_shard_span(n, shards, s);
                cr_assert(sp.lo == at,
                          "n %zu, %d shards: shard %d starts at %zu, the one before "
                          "ended at %zu",
                          n, shards, s, sp.lo, at);
                cr_assert(sp.hi >= sp.lo && sp.hi <= n,
                          "n %zu, %d shards: shard %d is [%zu, %zu)", n, shards, s, sp.lo,
                          sp.hi);
                cr_assert(sp.lo % 16 == 0 || sp.lo == n,
                          "n %zu, %d shards: shard %d starts at %zu, not on a 16-float "
                          "boundary",
                          n, shards, s, sp.lo);
                cr_assert(sp.hi % 16 == 0 || sp.hi == n,
                          "n %zu, %d shards: shard %d ends at %zu, not on a 16-float "
                          "boundary",
                          n, shards, s, sp.hi);
                size_t len = sp.hi - sp.lo;
                if (len) {
                    cr_assert(nonempty == s,
                              "n %zu, %d shards: shard %d holds floats "
                              "after an empty one",
                              n, shards, s);
                    nonempty++;
                    /* The last shard may be cut short by n; the others are
                     * whole blocks. */
                    if (sp.hi != n) {
                        longest = len > longest ? len : longest;
                        shortest = len < shortest ? len : shortest;
                    }
                }
                at = sp.hi;
            }
            cr_assert(at == n, "n %zu, %d shards: the shards end at %zu", n, shards, at);
            size_t want = blocks < (size_t)shards ? blocks : (size_t)shards;
            cr_assert((size_t)nonempty == want,
                      "n %zu (%zu blocks), %d shards: %d shards hold floats, want %zu", n,
                      blocks, shards, nonempty, want);
            if (longest)
                cr_assert(longest - shortest <= 16,
                          "n %zu, %d shards: shards of %zu and %zu floats (unbalanced)",
                          n, shards, longest, shortest);
        }
    }
}

Test(ps_layout, the_first_shards_get_the_extra_blocks)
{
    /* 1000 floats = 63 blocks (the last 8 floats long); 4 shards: 16, 16,
     * 16 and 15 blocks. */
    size_t want[4][2] = {{0, 256}, {256, 512}, {512, 768}, {768, 1000}};
    for (int s = 0; s < 4; s++) {
        rt_ps_span sp = rt_ps_shard_span(1000, 4, s);
        cr_assert(sp.lo == want[s][0] && sp.hi == want[s][1],
                  "shard %d is [%zu, %zu), want [%zu, %zu)", s, sp.lo, sp.hi, want[s][0],
                  want[s][1]);
    }
    /* 17 floats = 2 blocks over 7 shards: [0,16), [16,17), then empty. */
    rt_ps_span a = rt_ps_shard_span(17, 7, 0), b = rt_ps_shard_span(17, 7, 1);
    cr_assert(a.lo == 0 && a.hi == 16 && b.lo == 16 && b.hi == 17);
    for (int s = 2; s < 7; s++) {
        rt_ps_span e = rt_ps_shard_span(17, 7, s);
        cr_assert(e.lo == 17 && e.hi == 17, "shard %d is [%zu, %zu), want empty at 17", s,
                  e.lo, e.hi);
    }
}

Test(ps_layout, shards_go_round_robin_over_the_ranks)
{
    for (int world = 1; world <= 5; world++) {
        int held[5] = {0};
        for (int s = 0; s < 12; s++) {
            int r = rt_ps_shard_rank(s, world);
            cr_assert(r >= 0 && r < world, "shard %d of world %d: rank %d", s, world, r);
            cr_assert(r == s % world);
            held[r]++;
        }
        for (int r = 0; r < world; r++)
            cr_assert(held[r] == 12 / world || held[r] == 12 / world + 1,
                      "world %d: rank %d holds %d of 12 shards", world, r, held[r]);
    }
}

Test(ps_layout, algorithm_names_round_trip)
{
    cr_assert(rt_ps_algo_parse(NULL) == RT_PS_DOWNPOUR);
    cr_assert(rt_ps_algo_parse("") == RT_PS_DOWNPOUR);
    cr_assert(rt_ps_algo_parse("downpour") == RT_PS_DOWNPOUR);
    cr_assert(rt_ps_algo_parse("dynsgd") == RT_PS_DYNSGD);
    cr_assert(rt_ps_algo_parse("easgd") == RT_PS_EASGD);
    cr_assert(rt_ps_algo_parse("EASGD") == -1);
    cr_assert(rt_ps_algo_parse("sgd") == -1);
    for (int a = RT_PS_DOWNPOUR; a <= RT_PS_EASGD; a++)
        cr_assert(rt_ps_algo_parse(rt_ps_algo_name((rt_ps_algo)a)) == a);
}

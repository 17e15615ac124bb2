/* How a collective's buffer splits into segments and chunks. Sender and
 * receiver compute the same split from the buffer's length, the world and
 * the session's chunk size, so a receiver can check every chunk header
 * before it keeps the bytes. */
#include <stdio.h>

#include "coll_int.h"

rt_span rt_geo_segment(size_t n, int world, int s)
{
    size_t w = (size_t)world, base = n / w, rem = n % w, i = (size_t)s;
    return (rt_span){.off = i * base + (i < rem ? i : rem), .len = base + (i < rem)};
}

size_t rt_geo_chunks(size_t len, size_t chunk)
{
    return (len + chunk - 1) / chunk;
}

rt_span rt_geo_chunk(rt_span s, size_t chunk, size_t c)
{
    size_t at = c * chunk;
    size_t len = s.len - at < chunk ? s.len - at : chunk;
    return (rt_span){.off = s.off + at, .len = len};
}

static int mod(int a, int w)
{
    return ((a % w) + w) % w;
}

/* Reduce-scatter step j: rank r passes on segment r - j, which its left
 * neighbour has added to; after world - 1 steps it holds segment r + 1 in
 * full. All-gather step j passes on segment r + 1 - j, complete. */
int rt_geo_send_segment(int rank, int world, int phase, int j)
{
    return phase == RT_PHASE_RS ? mod(rank - j, world) : mod(rank + 1 - j, world);
}

int rt_geo_recv_segment(int rank, int world, int phase, int j)
{
    return phase == RT_PHASE_RS ? mod(rank - j - 1, world) : mod(rank - j, world);
}

const char *rt_phase_name(uint32_t phase)
{
    switch (phase) {
    case RT_PHASE_RS:
        return "reduce-scatter";
    case RT_PHASE_AG:
        return "all-gather";
    case RT_PHASE_BC:
        return "broadcast";
    case RT_PHASE_EX:
        return "exchange";
    }
    return "unknown phase";
}

int rt_exchange_rounds(int world)
{
    int k = 0;
    while ((1 << k) < world)
        k++;
    return (1 << k) == world ? k : 0;
}

int rt_geo_check(const rt_chunk_hdr *h, int rank, int world, size_t chunk, rt_span *out,
                 char *why, size_t len)
{
    if (h->phase > RT_PHASE_EX) {
        snprintf(why, len, "phase %u: expected 0 (reduce-scatter), 1 (all-gather), 2 "
                           "(broadcast) or 3 (exchange)", h->phase);
        return FERRY_EINVAL;
    }
    if (h->elem != RT_ELEM_F32 && h->elem != RT_ELEM_F16) {
        snprintf(why, len, "element type %d: expected 0 (float32) or 1 (float16)",
                 h->elem);
        return FERRY_EINVAL;
    }
    int rounds = rt_exchange_rounds(world);
    if (h->phase == RT_PHASE_EX &&
        (rounds == 0 || h->ring_step >= (uint32_t)rounds || h->elem != RT_ELEM_F32)) {
        snprintf(why, len,
                 "exchange chunk of round %u, element type %d in a world of %d: exchanges "
                 "run in worlds of 2 ranks or another power of two, rounds 0..log2 of it "
                 "less 1, float32",
                 h->ring_step, h->elem, world);
        return FERRY_EINVAL;
    }
    /* Exchange partners differ by a power of two; all else comes from the
     * left neighbour. */
    int from = h->phase == RT_PHASE_EX ? rank ^ (1 << h->ring_step) : mod(rank - 1, world);
    if (h->from_rank != (uint32_t)from) {
        snprintf(why, len, "%s chunk from rank %u: rank %d receives it from rank %d only",
                 rt_phase_name(h->phase), h->from_rank, rank, from);
        return FERRY_EINVAL;
    }
    rt_span seg = {0, h->count};
    if (h->phase == RT_PHASE_BC) {
        if (h->ring_step != 0 || h->root >= (uint32_t)world || h->root == (uint32_t)rank ||
            h->elem != RT_ELEM_F32) {
            snprintf(why, len,
                     "broadcast chunk with ring step %u, root %u, element type %d: "
                     "expected ring step 0, a root other than rank %d below %d, float32",
                     h->ring_step, h->root, h->elem, rank, world);
            return FERRY_EINVAL;
        }
    } else if (h->phase != RT_PHASE_EX) {
        if (h->ring_step + 1 >= (uint32_t)world) {
            snprintf(why, len, "ring step %u: a ring of %d ranks has steps 0..%d",
                     h->ring_step, world, world - 2);
            return FERRY_EINVAL;
        }
        seg = rt_geo_segment(h->count, world,
                             rt_geo_recv_segment(rank, world, (int)h->phase,
                                                 (int)h->ring_step));
    }
    size_t chunks = rt_geo_chunks(seg.len, chunk);
    if (h->chunk >= chunks) {
        snprintf(why, len,
                 "chunk %u of %s ring step %u: the segment of %zu floats has %zu "
                 "chunk(s) of %zu",
                 h->chunk, rt_phase_name(h->phase), h->ring_step, seg.len, chunks, chunk);
        return FERRY_EINVAL;
    }
    *out = rt_geo_chunk(seg, chunk, h->chunk);
    return 0;
}

/* How the flat parameter buffer splits into shards: contiguous, on the
 * 16-float boundaries the model layout already keeps, so a shard's slice is
 * aligned for the vector loops of the optimizer on both ends. */
#include <string.h>

#include "ps_int.h"

#define BLOCK 16

rt_ps_span rt_ps_shard_span(size_t n, int shards, int s)
{
    size_t blocks = (n + BLOCK - 1) / BLOCK, k = (size_t)shards, i = (size_t)s;
    size_t base = blocks / k, extra = blocks % k;
    size_t lo = i * base + (i < extra ? i : extra);
    size_t hi = lo + base + (i < extra ? 1 : 0);
    rt_ps_span sp = {.lo = lo * BLOCK, .hi = hi * BLOCK};
    if (sp.hi > n)
        sp.hi = n;
    if (sp.lo > sp.hi)
        sp.lo = sp.hi;
    return sp;
}

int rt_ps_algo_parse(const char *name)
{
    if (!name || !name[0] || strcmp(name, "downpour") == 0)
        return RT_PS_DOWNPOUR;
    if (strcmp(name, "dynsgd") == 0)
        return RT_PS_DYNSGD;
    if (strcmp(name, "easgd") == 0)
        return RT_PS_EASGD;
    return -1;
}

const char *rt_ps_algo_name(rt_ps_algo a)
{
    return a == RT_PS_EASGD ? "easgd" : a == RT_PS_DYNSGD ? "dynsgd" : "downpour";
}

/* When a training step is captured as a device graph and replayed: the
 * rule, with no device in it (tests/train checks it on the cpu). The
 * trainer calls the device (rt_device_ext's capture and graph members) as
 * the rule says. */
#include <string.h>

#include "train.h"

bool rt_graphs_enabled(const char *env_value)
{
    return !(env_value && strcmp(env_value, "0") == 0);
}

void rt_graph_plan_init(rt_graph_plan *p, bool enabled)
{
    memset(p, 0, sizeof *p);
    p->enabled = enabled;
}

static bool same(const rt_graph_key *a, const rt_graph_key *b)
{
    return a->n == b->n && a->x == b->x && a->labels == b->labels &&
           a->targets == b->targets;
}

rt_graph_action rt_graph_decide(rt_graph_plan *p, const rt_graph_key *k, int *slot,
                                void **evict)
{
    *slot = -1;
    *evict = NULL;
    int prev = p->prev_n;
    p->prev_n = k->n;
    if (!p->enabled || k->n <= 0)
        return RT_GRAPH_PLAIN;
    p->tick++;
    for (int i = 0; i < RT_GRAPHS; i++) {
        if (p->slot[i].used && same(&p->slot[i].key, k)) {
            p->slot[i].last = p->tick;
            if (p->slot[i].failed)
                return RT_GRAPH_PLAIN;
            *slot = i;
            return RT_GRAPH_REPLAY;
        }
    }
    if (k->n != prev)
        return RT_GRAPH_PLAIN;
    int pick = 0;
    for (int i = 0; i < RT_GRAPHS; i++) {
        if (!p->slot[i].used) {
            pick = i;
            break;
        }
        if (p->slot[i].last < p->slot[pick].last)
            pick = i;
    }
    *evict = p->slot[pick].used ? p->slot[pick].graph : NULL;
    p->slot[pick].used = true;
    p->slot[pick].failed = false;
    p->slot[pick].graph = NULL;
    p->slot[pick].key = *k;
    p->slot[pick].last = p->tick;
    *slot = pick;
    return RT_GRAPH_CAPTURE;
}

void rt_graph_captured(rt_graph_plan *p, int slot, void *graph)
{
    if (slot < 0 || slot >= RT_GRAPHS)
        return;
    p->slot[slot].graph = graph;
    p->slot[slot].failed = graph == NULL;
}

void *rt_graph_forget(rt_graph_plan *p, int slot)
{
    if (slot < 0 || slot >= RT_GRAPHS)
        return NULL;
    void *g = p->slot[slot].graph;
    memset(&p->slot[slot], 0, sizeof p->slot[slot]);
    return g;
}

void *rt_graph_at(const rt_graph_plan *p, int slot)
{
    return slot >= 0 && slot < RT_GRAPHS ? p->slot[slot].graph : NULL;
}

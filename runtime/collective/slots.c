/* What a collective has received, and from whom: whether a chunk can
 * belong to it, the slot each chunk fills, and the failure when a second
 * chunk comes for a filled one. A chunk's caller is named by its gRPC
 * peer address, which is all a worker knows of who sent it: any client
 * holding the cluster token can claim to be the neighbour. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_int.h"

/* A rank's chunks come over its one channel to this worker, so from one
 * caller (one connection): the last whose chunk fitted a collective under
 * way (hub.c). Another caller claiming the rank holds the cluster token
 * but is not it: refused at once, its chunk never added. A connection the
 * server closed for idleness (RPC_MAX_CONNECTION_IDLE_MS with no call)
 * comes back from another port: a rank silent that long may come from a
 * new caller. */
int rt_slot_pin_check(const rt_comm *c, uint32_t from, const char *peer, char *why,
                      size_t len)
{
    const struct rt_pin *p = &c->pins[from];
    uint64_t now = uv_hrtime();
    bool idle = now - p->last_ns > (uint64_t)RPC_MAX_CONNECTION_IDLE_MS * 1000000ull;
    if (p->peer[0] && strcmp(p->peer, peer) != 0 && !idle) {
        snprintf(why, len,
                 "a chunk from %s claims to be rank %u's (%s), whose chunks in session %llu "
                 "come from %s",
                 peer, from, c->peers[from], (unsigned long long)c->session, p->peer);
        return FERRY_EINVAL;
    }
    return 0;
}

int rt_slot_fits(const rt_comm *c, const rt_comm_op *op, const rt_chunk_hdr *h,
                 const char *peer, char *why, size_t len)
{
    bool bc = h->phase == RT_PHASE_BC;
    if (h->count == op->n && bc == (op->kind == RT_OP_BROADCAST) &&
        (!bc || h->root == (uint32_t)op->root) &&
        (h->phase == RT_PHASE_EX) == rt_ring_exchange(c, op))
        return 0;
    int from = (int)h->from_rank; /* checked against the geometry already */
    snprintf(why, len,
             "%s chunk of a %llu-float collective %llu from %s (as rank %d, %s), which "
             "rank %d runs as %s %s of %zu floats%s: the ranks disagree, or the chunk is "
             "not rank %d's",
             rt_phase_name(h->phase), (unsigned long long)h->count,
             (unsigned long long)op->seq, peer, from, c->peers[from], c->rank,
             op->kind == RT_OP_ALLREDUCE ? "an" : "a", rt_op_name(op), op->n,
             rt_ring_exchange(c, op) ? " by exchange" : "", from);
    return FERRY_EINVAL;
}

/* The slot of a chunk in op->got: broadcast by chunk; exchange by round
 * and chunk; the ring by phase, ring step and chunk, in room for the
 * longest segment's chunks (the first). */
static size_t slot(const rt_comm *c, const rt_comm_op *op, const rt_chunk_hdr *h)
{
    if (h->phase == RT_PHASE_BC)
        return h->chunk;
    if (h->phase == RT_PHASE_EX)
        return (size_t)h->ring_step * op->ex_chunks + h->chunk;
    size_t per = rt_geo_chunks(rt_geo_segment(op->n, c->world, 0).len, c->chunk);
    return ((size_t)h->phase * (size_t)(c->world - 1) + h->ring_step) * per + h->chunk;
}

bool rt_slots_alloc(rt_comm *c, rt_comm_op *op)
{
    size_t slots;
    if (op->ex)
        slots = op->ex_chunks * (size_t)c->rounds;
    else if (op->kind == RT_OP_BROADCAST)
        slots = rt_geo_chunks(op->n, c->chunk);
    else
        slots = 2 * (size_t)(c->world - 1) *
                rt_geo_chunks(rt_geo_segment(op->n, c->world, 0).len, c->chunk);
    if (!(op->got = calloc(slots ? slots : 1, 1))) {
        rt_comm_fail(c, FERRY_ENOMEM, "no memory to start %s %llu", rt_op_name(op),
                     (unsigned long long)op->seq);
        return false;
    }
    op->got_slots = slots;
    return true;
}

/* 1 + the index of `peer` in op->senders, added if new (255 when full). */
static uint8_t sender_mark(rt_comm_op *op, const char *peer)
{
    for (int i = 0; i < op->n_senders; i++)
        if (strcmp(op->senders[i], peer) == 0)
            return (uint8_t)(i + 1);
    if (op->n_senders == RT_OP_SENDERS)
        return 255;
    snprintf(op->senders[op->n_senders], sizeof op->senders[0], "%s", peer);
    return (uint8_t)++op->n_senders;
}

void rt_slot_uncharge(rt_comm *c, rt_chunk *ch)
{
    if (!ch->held)
        return;
    pthread_mutex_lock(&c->mu);
    c->held_bytes -= ch->held;
    c->stats.held_bytes = c->held_bytes;
    pthread_mutex_unlock(&c->mu);
    ch->held = 0;
}

/* A second chunk for one slot: one of the two came from a client that holds
 * the cluster's token but is not the neighbour. Which cannot be told, and
 * the first may have been added already: the collective fails, naming
 * where each came from. */
static void fail_twice(rt_comm *c, rt_comm_op *op, const rt_chunk *ch, uint8_t first)
{
    int from = (int)ch->h.from_rank;
    char step[32] = "";
    if (ch->h.phase != RT_PHASE_BC)
        snprintf(step, sizeof step, " %s %u",
                 ch->h.phase == RT_PHASE_EX ? "round" : "ring step", ch->h.ring_step);
    const char *was =
        first > 0 && first <= op->n_senders ? op->senders[first - 1] : "another caller";
    if (strcmp(was, ch->peer) == 0) {
        rt_comm_fail(c, FERRY_EPROTO,
                     "%s%s chunk %u of %s %llu came twice from %s, as rank "
                     "%d's (%s)",
                     rt_phase_name(ch->h.phase), step, ch->h.chunk, rt_op_name(op),
                     (unsigned long long)op->seq, was, from, c->peers[from]);
        return;
    }
    rt_comm_fail(c, FERRY_EPROTO,
                 "%s%s chunk %u of %s %llu came twice as rank %d's (%s), first from %s, "
                 "then from %s: a client that holds the cluster token but is not rank %d "
                 "sent one of them",
                 rt_phase_name(ch->h.phase), step, ch->h.chunk, rt_op_name(op),
                 (unsigned long long)op->seq, from, c->peers[from], was, ch->peer, from);
}

bool rt_slot_take(rt_comm *c, rt_comm_op *op, const rt_chunk *ch)
{
    if (!op->got)
        return true;
    size_t k = slot(c, op, &ch->h);
    if (k >= op->got_slots || op->got[k]) {
        fail_twice(c, op, ch, k < op->got_slots ? op->got[k] : 0);
        return false;
    }
    op->got[k] = sender_mark(op, ch->peer);
    return true;
}

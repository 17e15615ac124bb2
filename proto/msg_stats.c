/* Stats: the worker's counters and what holds its handler slots. */
#include "proto_int.h"

int proto_stats_reply_pack(const proto_stats_reply *in, proto_bytes *out)
{
    Ferry__StatsReply m = FERRY__STATS_REPLY__INIT;
    m.calls_served = in->calls_served;
    m.in_flight = in->in_flight;
    m.modules_loaded = in->modules_loaded;
    m.uptime_s = in->uptime_s;
    m.calls_failed = in->calls_failed;
    m.restarts = in->restarts;
    m.last_crash = proto_str(in->last_crash);
    m.slots = in->slots;
    m.busy_slots = in->busy_slots;
    m.stuck_calls = in->stuck_calls;
    m.oldest_call_s = in->oldest_call_s;
    m.oldest_call = proto_str(in->oldest_call);
    m.slot_holders = proto_str(in->slot_holders);
    m.queued_calls = in->queued_calls;
    return proto_pack(&m.base, out);
}

static void fill_reply(void *view, const ProtobufCMessage *msg)
{
    const Ferry__StatsReply *m = (const Ferry__StatsReply *)msg;
    *(proto_stats_reply *)view = (proto_stats_reply){
        .calls_served = m->calls_served,
        .in_flight = m->in_flight,
        .modules_loaded = m->modules_loaded,
        .uptime_s = m->uptime_s,
        .calls_failed = m->calls_failed,
        .restarts = m->restarts,
        .last_crash = m->last_crash,
        .slots = m->slots,
        .busy_slots = m->busy_slots,
        .stuck_calls = m->stuck_calls,
        .oldest_call_s = m->oldest_call_s,
        .oldest_call = m->oldest_call,
        .slot_holders = m->slot_holders,
        .queued_calls = m->queued_calls,
    };
}

static const size_t reply_strs[] = {
    offsetof(proto_stats_reply, last_crash),
    offsetof(proto_stats_reply, oldest_call),
    offsetof(proto_stats_reply, slot_holders),
};

PROTO_UNPACK(stats_reply, stats_reply, .fill = fill_reply, PROTO_STRS(reply_strs))

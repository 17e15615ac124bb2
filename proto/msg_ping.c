/* Ping: the one method a caller without the token may use. */
#include "proto_int.h"

int proto_ping_req_pack(const proto_ping_req *in, proto_bytes *out)
{
    Ferry__PingRequest m = FERRY__PING_REQUEST__INIT;
    m.nonce = in->nonce;
    return proto_pack(&m.base, out);
}

static void fill_req(void *view, const ProtobufCMessage *msg)
{
    const Ferry__PingRequest *m = (const Ferry__PingRequest *)msg;
    *(proto_ping_req *)view = (proto_ping_req){.nonce = m->nonce};
}

PROTO_UNPACK(ping_req, ping_request, .fill = fill_req)

int proto_ping_reply_pack(const proto_ping_reply *in, proto_bytes *out)
{
    Ferry__PingReply m = FERRY__PING_REPLY__INIT;
    m.version = proto_str(in->version);
    m.pid = in->pid;
    m.hostname = proto_str(in->hostname);
    m.device = proto_str(in->device);
    m.nonce = in->nonce;
    m.rank = in->rank;
    m.uptime_s = in->uptime_s;
    m.last_crash = proto_str(in->last_crash);
    m.crash_id = in->crash_id;
    m.restarts = in->restarts;
    m.slots = in->slots;
    m.busy_slots = in->busy_slots;
    m.stuck_calls = in->stuck_calls;
    m.oldest_call_s = in->oldest_call_s;
    return proto_pack(&m.base, out);
}

static void fill_reply(void *view, const ProtobufCMessage *msg)
{
    const Ferry__PingReply *m = (const Ferry__PingReply *)msg;
    *(proto_ping_reply *)view = (proto_ping_reply){
        .version = m->version,
        .pid = m->pid,
        .hostname = m->hostname,
        .device = m->device,
        .nonce = m->nonce,
        .rank = m->rank,
        .uptime_s = m->uptime_s,
        .last_crash = m->last_crash,
        .crash_id = m->crash_id,
        .restarts = m->restarts,
        .slots = m->slots,
        .busy_slots = m->busy_slots,
        .stuck_calls = m->stuck_calls,
        .oldest_call_s = m->oldest_call_s,
    };
}

static const size_t reply_strs[] = {
    offsetof(proto_ping_reply, version),
    offsetof(proto_ping_reply, hostname),
    offsetof(proto_ping_reply, device),
    offsetof(proto_ping_reply, last_crash),
};

PROTO_UNPACK(ping_reply, ping_reply, .fill = fill_reply, PROTO_STRS(reply_strs))

/* Call: a function of a loaded module, its argument and result as payloads. */
#include "proto_int.h"

int proto_call_req_pack(const proto_call_req *in, proto_bytes *out)
{
    Ferry__CallRequest m = FERRY__CALL_REQUEST__INIT;
    m.sha256 = proto_str(in->sha256);
    m.function = proto_str(in->function);
    m.rank = in->rank;
    m.world_size = in->world_size;
    return proto_pack(&m.base, out);
}

static void fill_req(void *view, const ProtobufCMessage *msg)
{
    const Ferry__CallRequest *m = (const Ferry__CallRequest *)msg;
    *(proto_call_req *)view = (proto_call_req){
        .sha256 = m->sha256,
        .function = m->function,
        .rank = m->rank,
        .world_size = m->world_size,
    };
}

static const size_t req_strs[] = {
    offsetof(proto_call_req, sha256),
    offsetof(proto_call_req, function),
};

PROTO_UNPACK(call_req, call_request, .fill = fill_req, PROTO_STRS(req_strs))

int proto_call_reply_pack(const proto_call_reply *in, proto_bytes *out)
{
    Ferry__CallReply m = FERRY__CALL_REPLY__INIT;
    m.elapsed_s = in->elapsed_s;
    return proto_pack(&m.base, out);
}

static void fill_reply(void *view, const ProtobufCMessage *msg)
{
    const Ferry__CallReply *m = (const Ferry__CallReply *)msg;
    *(proto_call_reply *)view = (proto_call_reply){.elapsed_s = m->elapsed_s};
}

PROTO_UNPACK(call_reply, call_reply, .fill = fill_reply)

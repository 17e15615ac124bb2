/* Reply readers: the head of a successful call, unpacked as its method's
 * reply; the payload handed over without a copy. */
#include "pw_int.h"

static int unpack(const rpc_call *call, const ProtobufCMessageDescriptor *desc,
                  ProtobufCMessage **out)
{
    if (!call || !call->done || call->result)
        return FERRY_EINVAL;
    return rpc_msg_unpack(&call->reply, desc, out);
}

int pw_ping_reply(const rpc_call *call, Ferry__PingReply **out)
{
    return unpack(call, &ferry__ping_reply__descriptor, (ProtobufCMessage **)out);
}

int pw_load_module_reply(const rpc_call *call, Ferry__LoadModuleReply **out)
{
    return unpack(call, &ferry__load_module_reply__descriptor, (ProtobufCMessage **)out);
}

int pw_stats_reply(const rpc_call *call, Ferry__StatsReply **out)
{
    return unpack(call, &ferry__stats_reply__descriptor, (ProtobufCMessage **)out);
}

void pw_call_result(rpc_call *call, void **out, size_t *len)
{
    size_t n = 0;
    void *p = call && call->done && !call->result ? rpc_msg_take_payload(&call->reply, &n)
                                                  : NULL;
    *out = p;
    *len = p ? n : 0;
}

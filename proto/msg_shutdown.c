/* Shutdown: the worker exits, giving its calls a grace period. */
#include "proto_int.h"

int proto_shutdown_req_pack(const proto_shutdown_req *in, proto_bytes *out)
{
    Ferry__ShutdownRequest m = FERRY__SHUTDOWN_REQUEST__INIT;
    m.grace_ms = in->grace_ms;
    return proto_pack(&m.base, out);
}

static void fill_req(void *view, const ProtobufCMessage *msg)
{
    const Ferry__ShutdownRequest *m = (const Ferry__ShutdownRequest *)msg;
    *(proto_shutdown_req *)view = (proto_shutdown_req){.grace_ms = m->grace_ms};
}

static const proto_view_desc req_view = {
    .msg = &ferry__shutdown_request__descriptor,
    .size = sizeof(proto_shutdown_req),
    .fill = fill_req,
};

int proto_shutdown_req_unpack(const void *buf, size_t len, proto_shutdown_req **out)
{
    return proto_view_unpack(&req_view, buf, len, (void **)out);
}

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

PROTO_UNPACK(shutdown_req, shutdown_request, .fill = fill_req)

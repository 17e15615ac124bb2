/* LoadModule: a module offered by its digest, its bytes as the payload. */
#include "proto_int.h"

int proto_load_module_req_pack(const proto_load_module_req *in, proto_bytes *out)
{
    Ferry__LoadModuleRequest m = FERRY__LOAD_MODULE_REQUEST__INIT;
    m.sha256 = proto_str(in->sha256);
    m.name = proto_str(in->name);
    return proto_pack(&m.base, out);
}

static void fill_req(void *view, const ProtobufCMessage *msg)
{
    const Ferry__LoadModuleRequest *m = (const Ferry__LoadModuleRequest *)msg;
    *(proto_load_module_req *)view =
        (proto_load_module_req){.sha256 = m->sha256, .name = m->name};
}

static const size_t req_strs[] = {
    offsetof(proto_load_module_req, sha256),
    offsetof(proto_load_module_req, name),
};

PROTO_UNPACK(load_module_req, load_module_request, .fill = fill_req, PROTO_STRS(req_strs))

int proto_load_module_reply_pack(const proto_load_module_reply *in, proto_bytes *out)
{
    Ferry__LoadModuleReply m = FERRY__LOAD_MODULE_REPLY__INIT;
    m.task_name = proto_str(in->task_name);
    m.n_functions = in->functions ? in->n_functions : 0;
    m.functions = in->functions;
    m.cached = in->cached;
    return proto_pack(&m.base, out);
}

static void fill_reply(void *view, const ProtobufCMessage *msg)
{
    const Ferry__LoadModuleReply *m = (const Ferry__LoadModuleReply *)msg;
    *(proto_load_module_reply *)view = (proto_load_module_reply){
        .task_name = m->task_name,
        .n_functions = m->n_functions,
        .functions = m->functions,
        .cached = m->cached,
    };
}

static const size_t reply_strs[] = {offsetof(proto_load_module_reply, task_name)};

PROTO_UNPACK(load_module_reply, load_module_reply, .fill = fill_reply,
             PROTO_STRS(reply_strs), .list = offsetof(proto_load_module_reply, functions),
             .list_n = offsetof(proto_load_module_reply, n_functions))

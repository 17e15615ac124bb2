/* Reply readers: the head of a successful call, unpacked as its method's
 * reply; the payload handed over without a copy. */
#include "pw_int.h"

/* The head of a call that completed and succeeded, or why there is none. */
static int head_of(const rpc_call *call, const void **buf, size_t *len)
{
    if (!call || !call->done || call->result)
        return FERRY_EINVAL;
    *buf = call->reply.head;
    *len = call->reply.head_len;
    return 0;
}

int pw_ping_result(const rpc_call *call, proto_ping_reply **out)
{
    const void *buf;
    size_t len;
    *out = NULL;
    int rc = head_of(call, &buf, &len);
    return rc ? rc : proto_ping_reply_unpack(buf, len, out);
}

int pw_load_module_result(const rpc_call *call, proto_load_module_reply **out)
{
    const void *buf;
    size_t len;
    *out = NULL;
    int rc = head_of(call, &buf, &len);
    return rc ? rc : proto_load_module_reply_unpack(buf, len, out);
}

int pw_stats_result(const rpc_call *call, proto_stats_reply **out)
{
    const void *buf;
    size_t len;
    *out = NULL;
    int rc = head_of(call, &buf, &len);
    return rc ? rc : proto_stats_reply_unpack(buf, len, out);
}

int pw_rendezvous_result(const rpc_call *call, proto_rendezvous_reply **out)
{
    const void *buf;
    size_t len;
    *out = NULL;
    int rc = head_of(call, &buf, &len);
    return rc ? rc : proto_rendezvous_reply_unpack(buf, len, out);
}

int pw_put_data_result(const rpc_call *call, proto_put_data_reply **out)
{
    const void *buf;
    size_t len;
    *out = NULL;
    int rc = head_of(call, &buf, &len);
    return rc ? rc : proto_put_data_reply_unpack(buf, len, out);
}

void pw_call_result(rpc_call *call, void **out, size_t *len)
{
    size_t n = 0;
    void *p = call && call->done && !call->result ? rpc_msg_take_payload(&call->reply, &n)
                                                  : NULL;
    *out = p;
    *len = p ? n : 0;
}

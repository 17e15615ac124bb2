/* Reply readers: the head of a successful call, unpacked as its method's
 * reply; the payload handed over without a copy. */
#include "pw_int.h"

/* Whether the call completed and succeeded: only then has it a head. */
static int succeeded(const rpc_call *call)
{
    return call && call->done && !call->result ? 0 : FERRY_EINVAL;
}

/* pw_<m>_result(): the head of a succeeded call as a proto_<m>_reply, each
 * with its own typed signature and unpacker, so a reader of the wrong reply
 * does not compile. */
#define PW_REPLY_READER(m)                                                               \
    int pw_##m##_result(const rpc_call *call, proto_##m##_reply **out)                   \
    {                                                                                    \
        *out = NULL;                                                                     \
        int rc = succeeded(call);                                                        \
        return rc ? rc                                                                   \
                  : proto_##m##_reply_unpack(call->reply.head, call->reply.head_len,     \
                                             out);                                       \
    }

PW_REPLY_READER(ping)
PW_REPLY_READER(load_module)
PW_REPLY_READER(stats)
PW_REPLY_READER(rendezvous)
PW_REPLY_READER(put_data)

void pw_call_result(rpc_call *call, void **out, size_t *len)
{
    size_t n = 0;
    void *p = succeeded(call) == 0 ? rpc_msg_take_payload(&call->reply, &n) : NULL;
    *out = p;
    *len = p ? n : 0;
}

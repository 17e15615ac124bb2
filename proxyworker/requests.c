/* The requests: each packs its head with proto/ and starts one unary call.
 * Bulk bytes (module images, call arguments) travel as the rpc payload
 * beside the head, never inside it, copied once by the start (rpc.h): they
 * are the caller's, whose lifetime gRPC does not control, and a master
 * sends them rarely enough that a copy costs nothing worth lending for. */
#include "pw_int.h"

/* Starts `method` with the head that `rc` says was packed into `head`
 * (copied by the start, then freed here) and the payload of `m`. */
static int start(pw *p, rpc_call *call, const char *method, int rc, proto_bytes *head,
                 rpc_msg_out m, int64_t timeout_ms, rpc_call_cb cb)
{
    if (rc)
        return rc;
    m.head_bytes = head->data;
    m.head_len = head->len;
    rc = rpc_call_start(p->ch, call, method, &m, timeout_ms, cb);
    proto_bytes_fini(head);
    return rc;
}

int pw_ping(pw *p, rpc_call *call, uint64_t nonce, int64_t timeout_ms, rpc_call_cb cb)
{
    if (!p)
        return FERRY_EINVAL;
    proto_ping_req req = {.nonce = nonce};
    proto_bytes head;
    return start(p, call, PROTO_METHOD_PING, proto_ping_req_pack(&req, &head), &head,
                 (rpc_msg_out){0}, timeout_ms, cb);
}

int pw_load_module(pw *p, rpc_call *call, const char *sha256, const char *name,
                   const void *bytes, size_t len, int64_t timeout_ms, rpc_call_cb cb)
{
    if (!p || !sha256 || (!bytes && len))
        return FERRY_EINVAL;
    proto_load_module_req req = {.sha256 = (char *)sha256, .name = (char *)name};
    proto_bytes head;
    /* Code and its symbol tables compress well (about 3x for an ELF): AUTO
     * samples first, so an image that does not compress is sent raw. */
    rpc_msg_out m = {.payload = bytes, .payload_len = len, .codec = RPC_CODEC_AUTO};
    return start(p, call, PROTO_METHOD_LOAD_MODULE,
                 proto_load_module_req_pack(&req, &head), &head, m, timeout_ms, cb);
}

int pw_call(pw *p, rpc_call *call, const char *sha256, const char *function,
            int world_size, const void *arg, size_t len, int64_t timeout_ms,
            rpc_call_cb cb)
{
    if (!p || !sha256 || !function || (!arg && len))
        return FERRY_EINVAL;
    proto_call_req req = {.sha256 = (char *)sha256,
                          .function = (char *)function,
                          .rank = p->rank,
                          .world_size = world_size};
    proto_bytes head;
    /* Arguments are tensors as often as not: AUTO gives up on dense floats
     * after a sample and compresses sparse ones. */
    rpc_msg_out m = {.payload = arg, .payload_len = len, .codec = RPC_CODEC_AUTO};
    return start(p, call, PROTO_METHOD_CALL, proto_call_req_pack(&req, &head), &head, m,
                 timeout_ms, cb);
}

int pw_stats(pw *p, rpc_call *call, int64_t timeout_ms, rpc_call_cb cb)
{
    if (!p)
        return FERRY_EINVAL;
    rpc_msg_out m = {0}; /* StatsRequest is empty */
    return rpc_call_start(p->ch, call, PROTO_METHOD_STATS, &m, timeout_ms, cb);
}

int pw_shutdown(pw *p, rpc_call *call, uint32_t grace_ms, int64_t timeout_ms,
                rpc_call_cb cb)
{
    if (!p)
        return FERRY_EINVAL;
    proto_shutdown_req req = {.grace_ms = grace_ms};
    proto_bytes head;
    return start(p, call, PROTO_METHOD_SHUTDOWN, proto_shutdown_req_pack(&req, &head),
                 &head, (rpc_msg_out){0}, timeout_ms, cb);
}

int pw_rendezvous(pw *p, rpc_call *call, int64_t timeout_ms, rpc_call_cb cb)
{
    if (!p)
        return FERRY_EINVAL;
    proto_rendezvous_req req = {.join = false};
    proto_bytes head;
    return start(p, call, PROTO_METHOD_RENDEZVOUS, proto_rendezvous_req_pack(&req, &head),
                 &head, (rpc_msg_out){0}, timeout_ms, cb);
}

int pw_put_data(pw *p, rpc_call *call, const char *sha256, const char *name,
                uint64_t size, uint64_t offset, const void *chunk, size_t len,
                int64_t timeout_ms, rpc_call_cb cb)
{
    if (!p || !sha256 || !name || (!chunk && len))
        return FERRY_EINVAL;
    proto_put_data_req req = {
        .sha256 = (char *)sha256, .name = (char *)name, .size = size, .offset = offset};
    proto_bytes head;
    /* Data files are numbers as often as not: AUTO sends what does not
     * compress raw after a sample. */
    rpc_msg_out m = {.payload = chunk, .payload_len = len, .codec = RPC_CODEC_AUTO};
    return start(p, call, PROTO_METHOD_PUT_DATA, proto_put_data_req_pack(&req, &head),
                 &head, m, timeout_ms, cb);
}

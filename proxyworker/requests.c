/* The requests: each packs its protobuf head and starts one unary call.
 * Bulk bytes (module images, call arguments) travel as the rpc payload
 * beside the head, never inside it, copied once by the start (rpc.h): they
 * are the caller's, whose lifetime gRPC does not control, and a master
 * sends them rarely enough that a copy costs nothing worth lending for. */
#include "pw_int.h"
#include "runtime/runtime.h"

int pw_ping(pw *p, rpc_call *call, uint64_t nonce, int64_t timeout_ms, rpc_call_cb cb)
{
    if (!p)
        return FERRY_EINVAL;
    Ferry__PingRequest req = FERRY__PING_REQUEST__INIT;
    req.nonce = nonce;
    rpc_msg_out m = {.head = &req.base};
    return rpc_call_start(p->ch, call, RT_METHOD_PING, &m, timeout_ms, cb);
}

int pw_load_module(pw *p, rpc_call *call, const char *sha256, const char *name,
                   const void *bytes, size_t len, int64_t timeout_ms, rpc_call_cb cb)
{
    if (!p || !sha256 || (!bytes && len))
        return FERRY_EINVAL;
    Ferry__LoadModuleRequest req = FERRY__LOAD_MODULE_REQUEST__INIT;
    req.sha256 = (char *)sha256;
    req.name = (char *)(name ? name : "");
    /* Code and its symbol tables compress well (about 3x for an ELF): AUTO
     * samples first, so an image that does not compress is sent raw. */
    rpc_msg_out m = {
        .head = &req.base, .payload = bytes, .payload_len = len, .codec = RPC_CODEC_AUTO};
    return rpc_call_start(p->ch, call, RT_METHOD_LOAD_MODULE, &m, timeout_ms, cb);
}

int pw_call(pw *p, rpc_call *call, const char *sha256, const char *function,
            int world_size, const void *arg, size_t len, int64_t timeout_ms,
            rpc_call_cb cb)
{
    if (!p || !sha256 || !function || (!arg && len))
        return FERRY_EINVAL;
    Ferry__CallRequest req = FERRY__CALL_REQUEST__INIT;
    req.sha256 = (char *)sha256;
    req.function = (char *)function;
    req.rank = p->rank;
    req.world_size = world_size;
    /* Arguments are tensors as often as not: AUTO gives up on dense floats
     * after a sample and compresses sparse ones. */
    rpc_msg_out m = {
        .head = &req.base, .payload = arg, .payload_len = len, .codec = RPC_CODEC_AUTO};
    return rpc_call_start(p->ch, call, RT_METHOD_CALL, &m, timeout_ms, cb);
}

int pw_stats(pw *p, rpc_call *call, int64_t timeout_ms, rpc_call_cb cb)
{
    if (!p)
        return FERRY_EINVAL;
    Ferry__StatsRequest req = FERRY__STATS_REQUEST__INIT;
    rpc_msg_out m = {.head = &req.base};
    return rpc_call_start(p->ch, call, RT_METHOD_STATS, &m, timeout_ms, cb);
}

int pw_shutdown(pw *p, rpc_call *call, uint32_t grace_ms, int64_t timeout_ms,
                rpc_call_cb cb)
{
    if (!p)
        return FERRY_EINVAL;
    Ferry__ShutdownRequest req = FERRY__SHUTDOWN_REQUEST__INIT;
    req.grace_ms = grace_ms;
    rpc_msg_out m = {.head = &req.base};
    return rpc_call_start(p->ch, call, RT_METHOD_SHUTDOWN, &m, timeout_ms, cb);
}

/* bench — echo and sink handlers on an rpc_server in a child process. */
#include "ferry_server.h"

#include <grpc/grpc.h>

#include "ferry.pb-c.h"
#include "rpc/rpc.h"
#include "proto/raw.h"

static void echo_handler(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    (void)data;
    rpc_msg_out out = {
        .payload = req->payload,
        .payload_len = req->payload_len,
        .codec = RPC_CODEC_RAW,
    };
    /* On failure rpc has already failed the call for the client. */
    rpc_srv_reply(sc, &out);
}

static void sink_handler(rpc_srv_call *sc, rpc_msg *req, void *data)
{
    (void)data;
    Ferry__PingRequest *in = NULL;
    if (proto_raw_unpack(&ferry__ping_request__descriptor, req->head, req->head_len,
                         (ProtobufCMessage **)&in) != 0) {
        rpc_srv_fail(sc, FERRY_ECORRUPT, "sink: bad head");
        return;
    }
    uint64_t expect = in->nonce;
    protobuf_c_message_free_unpacked(&in->base, NULL);
    size_t got = req->payload_len, wire = req->wire_len;
    /* Back to the pool now: the next transfer reuses this buffer. */
    rpc_msg_fini(req);
    if (got != expect) {
        rpc_srv_fail(sc, FERRY_ECORRUPT, "sink: got %zu payload bytes, expected %llu",
                     got, (unsigned long long)expect);
        return;
    }
    Ferry__PingRequest head = FERRY__PING_REQUEST__INIT;
    head.nonce = wire;
    proto_raw out_head = proto_raw_pack(&head.base);
    rpc_msg_out out = {.head_bytes = out_head.data, .head_len = out_head.len};
    rpc_srv_reply(sc, &out);
}

static int server_main(void *arg)
{
    (void)arg;
    grpc_init();
    static const rpc_method methods[] = {
        {BENCH_ECHO_METHOD, echo_handler, NULL, RPC_METHOD_INLINE, 0},
        {BENCH_SINK_METHOD, sink_handler, NULL, 0, 0},
    };
    rpc_server_opts opts = {.listen = "127.0.0.1:0"};
    rpc_server *s = NULL;
    int err = rpc_server_create(&opts, methods, sizeof methods / sizeof methods[0], &s);
    if (err != 0)
        bench_child_die("rpc_server_create: %s", ferry_strerror(err));
    bench_child_ready(rpc_server_port(s));
    bench_child_wait_stop();
    rpc_server_shutdown(s, 1000);
    rpc_server_destroy(s);
    rpc_buf_trim();
    grpc_shutdown();
    return 0;
}

int bench_ferry_server_start(bench_child *c)
{
    return bench_child_start(c, "ferry", server_main, NULL);
}

/* tests/rpc — the worker's Ping handler through a real call. */
#include "harness.h"
#include "proto/raw.h"

#include <string.h>
#include <unistd.h>

#include <ferry/version.h>

TestSuite(rpc_ping, .init = h_setup_bare, .fini = h_teardown, .timeout = 60);

static Ferry__PingReply *ping(uint64_t nonce)
{
    Ferry__PingRequest req = FERRY__PING_REQUEST__INIT;
    req.nonce = nonce;
    proto_raw out_head = proto_raw_pack(&req.base);
    rpc_msg_out out = {.head_bytes = out_head.data, .head_len = out_head.len};
    rpc_call call = {0};
    h_done d = {0};
    call.data = &d;
    cr_assert(rpc_call_start(H.ch, &call, PROTO_METHOD_PING, &out, H_CALL_TIMEOUT_MS,
                             h_done_cb) == 0);
    cr_assert(h_run_until_flag(&d.done, H_WAIT_MS), "ping never completed");
    cr_assert(call.result == 0, "ping: %s: %s", ferry_err_name(call.result), call.errmsg);
    ProtobufCMessage *m = NULL;
    int rc = proto_raw_unpack(&ferry__ping_reply__descriptor, call.reply.head,
                              call.reply.head_len, &m);
    cr_assert(rc == 0, "reply is not a PingReply: %s", ferry_err_name(rc));
    rpc_call_fini(&call);
    return (Ferry__PingReply *)m;
}

H_TEST(rpc_ping, ping_reply_names_this_process_and_echoes_the_nonce)
{
    h_server_start(0);
    h_channel_open(NULL);
    Ferry__PingReply *r = ping(0xfeedface12345678ull);
    cr_assert(r->pid == getpid(), "pid %d, expected %d", r->pid, getpid());
    cr_assert(r->nonce == 0xfeedface12345678ull, "nonce %llx",
              (unsigned long long)r->nonce);
    cr_assert(r->version && r->version[0], "empty version");
    cr_assert_str_eq(r->version, FERRY_VERSION_STRING);
    cr_assert(r->hostname && r->hostname[0], "empty hostname");
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    cr_assert_str_eq(r->hostname, host);
    cr_assert(r->device && r->device[0], "empty device");
    cr_assert(r->rank == -1, "rank %d without an identity", r->rank);
    cr_assert(r->uptime_s >= 0);
    protobuf_c_message_free_unpacked(&r->base, NULL);
}

H_TEST(rpc_ping, ping_reply_carries_the_identity_rank_and_uptime)
{
    rt_identity id = {.rank = 3, .started = (double)uv_hrtime() / 1e9 - 5.0};
    h_ping_data = &id;
    h_server_start(0);
    h_channel_open(NULL);
    Ferry__PingReply *r = ping(7);
    cr_assert(r->rank == 3, "rank %d", r->rank);
    cr_assert(r->uptime_s >= 4.9 && r->uptime_s < 60, "uptime %f", r->uptime_s);
    cr_assert(r->nonce == 7);
    protobuf_c_message_free_unpacked(&r->base, NULL);
}

H_TEST(rpc_ping, each_ping_echoes_its_own_nonce)
{
    h_server_start(0);
    h_channel_open(NULL);
    for (uint64_t n = 0; n < 5; n++) {
        uint64_t nonce = n * 0x1000000000001ull + 1;
        Ferry__PingReply *r = ping(nonce);
        cr_assert(r->nonce == nonce);
        protobuf_c_message_free_unpacked(&r->base, NULL);
    }
}

H_TEST(rpc_ping, cpu_description_is_a_nonempty_line)
{
    char buf[256];
    memset(buf, 'x', sizeof buf);
    rt_cpu_describe(buf, sizeof buf);
    cr_assert(memchr(buf, 0, sizeof buf) != NULL, "not NUL-terminated");
    cr_assert(buf[0] != 0);
    cr_assert(strchr(buf, '\n') == NULL, "description has a newline: %s", buf);
    char small[8];
    memset(small, 'x', sizeof small);
    rt_cpu_describe(small, sizeof small);
    cr_assert(memchr(small, 0, sizeof small) != NULL, "overran a small buffer");
}

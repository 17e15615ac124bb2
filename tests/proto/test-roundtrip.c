/* tests/proto — each view packed and unpacked gives the same fields, and
 * the bytes are those of the generated message: a view packed is read by
 * protobuf-c, and a message packed by protobuf-c is read as the view. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include <ferry/ferry.h>

#include "ferry.pb-c.h"
#include "proto/proto.h"

/* A name with bytes a log must never see raw, and one of 300 bytes. */
static const char odd[] = "m\x1b[31mod\xc3\xa9\n.so";
static char long_name[301];

static void init_long(void)
{
    memset(long_name, 'x', sizeof long_name - 1);
}

TestSuite(proto_roundtrip, .init = init_long);

Test(proto_roundtrip, ping_request)
{
    proto_ping_req in = {.nonce = UINT64_MAX}, *out;
    proto_bytes b;
    cr_assert_eq(proto_ping_req_pack(&in, &b), 0);
    cr_assert_eq(proto_ping_req_unpack(b.data, b.len, &out), 0);
    cr_assert_eq(out->nonce, UINT64_MAX);
    Ferry__PingRequest *m = ferry__ping_request__unpack(NULL, b.len, b.data);
    cr_assert(m);
    cr_assert_eq(m->nonce, UINT64_MAX);
    ferry__ping_request__free_unpacked(m, NULL);
    proto_free(out);
    proto_bytes_fini(&b);
    cr_assert_null(b.data);
}

Test(proto_roundtrip, ping_reply)
{
    proto_ping_reply in = {.version = "0.1.0",
                           .pid = 4242,
                           .hostname = long_name,
                           .device = "cpu: test (2 cores)",
                           .nonce = 7,
                           .rank = -1,
                           .uptime_s = 12.5,
                           .last_crash = (char *)odd,
                           .crash_id = UINT64_MAX,
                           .restarts = 3,
                           .slots = 8,
                           .busy_slots = 2,
                           .stuck_calls = 1,
                           .oldest_call_s = 61.25},
                     *out;
    proto_bytes b;
    cr_assert_eq(proto_ping_reply_pack(&in, &b), 0);
    cr_assert_eq(proto_ping_reply_unpack(b.data, b.len, &out), 0);
    cr_assert_str_eq(out->version, "0.1.0");
    cr_assert_eq(out->pid, 4242);
    cr_assert_str_eq(out->hostname, long_name);
    cr_assert_str_eq(out->device, "cpu: test (2 cores)");
    cr_assert_eq(out->nonce, 7);
    cr_assert_eq(out->rank, -1);
    cr_assert_eq(out->uptime_s, 12.5);
    cr_assert_str_eq(out->last_crash, odd);
    cr_assert_eq(out->crash_id, UINT64_MAX);
    cr_assert_eq(out->restarts, 3);
    cr_assert_eq(out->slots, 8);
    cr_assert_eq(out->busy_slots, 2);
    cr_assert_eq(out->stuck_calls, 1);
    cr_assert_eq(out->oldest_call_s, 61.25);
    /* The view owns its strings: none points into the packed bytes. */
    cr_assert(out->hostname != in.hostname);
    proto_bytes_fini(&b);
    cr_assert_str_eq(out->hostname, long_name);
    proto_free(out);
}

Test(proto_roundtrip, ping_reply_from_the_generated_message)
{
    Ferry__PingReply m = FERRY__PING_REPLY__INIT;
    m.version = "9.8.7";
    m.pid = 1;
    m.device = "cuda:0 test";
    m.rank = 5;
    m.crash_id = 99;
    m.oldest_call_s = 0.5;
    uint8_t buf[256];
    size_t len = ferry__ping_reply__pack(&m, buf);
    proto_ping_reply *out;
    cr_assert_eq(proto_ping_reply_unpack(buf, len, &out), 0);
    cr_assert_str_eq(out->version, "9.8.7");
    cr_assert_eq(out->pid, 1);
    cr_assert_str_eq(out->device, "cuda:0 test");
    cr_assert_eq(out->rank, 5);
    cr_assert_eq(out->crash_id, 99);
    cr_assert_eq(out->oldest_call_s, 0.5);
    /* Fields the sender left out read as empty strings, never NULL. */
    cr_assert_str_eq(out->hostname, "");
    cr_assert_str_eq(out->last_crash, "");
    proto_free(out);
}

Test(proto_roundtrip, load_module_request)
{
    const char *sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    proto_load_module_req in = {.sha256 = (char *)sha, .name = (char *)odd}, *out;
    proto_bytes b;
    cr_assert_eq(proto_load_module_req_pack(&in, &b), 0);
    cr_assert_eq(proto_load_module_req_unpack(b.data, b.len, &out), 0);
    cr_assert_str_eq(out->sha256, sha);
    cr_assert_str_eq(out->name, odd);
    Ferry__LoadModuleRequest *m = ferry__load_module_request__unpack(NULL, b.len, b.data);
    cr_assert(m);
    cr_assert_str_eq(m->sha256, sha);
    cr_assert_str_eq(m->name, odd);
    ferry__load_module_request__free_unpacked(m, NULL);
    proto_free(out);
    proto_bytes_fini(&b);
}

Test(proto_roundtrip, load_module_request_without_strings)
{
    /* A master may leave the name out: it packs and reads as "". */
    proto_load_module_req in = {0}, *out;
    proto_bytes b;
    cr_assert_eq(proto_load_module_req_pack(&in, &b), 0);
    cr_assert_eq(b.len, 0);
    cr_assert_eq(proto_load_module_req_unpack(b.data, b.len, &out), 0);
    cr_assert_str_eq(out->sha256, "");
    cr_assert_str_eq(out->name, "");
    proto_free(out);
}

Test(proto_roundtrip, load_module_reply)
{
    char *fns[] = {"square", (char *)odd, long_name};
    proto_load_module_reply in = {
        .task_name = "demo", .n_functions = 3, .functions = fns, .cached = true};
    proto_load_module_reply *out;
    proto_bytes b;
    cr_assert_eq(proto_load_module_reply_pack(&in, &b), 0);
    cr_assert_eq(proto_load_module_reply_unpack(b.data, b.len, &out), 0);
    proto_bytes_fini(&b);
    cr_assert_str_eq(out->task_name, "demo");
    cr_assert_eq(out->n_functions, 3);
    for (size_t i = 0; i < 3; i++)
        cr_assert_str_eq(out->functions[i], fns[i]);
    cr_assert(out->cached);
    proto_free(out);
}

Test(proto_roundtrip, load_module_reply_with_no_functions)
{
    proto_load_module_reply in = {.task_name = "empty"}, *out;
    proto_bytes b;
    cr_assert_eq(proto_load_module_reply_pack(&in, &b), 0);
    cr_assert_eq(proto_load_module_reply_unpack(b.data, b.len, &out), 0);
    proto_bytes_fini(&b);
    cr_assert_str_eq(out->task_name, "empty");
    cr_assert_eq(out->n_functions, 0);
    cr_assert_null(out->functions);
    cr_assert_not(out->cached);
    proto_free(out);
}

Test(proto_roundtrip, call_request)
{
    proto_call_req in = {
        .sha256 = "ab", .function = long_name, .rank = 3, .world_size = -1};
    proto_call_req *out;
    proto_bytes b;
    cr_assert_eq(proto_call_req_pack(&in, &b), 0);
    cr_assert_eq(proto_call_req_unpack(b.data, b.len, &out), 0);
    cr_assert_str_eq(out->sha256, "ab");
    cr_assert_str_eq(out->function, long_name);
    cr_assert_eq(out->rank, 3);
    cr_assert_eq(out->world_size, -1);
    Ferry__CallRequest *m = ferry__call_request__unpack(NULL, b.len, b.data);
    cr_assert(m);
    cr_assert_str_eq(m->function, long_name);
    cr_assert_eq(m->rank, 3);
    cr_assert_eq(m->world_size, -1);
    ferry__call_request__free_unpacked(m, NULL);
    proto_free(out);
    proto_bytes_fini(&b);
}

Test(proto_roundtrip, call_reply)
{
    proto_call_reply in = {.elapsed_s = 0.125}, *out;
    proto_bytes b;
    cr_assert_eq(proto_call_reply_pack(&in, &b), 0);
    cr_assert_eq(proto_call_reply_unpack(b.data, b.len, &out), 0);
    cr_assert_eq(out->elapsed_s, 0.125);
    proto_free(out);
    proto_bytes_fini(&b);
}

Test(proto_roundtrip, stats_reply)
{
    proto_stats_reply in = {.calls_served = UINT64_MAX,
                            .in_flight = 4,
                            .modules_loaded = 2,
                            .uptime_s = 3.5,
                            .calls_failed = 9,
                            .restarts = 1,
                            .last_crash = (char *)odd,
                            .slots = 8,
                            .busy_slots = 7,
                            .stuck_calls = 6,
                            .oldest_call_s = 2.25,
                            .oldest_call = "Call spin.so spin",
                            .slot_holders = long_name,
                            .queued_calls = UINT32_MAX},
                      *out;
    proto_bytes b;
    cr_assert_eq(proto_stats_reply_pack(&in, &b), 0);
    cr_assert_eq(proto_stats_reply_unpack(b.data, b.len, &out), 0);
    cr_assert_eq(out->calls_served, UINT64_MAX);
    cr_assert_eq(out->in_flight, 4);
    cr_assert_eq(out->modules_loaded, 2);
    cr_assert_eq(out->uptime_s, 3.5);
    cr_assert_eq(out->calls_failed, 9);
    cr_assert_eq(out->restarts, 1);
    cr_assert_str_eq(out->last_crash, odd);
    cr_assert_eq(out->slots, 8);
    cr_assert_eq(out->busy_slots, 7);
    cr_assert_eq(out->stuck_calls, 6);
    cr_assert_eq(out->oldest_call_s, 2.25);
    cr_assert_str_eq(out->oldest_call, "Call spin.so spin");
    cr_assert_str_eq(out->slot_holders, long_name);
    cr_assert_eq(out->queued_calls, UINT32_MAX);
    Ferry__StatsReply *m = ferry__stats_reply__unpack(NULL, b.len, b.data);
    cr_assert(m);
    cr_assert_str_eq(m->slot_holders, long_name);
    cr_assert_eq(m->queued_calls, UINT32_MAX);
    ferry__stats_reply__free_unpacked(m, NULL);
    proto_free(out);
    proto_bytes_fini(&b);
}

Test(proto_roundtrip, shutdown_request)
{
    proto_shutdown_req in = {.grace_ms = UINT32_MAX}, *out;
    proto_bytes b;
    cr_assert_eq(proto_shutdown_req_pack(&in, &b), 0);
    cr_assert_eq(proto_shutdown_req_unpack(b.data, b.len, &out), 0);
    cr_assert_eq(out->grace_ms, UINT32_MAX);
    proto_free(out);
    proto_bytes_fini(&b);
}

Test(proto_roundtrip, empty_bytes_are_the_empty_message)
{
    /* rpc hands an empty head as no bytes at all, data NULL. */
    proto_shutdown_req *s;
    cr_assert_eq(proto_shutdown_req_unpack(NULL, 0, &s), 0);
    cr_assert_eq(s->grace_ms, 0);
    proto_free(s);
    proto_stats_reply *st;
    cr_assert_eq(proto_stats_reply_unpack(NULL, 0, &st), 0);
    cr_assert_str_eq(st->slot_holders, "");
    proto_free(st);
    proto_free(NULL);
}

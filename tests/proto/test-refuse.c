/* tests/proto — bytes that are not the message are refused, with the
 * FERRY_ECORRUPT that a raw decode gives (the worker turns it into its
 * "<Method>: request is not a <Message>"), and nothing is handed out:
 * a head cut short by one byte, and bytes that are no protobuf at all. */
#include <criterion/criterion.h>
#include <string.h>

#include <ferry/ferry.h>

#include "proto/proto.h"

/* Every unpack, behind one signature, with a full head to cut. */
#define ANY(name, T)                                                                     \
    static int name##_unpack(const void *buf, size_t len, void **out)                    \
    {                                                                                    \
        T *v = (T *)&v; /* not NULL: the unpack must clear it */                         \
        int rc = proto_##name##_unpack(buf, len, &v);                                    \
        *out = v;                                                                        \
        return rc;                                                                       \
    }

ANY(ping_req, proto_ping_req)
ANY(ping_reply, proto_ping_reply)
ANY(load_module_req, proto_load_module_req)
ANY(load_module_reply, proto_load_module_reply)
ANY(call_req, proto_call_req)
ANY(call_reply, proto_call_reply)
ANY(stats_reply, proto_stats_reply)
ANY(shutdown_req, proto_shutdown_req)

typedef struct kind {
    const char *what;
    int (*unpack)(const void *buf, size_t len, void **out);
    proto_bytes full;
} kind;

static kind kinds[8];

/* Each head ends in a field of several bytes (a long varint, a double or a
 * string), so that the last byte cut leaves a field without its end. */
static void pack_all(void)
{
    char *fns[] = {"a", "b"};
    proto_ping_req ping = {.nonce = UINT64_MAX};
    proto_ping_reply pong = {.version = "1", .oldest_call_s = 1.5};
    proto_load_module_req load = {.sha256 = "ab", .name = "m.so"};
    proto_load_module_reply loaded = {.n_functions = 2, .functions = fns, .cached = true};
    proto_call_req call = {.sha256 = "ab", .function = "f", .world_size = -1};
    proto_call_reply called = {.elapsed_s = 0.5};
    proto_stats_reply stats = {.calls_served = 1, .queued_calls = UINT32_MAX};
    proto_shutdown_req shut = {.grace_ms = UINT32_MAX};
    kinds[0] = (kind){.what = "PingRequest", .unpack = ping_req_unpack};
    cr_assert_eq(proto_ping_req_pack(&ping, &kinds[0].full), 0);
    kinds[1] = (kind){.what = "PingReply", .unpack = ping_reply_unpack};
    cr_assert_eq(proto_ping_reply_pack(&pong, &kinds[1].full), 0);
    kinds[2] = (kind){.what = "LoadModuleRequest", .unpack = load_module_req_unpack};
    cr_assert_eq(proto_load_module_req_pack(&load, &kinds[2].full), 0);
    kinds[3] = (kind){.what = "LoadModuleReply", .unpack = load_module_reply_unpack};
    cr_assert_eq(proto_load_module_reply_pack(&loaded, &kinds[3].full), 0);
    kinds[4] = (kind){.what = "CallRequest", .unpack = call_req_unpack};
    cr_assert_eq(proto_call_req_pack(&call, &kinds[4].full), 0);
    kinds[5] = (kind){.what = "CallReply", .unpack = call_reply_unpack};
    cr_assert_eq(proto_call_reply_pack(&called, &kinds[5].full), 0);
    kinds[6] = (kind){.what = "StatsReply", .unpack = stats_reply_unpack};
    cr_assert_eq(proto_stats_reply_pack(&stats, &kinds[6].full), 0);
    kinds[7] = (kind){.what = "ShutdownRequest", .unpack = shutdown_req_unpack};
    cr_assert_eq(proto_shutdown_req_pack(&shut, &kinds[7].full), 0);
}

static void free_all(void)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        proto_bytes_fini(&kinds[i].full);
}

TestSuite(proto_refuse, .init = pack_all, .fini = free_all);

Test(proto_refuse, a_head_cut_short_is_refused)
{
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        kind *k = &kinds[i];
        cr_assert_gt(k->full.len, 1, "%s packed to %zu bytes", k->what, k->full.len);
        void *v;
        /* The whole head reads; one byte less does not. */
        cr_assert_eq(k->unpack(k->full.data, k->full.len, &v), 0, "%s", k->what);
        proto_free(v);
        int rc = k->unpack(k->full.data, k->full.len - 1, &v);
        cr_assert_eq(rc, FERRY_ECORRUPT, "%s cut short: %d", k->what, rc);
        cr_assert_null(v, "%s cut short handed out a view", k->what);
    }
}

Test(proto_refuse, bytes_that_are_no_protobuf_are_refused)
{
    static const uint8_t garbage[][12] = {
        {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
        {0x08, 0x80}, /* a varint that never ends */
        {0x00, 0x01}, /* field number 0 */
    };
    static const size_t lens[] = {12, 2, 2};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        for (size_t g = 0; g < sizeof lens / sizeof lens[0]; g++) {
            void *v;
            int rc = kinds[i].unpack(garbage[g], lens[g], &v);
            cr_assert_eq(rc, FERRY_ECORRUPT, "%s from garbage %zu: %d", kinds[i].what, g,
                         rc);
            cr_assert_null(v);
        }
    }
}

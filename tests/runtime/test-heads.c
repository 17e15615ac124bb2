/* tests/runtime — a request whose head is not its method's message is
 * refused by the worker, before anything else reads it, with the method's
 * own sentence: what proto/ refuses reaches the caller as FERRY_EINVAL. */
#include "rth.h"

#include <string.h>

#include "proto/proto.h"

TestSuite(rt_heads, .init = rth_setup, .fini = rth_teardown, .timeout = 60);

/* Sends `len` bytes of `head` to `method` and expects the refusal `text`. */
static void refused(rpc_channel *ch, const char *method, const void *head, size_t len,
                    const char *text)
{
    rpc_msg_out out = {.head_bytes = head, .head_len = len};
    rpc_call c = {0};
    cr_assert(rpc_call_start(ch, &c, method, &out, RTH_CALL_TIMEOUT, NULL) == 0);
    int rc = rpc_call_wait(&c);
    cr_assert(rc == FERRY_EINVAL, "%s: %s: %s", method, ferry_err_name(rc),
              c.errmsg ? c.errmsg : "");
    cr_assert(c.errmsg && strstr(c.errmsg, text), "%s: '%s'", method, c.errmsg);
    rpc_call_fini(&c);
}

/* Heads that rpc's framing lets through (every field is whole) but whose
 * first field has the wrong wire type for the method's message: a varint
 * where LoadModule's sha256 is a string, a string where Ping's nonce and
 * Shutdown's grace_ms are varints. */
static const uint8_t varint_1[] = {1 << 3 | 0, 1};
static const uint8_t string_1[] = {1 << 3 | 2, 1, 'x'};

RTH_TEST(rt_heads, a_load_module_head_of_another_shape_loads_nothing)
{
    refused(R.ch, PROTO_METHOD_LOAD_MODULE, varint_1, sizeof varint_1,
            "LoadModule: request is not a LoadModuleRequest");
    proto_stats_reply *s = rth_stats(R.ch);
    cr_assert(s->modules_loaded == 0);
    proto_free(s);
}

RTH_TEST(rt_heads, heads_of_another_shape_are_refused_with_each_methods_own_sentence)
{
    refused(R.ch_none, PROTO_METHOD_PING, string_1, sizeof string_1,
            "Ping: request is not a PingRequest");
    refused(R.ch, PROTO_METHOD_SHUTDOWN, string_1, sizeof string_1,
            "Shutdown: request is not a ShutdownRequest");
    /* A refused Shutdown stops nothing. */
    cr_assert(rth_ping(R.ch, NULL) == 0);
}

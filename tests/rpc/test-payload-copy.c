/* tests/rpc — the payload rule at the codec: a payload without
 * payload_free is copied when the message is encoded, and one with it is
 * lent, released exactly once when the last reference to the message goes. */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_int.h"

TestSuite(rpc_payload_rule, .init = h_setup_grpc, .fini = h_teardown, .timeout = 60);

#define LEN ((size_t)1 << 20) /* above the small-message copy */

static uint8_t *decoded(grpc_byte_buffer *bb)
{
    rpc_msg m;
    char err[256];
    int rc = rpc_codec_decode(bb, RPC_DEFAULT_MAX_PAYLOAD, &m, err, sizeof err);
    cr_assert(rc == 0, "decode: %s", err);
    cr_assert(m.payload_len == LEN);
    size_t len;
    uint8_t *p = rpc_msg_take_payload(&m, &len);
    rpc_msg_fini(&m);
    return p;
}

H_TEST(rpc_payload_rule, a_payload_without_payload_free_is_copied_at_encoding)
{
    uint8_t *src = malloc(LEN), *want = malloc(LEN);
    cr_assert(src && want);
    h_fill_random(src, LEN, 5);
    memcpy(want, src, LEN);
    rpc_msg_out out = {.payload = src, .payload_len = LEN, .codec = RPC_CODEC_RAW};
    grpc_byte_buffer *bb = NULL;
    cr_assert(rpc_codec_encode(&out, RPC_DEFAULT_MAX_PAYLOAD, &bb) == 0);
    memset(src, 0xee, LEN);
    free(src); /* the caller's at once */
    uint8_t *got = decoded(bb);
    cr_assert(memcmp(got, want, LEN) == 0, "the message changed with the caller's bytes");
    rpc_buf_free(got);
    grpc_byte_buffer_destroy(bb);
    free(want);
}

static atomic_int releases;

static void count_release(void *payload, void *arg)
{
    cr_assert(payload == arg);
    atomic_fetch_add(&releases, 1);
}

H_TEST(rpc_payload_rule, a_lent_payload_is_released_once_with_the_last_reference)
{
    uint8_t *src = malloc(LEN);
    cr_assert(src);
    h_fill_random(src, LEN, 6);
    atomic_store(&releases, 0);
    rpc_msg_out out = {.payload = src,
                       .payload_len = LEN,
                       .codec = RPC_CODEC_RAW,
                       .payload_free = count_release,
                       .free_arg = src};
    grpc_byte_buffer *bb = NULL;
    cr_assert(rpc_codec_encode(&out, RPC_DEFAULT_MAX_PAYLOAD, &bb) == 0);
    /* Another holder of the message, as gRPC's transport can be. */
    grpc_byte_buffer *held = grpc_byte_buffer_copy(bb);
    grpc_byte_buffer_destroy(bb);
    cr_assert(atomic_load(&releases) == 0, "released while a reference was held");
    uint8_t *got = decoded(held);
    cr_assert(memcmp(got, src, LEN) == 0);
    rpc_buf_free(got);
    grpc_byte_buffer_destroy(held);
    cr_assert(atomic_load(&releases) == 1, "released %d times", atomic_load(&releases));
    free(src);
}

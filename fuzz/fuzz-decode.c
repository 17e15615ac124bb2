/* A libFuzzer target for what a worker does with a request's bytes before
 * (and after) the token: the payload codec's decoder (raw and lz4 payloads,
 * fields in any order, split across gRPC slices at any point), then
 * protobuf-c's unpack of every request message the worker serves, and
 * proto's views of those the worker reads through them.
 *
 * The first input byte chooses where the message is cut into slices; the
 * rest is the message. Build and run: see fuzz/README. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ferry.pb-c.h"
#include "proto/proto.h"
#include "rpc/rpc_int.h"
#include "proto/raw.h"

/* Small, so that a declared 1 GiB is refused as it would be over any limit,
 * without the fuzzer spending its time in page faults. */
#define LIMIT ((size_t)1 << 20)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    grpc_init();
    return 0;
}

static const ProtobufCMessageDescriptor *const requests[] = {
    &ferry__ping_request__descriptor,     &ferry__load_module_request__descriptor,
    &ferry__call_request__descriptor,     &ferry__stats_request__descriptor,
    &ferry__shutdown_request__descriptor, &ferry__reduce_chunk_request__descriptor,
};

static void decode(grpc_byte_buffer *bb, size_t defer_above)
{
    rpc_msg m;
    char err[256];
    int rc = rpc_codec_decode_capped(bb, LIMIT, defer_above, &m, err, sizeof err);
    if (rc == RPC_DECODE_DEFER) {
        if (defer_above == SIZE_MAX)
            abort(); /* deferring is only for a cap */
        return;
    }
    if (rc != 0) {
        if (rc != FERRY_ECORRUPT && rc != FERRY_EMSGSIZE && rc != FERRY_ENOMEM)
            abort(); /* an error the server would not map */
        if (!memchr(err, '\0', sizeof err) || !err[0])
            abort(); /* every failure says why */
        return;
    }
    if (m.payload_len > LIMIT || (m.payload_len && !m.payload) ||
        (m.payload_len > defer_above && defer_above != SIZE_MAX))
        abort();
    if (m.payload_len) /* every byte was written: reads are defined */
        ((volatile uint8_t *)m.payload)[m.payload_len - 1];
    for (size_t i = 0; i < sizeof requests / sizeof requests[0]; i++) {
        ProtobufCMessage *msg;
        if (proto_raw_unpack(requests[i], m.head, m.head_len, &msg) == 0)
            protobuf_c_message_free_unpacked(msg, NULL);
    }
    proto_ping_req *ping;
    proto_load_module_req *load;
    proto_call_req *call;
    proto_shutdown_req *shut;
    if (proto_ping_req_unpack(m.head, m.head_len, &ping) == 0)
        proto_free(ping);
    if (proto_load_module_req_unpack(m.head, m.head_len, &load) == 0)
        proto_free(load);
    if (proto_call_req_unpack(m.head, m.head_len, &call) == 0)
        proto_free(call);
    if (proto_shutdown_req_unpack(m.head, m.head_len, &shut) == 0)
        proto_free(shut);
    rpc_msg_fini(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t cut = data[0] ? data[0] : size; /* slice length; 0: one slice */
    data++;
    size--;
    grpc_slice slices[64];
    size_t n = 0, at = 0;
    while (at < size && n < 63) {
        size_t len = size - at < cut ? size - at : cut;
        slices[n++] = grpc_slice_from_copied_buffer((const char *)data + at, len);
        at += len;
    }
    if (at < size)
        slices[n++] = grpc_slice_from_copied_buffer((const char *)data + at, size - at);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(slices, n);
    for (size_t i = 0; i < n; i++)
        grpc_slice_unref(slices[i]);
    decode(bb, SIZE_MAX);
    decode(bb, RPC_INLINE_DECODE_MAX); /* the completion-queue thread's try */
    grpc_byte_buffer_destroy(bb);
    return 0;
}

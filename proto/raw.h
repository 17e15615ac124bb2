/* proto — generated messages as raw heads, for the code that must craft
 * what a view cannot say: tests of malformed or hostile messages, fuzzers,
 * benchmarks that measure the encoding itself. Product code speaks through
 * proto.h's views; this header is the one way around them.
 *
 * A packed head goes into an rpc_msg_out as its head_bytes and head_len,
 * which the start (or reply) copies; a received head is decoded with
 * proto_raw_unpack(). */
#ifndef FERRY_PROTO_RAW_H
#define FERRY_PROTO_RAW_H

#include <stdlib.h>

#include <ferry/error.h>

#include "ferry.pb-c.h"

/* Room for any head a test crafts: the largest real one is a few hundred
 * bytes. */
#define PROTO_RAW_MAX 4096

/* A packed head, held by value: nothing to free. */
typedef struct proto_raw {
    uint8_t data[PROTO_RAW_MAX];
    size_t len;
} proto_raw;

/* Packs `m` (NULL: the empty message); aborts if it does not fit (a
 * test's own mistake). */
static inline proto_raw proto_raw_pack(const ProtobufCMessage *m)
{
    proto_raw r;
    r.len = m ? protobuf_c_message_get_packed_size(m) : 0;
    if (!m)
        return r;
    if (r.len > sizeof r.data)
        abort();
    protobuf_c_message_pack(m, r.data);
    return r;
}

/* Decodes `len` bytes at `buf` (a received rpc_msg's head and head_len) as
 * a `desc` message, freed with protobuf_c_message_free_unpacked(*out,
 * NULL). Returns 0, or FERRY_ECORRUPT for bytes that are not one. */
static inline int proto_raw_unpack(const ProtobufCMessageDescriptor *desc,
                                   const void *buf, size_t len, ProtobufCMessage **out)
{
    static const uint8_t empty[1];
    *out = protobuf_c_message_unpack(desc, NULL, len, buf ? buf : empty);
    return *out ? 0 : FERRY_ECORRUPT;
}

#endif

/* proto — private header shared by the files of this folder: the generated
 * protobuf-c code, and the one way every view is made from a message. */
#ifndef FERRY_PROTO_INT_H
#define FERRY_PROTO_INT_H

#include <stddef.h>

#include <ferry/ferry.h>

#include "ferry.pb-c.h"
#include "proto.h"

/* Copies the decoded message's fields into a view; strings may still point
 * into the message (proto_view_from copies them). */
typedef void (*proto_fill_fn)(void *view, const ProtobufCMessage *m);

/* How one message becomes its view. */
typedef struct proto_view_desc {
    const ProtobufCMessageDescriptor *msg;
    size_t size; /* the view's */
    proto_fill_fn fill;
    const size_t *strs; /* offsets of the view's char * fields */
    size_t n_strs;
    /* A repeated string field: the offset of its char ** and of its count
     * (a size_t), or list_n == 0 when the view has none. */
    size_t list, list_n;
} proto_view_desc;

/* The view of the decoded message `m`, in one allocation with its strings
 * (NULL ones become ""). Returns 0 or FERRY_ENOMEM. */
int proto_view_from(const proto_view_desc *d, const ProtobufCMessage *m, void **out);

/* Decodes `len` bytes as d->msg and makes its view. Returns 0,
 * FERRY_ECORRUPT for bytes that are not that message, or FERRY_ENOMEM. */
int proto_view_unpack(const proto_view_desc *d, const void *buf, size_t len, void **out);

/* A view's string fields, for a proto_view_desc: an array of offsets. */
#define PROTO_STRS(offs) .strs = (offs), .n_strs = sizeof(offs) / sizeof((offs)[0])

/* Defines proto_<view>_unpack() for the view type proto_<view>, made from
 * the message ferry__<message> by the proto_view_desc fields that follow. */
#define PROTO_UNPACK(view, message, ...)                                                 \
    static const proto_view_desc view##_desc = {.msg = &ferry__##message##__descriptor,  \
                                                .size = sizeof(proto_##view),            \
                                                __VA_ARGS__};                            \
    int proto_##view##_unpack(const void *buf, size_t len, proto_##view **out)           \
    {                                                                                    \
        return proto_view_unpack(&view##_desc, buf, len, (void **)out);                  \
    }

/* Packs `m` into out->data (malloc'd). Returns 0 or FERRY_ENOMEM. */
int proto_pack(const ProtobufCMessage *m, proto_bytes *out);

/* A view's string as a message field: NULL becomes "". */
static inline char *proto_str(const char *s)
{
    return (char *)(s ? s : "");
}

#endif

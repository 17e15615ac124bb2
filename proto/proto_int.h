/* proto — private header shared by the files of this folder: the generated
 * protobuf-c code, and the one way every view is packed and made from a
 * message. */
#ifndef FERRY_PROTO_INT_H
#define FERRY_PROTO_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ferry/ferry.h>

#include "ferry.pb-c.h"
#include "proto.h"

/* One member of a view and the message's field of the same name. The field's
 * type and its place in the message come from protobuf-c's descriptor, so
 * that copying needs nothing more. */
typedef struct proto_field {
    const char *name;
    size_t off;   /* the member's place in the view */
    size_t size;  /* and its size */
    size_t n_off; /* a repeated field: its count's place, else PROTO_NO_COUNT */
} proto_field;

#define PROTO_NO_COUNT SIZE_MAX

/* How one message becomes its view and back. */
typedef struct proto_view_desc {
    const ProtobufCMessageDescriptor *msg;
    size_t size; /* the view's */
    const proto_field *fields;
    size_t n_fields;
} proto_view_desc;

/* How a view's member holds its message field. */
typedef enum proto_kind {
    PROTO_KIND_NUMBER,   /* the same bits: an integer, a float or a double */
    PROTO_KIND_BOOL,     /* bool in the view, protobuf_c_boolean in the message */
    PROTO_KIND_STRING,   /* char *; never NULL in a message, nor in an unpacked view */
    PROTO_KIND_BYTES,    /* proto_blob in the view, ProtobufCBinaryData in the message */
    PROTO_KIND_LIST,     /* char ** and its size_t count */
    PROTO_KIND_NUMBERS,  /* an array of numbers and its count */
    PROTO_KIND_MESSAGES, /* an array of the nested message's views and its count */
} proto_kind;

/* The view of a message nested in others (a repeated field of that type), or
 * NULL when it has none. A nested view holds numbers, bools and strings only. */
const struct proto_view_desc *proto_nested_view(const ProtobufCMessageDescriptor *msg);

/* The message field that `f` names and how the view holds it. Returns 0, or
 * FERRY_EINVAL when the message has no such field or the view's member
 * cannot hold it (a view that does not match ferry.proto). */
int proto_field_find(const proto_view_desc *d, const proto_field *f,
                     const ProtobufCFieldDescriptor **fd, proto_kind *kind);

/* Calls fn(f, fd, kind, arg) for each field of d with the message field it
 * names, until one returns nonzero. Returns that, 0, or FERRY_EINVAL as
 * proto_field_find() for a field that does not match. */
typedef int (*proto_field_fn)(const proto_field *f, const ProtobufCFieldDescriptor *fd,
                              proto_kind kind, void *arg);
int proto_fields_each(const proto_view_desc *d, proto_field_fn fn, void *arg);

/* Copies every field of `view` into the message `m` (the strings and arrays
 * are shared, NULL strings become ""; message lists are left to the caller,
 * who must make their messages), or of `m` into `view` (strings and arrays
 * still point into the message; a message list's member holds the message's
 * array of messages, not views). Returns 0 or FERRY_EINVAL as
 * proto_field_find(). */
int proto_fields_to_msg(const proto_view_desc *d, const void *view, ProtobufCMessage *m);
int proto_fields_to_view(const proto_view_desc *d, const ProtobufCMessage *m, void *view);

/* The view of the decoded message `m`, in one allocation with its strings
 * (NULL ones become ""). Returns 0, FERRY_ENOMEM or FERRY_EINVAL. */
int proto_view_from(const proto_view_desc *d, const ProtobufCMessage *m, void **out);

/* Decodes `len` bytes as d->msg and makes its view. Returns 0,
 * FERRY_ECORRUPT for bytes that are not that message, or FERRY_ENOMEM. */
int proto_view_unpack(const proto_view_desc *d, const void *buf, size_t len, void **out);

/* Packs the view `in` as d->msg into out->data (malloc'd). Returns 0,
 * FERRY_ENOMEM or FERRY_EINVAL. */
int proto_view_pack(const proto_view_desc *d, const void *in, proto_bytes *out);

/* A view's string as a message field: NULL becomes "". */
static inline char *proto_str(const char *s)
{
    return (char *)(s ? s : "");
}

/* A proto_field for each entry of a view's field list (proto.h), in a scope
 * where proto_this names the view's type. A repeated field's size is its
 * element's. */
#define PROTO_FIELD(type, name)                                                          \
    {#name, offsetof(proto_this, name), sizeof(((proto_this *)0)->name), PROTO_NO_COUNT},
#define PROTO_LIST_FIELD(name)                                                           \
    {#name, offsetof(proto_this, name), sizeof(((proto_this *)0)->name),                 \
     offsetof(proto_this, n_##name)},
#define PROTO_REP_FIELD(type, name)                                                      \
    {#name, offsetof(proto_this, name), sizeof(type), offsetof(proto_this, n_##name)},

/* The descriptor of the view type proto_<view> whose proto_fields ENTRIES
 * are, for the message ferry__<message>. */
#define PROTO_VIEW_DESC(view, message, ENTRIES)                                          \
    static const proto_view_desc *view##_desc(void)                                      \
    {                                                                                    \
        typedef proto_##view proto_this;                                                 \
        static const proto_field fields[] = {ENTRIES};                                   \
        static const proto_view_desc d = {.msg = &ferry__##message##__descriptor,        \
                                          .size = sizeof(proto_this),                    \
                                          .fields = fields,                              \
                                          .n_fields = sizeof fields / sizeof fields[0]}; \
        return &d;                                                                       \
    }

/* Defines proto_<view>_pack() and proto_<view>_unpack() for the view type
 * proto_<view>, with the descriptor <view>_desc(). */
#define PROTO_VIEW_FNS(view)                                                             \
    int proto_##view##_pack(const proto_##view *in, proto_bytes *out)                    \
    {                                                                                    \
        return proto_view_pack(view##_desc(), in, out);                                  \
    }                                                                                    \
    int proto_##view##_unpack(const void *buf, size_t len, proto_##view **out)           \
    {                                                                                    \
        return proto_view_unpack(view##_desc(), buf, len, (void **)out);                 \
    }

/* The view proto_<view> of ferry__<message>, whose fields FIELDS(F, LIST)
 * lists; PROTO_REP_VIEW for a list FIELDS(F, LIST, REP) that has repeated
 * numbers or messages. */
#define PROTO_VIEW(view, message, FIELDS)                                                \
    PROTO_VIEW_DESC(view, message, FIELDS(PROTO_FIELD, PROTO_LIST_FIELD))                \
    PROTO_VIEW_FNS(view)
#define PROTO_REP_VIEW(view, message, FIELDS)                                            \
    PROTO_VIEW_DESC(view, message,                                                       \
                    FIELDS(PROTO_FIELD, PROTO_LIST_FIELD, PROTO_REP_FIELD))              \
    PROTO_VIEW_FNS(view)

/* The option fields of a TrainBegin (train_spec.h's table) set from `s`
 * in `a`, which the caller initialised (the PEERS ones only when `peers`:
 * a run of more than one rank), borrowing its strings; and read back, the
 * LOCAL ones at their defaults, borrowing `a`'s. */
struct proto_train_spec;
void proto_train_spec_pack(const struct proto_train_spec *s, bool peers,
                           Ferry__TrainBegin *a);
void proto_train_spec_unpack(const Ferry__TrainBegin *a, struct proto_train_spec *s);

#endif

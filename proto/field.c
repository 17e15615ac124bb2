/* One view member and its message field, matched by name: protobuf-c's
 * descriptor says where the message holds the field and of what type, so
 * one copy serves every message and a view's fields are written once. */
#include <stdbool.h>
#include <string.h>

#include "proto_int.h"

/* The size a message gives a field of type `t` that a view holds as the same
 * bits, or 0 for a type no view holds that way. */
static size_t number_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_ENUM:
        return 4;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    default:
        return 0;
    }
}

static proto_kind kind_of(const ProtobufCFieldDescriptor *fd, const proto_field *f,
                          bool *ok)
{
    bool list = fd->label == PROTOBUF_C_LABEL_REPEATED;
    *ok = list == (f->n_off != PROTO_NO_COUNT) &&
          (list || fd->label == PROTOBUF_C_LABEL_NONE);
    if (fd->type == PROTOBUF_C_TYPE_STRING) {
        *ok = *ok && f->size == sizeof(char *);
        return list ? PROTO_KIND_LIST : PROTO_KIND_STRING;
    }
    if (fd->type == PROTOBUF_C_TYPE_BYTES) {
        *ok = *ok && !list && f->size == sizeof(proto_blob);
        return PROTO_KIND_BYTES;
    }
    if (fd->type == PROTOBUF_C_TYPE_MESSAGE) {
        const proto_view_desc *sub = proto_nested_view(fd->descriptor);
        *ok = *ok && list && sub && f->size == sub->size;
        return PROTO_KIND_MESSAGES;
    }
    if (fd->type == PROTOBUF_C_TYPE_BOOL) {
        *ok = *ok && !list && f->size == sizeof(bool);
        return PROTO_KIND_BOOL;
    }
    *ok = *ok && f->size == number_size(fd->type);
    return list ? PROTO_KIND_NUMBERS : PROTO_KIND_NUMBER;
}

int proto_field_find(const proto_view_desc *d, const proto_field *f,
                     const ProtobufCFieldDescriptor **fd, proto_kind *kind)
{
    bool ok = false;
    *fd = protobuf_c_message_descriptor_get_field_by_name(d->msg, f->name);
    if (*fd)
        *kind = kind_of(*fd, f, &ok);
    return ok ? 0 : FERRY_EINVAL;
}

/* Where `base` holds something `off` bytes in. */
static void *at(const void *base, size_t off)
{
    return (char *)base + off;
}

int proto_fields_each(const proto_view_desc *d, proto_field_fn fn, void *arg)
{
    for (size_t i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *fd;
        proto_kind kind;
        if (proto_field_find(d, &d->fields[i], &fd, &kind))
            return FERRY_EINVAL;
        int rc = fn(&d->fields[i], fd, kind, arg);
        if (rc)
            return rc;
    }
    return 0;
}

/* A view and its message, copied one way or the other. */
typedef struct pair {
    void *view, *m;
} pair;

static int to_msg(const proto_field *f, const ProtobufCFieldDescriptor *fd,
                  proto_kind kind, void *arg)
{
    void *view = ((pair *)arg)->view, *m = ((pair *)arg)->m;
    void *to = at(m, fd->offset);
    const void *from = at(view, f->off);
    if (kind == PROTO_KIND_NUMBER) {
        memcpy(to, from, f->size);
    } else if (kind == PROTO_KIND_BOOL) {
        *(protobuf_c_boolean *)to = *(const bool *)from;
    } else if (kind == PROTO_KIND_STRING) {
        *(char **)to = proto_str(*(char *const *)from);
    } else if (kind == PROTO_KIND_BYTES) {
        const proto_blob *b = from;
        *(ProtobufCBinaryData *)to =
            (ProtobufCBinaryData){.len = b->data ? b->len : 0, .data = b->data};
    } else if (kind != PROTO_KIND_MESSAGES) {
        void *list = *(void *const *)from;
        *(size_t *)at(m, fd->quantifier_offset) =
            list ? *(const size_t *)at(view, f->n_off) : 0;
        *(void **)to = list;
    }
    return 0;
}

static int to_view(const proto_field *f, const ProtobufCFieldDescriptor *fd,
                   proto_kind kind, void *arg)
{
    void *view = ((pair *)arg)->view, *m = ((pair *)arg)->m;
    void *to = at(view, f->off);
    const void *from = at(m, fd->offset);
    const ProtobufCBinaryData *b = from;
    if (kind == PROTO_KIND_BOOL)
        *(bool *)to = *(const protobuf_c_boolean *)from != 0;
    else if (kind == PROTO_KIND_BYTES)
        *(proto_blob *)to = (proto_blob){.data = b->data, .len = b->len};
    else if (kind == PROTO_KIND_NUMBER || kind == PROTO_KIND_STRING)
        memcpy(to, from, f->size);
    else
        memcpy(to, from, sizeof(void *));
    if (f->n_off != PROTO_NO_COUNT)
        *(size_t *)at(view, f->n_off) = *(const size_t *)at(m, fd->quantifier_offset);
    return 0;
}

int proto_fields_to_msg(const proto_view_desc *d, const void *view, ProtobufCMessage *m)
{
    return proto_fields_each(d, to_msg, &(pair){(void *)view, m});
}

int proto_fields_to_view(const proto_view_desc *d, const ProtobufCMessage *m, void *view)
{
    return proto_fields_each(d, to_view, &(pair){view, (void *)m});
}

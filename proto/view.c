/* Views and packed heads: the two shapes a message takes outside proto/.
 *
 * A view and its strings share one allocation, so that whoever keeps a
 * reply (the cluster keeps every worker's last Ping and Stats) frees it
 * with one call and never holds the decoder's memory. */
#include <stdlib.h>
#include <string.h>

#include "proto_int.h"

void proto_bytes_fini(proto_bytes *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
}

void proto_free(void *view)
{
    free(view);
}

int proto_view_pack(const proto_view_desc *d, const void *in, proto_bytes *out)
{
    out->data = NULL;
    out->len = 0;
    /* The largest message is a few hundred bytes: room for any of them. */
    _Alignas(max_align_t) char buf[512];
    ProtobufCMessage *m = (ProtobufCMessage *)buf;
    if (d->msg->sizeof_message > sizeof buf)
        return FERRY_EINVAL;
    protobuf_c_message_init(d->msg, m);
    int rc = proto_fields_to_msg(d, in, m);
    if (rc)
        return rc;
    out->len = protobuf_c_message_get_packed_size(m);
    if (!out->len)
        return 0;
    if (!(out->data = malloc(out->len))) {
        out->len = 0;
        return FERRY_ENOMEM;
    }
    protobuf_c_message_pack(m, out->data);
    return 0;
}

static void *member(void *view, size_t off)
{
    return (char *)view + off;
}

/* Appends `s` at *at and returns where it landed. */
static char *put(char **at, const char *s)
{
    size_t n = strlen(s) + 1;
    char *dst = memcpy(*at, s, n);
    *at += n;
    return dst;
}

/* Walks the strings of `view`, whose own still point elsewhere: counts the
 * bytes they need and the lists' entries, or, with `v` (a copy of the view
 * that ends with room for them), copies them there, lists' entries first. */
static void strings(const proto_view_desc *d, void *view, size_t *bytes, size_t *ptrs,
                    char *v)
{
    char **slot = v ? (char **)(v + d->size) : NULL;
    char *at = v ? v + d->size + *ptrs * sizeof(char *) : NULL;
    for (size_t i = 0; i < d->n_fields; i++) {
        const proto_field *f = &d->fields[i];
        const ProtobufCFieldDescriptor *fd;
        proto_kind kind;
        if (proto_field_find(d, f, &fd, &kind))
            continue; /* proto_fields_to_view() refused it already */
        if (kind == PROTO_KIND_STRING) {
            const char *s = proto_str(*(char **)member(view, f->off));
            if (v)
                *(char **)member(v, f->off) = put(&at, s);
            *bytes += strlen(s) + 1;
        } else if (kind == PROTO_KIND_LIST) {
            size_t n = *(size_t *)member(view, f->n_off);
            char **list = *(char ***)member(view, f->off);
            for (size_t j = 0; j < n; j++) {
                if (v)
                    slot[j] = put(&at, proto_str(list[j]));
                *bytes += strlen(proto_str(list[j])) + 1;
            }
            if (v)
                *(char ***)member(v, f->off) = n ? slot : NULL;
            slot = v ? slot + n : NULL;
            *ptrs += v ? 0 : n;
        }
    }
}

int proto_view_from(const proto_view_desc *d, const ProtobufCMessage *m, void **out)
{
    *out = NULL;
    /* The largest view is a few hundred bytes: room for any of them. */
    _Alignas(max_align_t) char tmpl[512];
    if (d->size > sizeof tmpl)
        return FERRY_EINVAL;
    memset(tmpl, 0, d->size);
    int rc = proto_fields_to_view(d, m, tmpl);
    if (rc)
        return rc;
    size_t bytes = 0, ptrs = 0;
    strings(d, tmpl, &bytes, &ptrs, NULL);
    char *v = malloc(d->size + ptrs * sizeof(char *) + bytes);
    if (!v)
        return FERRY_ENOMEM;
    memcpy(v, tmpl, d->size);
    strings(d, tmpl, &bytes, &ptrs, v);
    *out = v;
    return 0;
}

int proto_view_unpack(const proto_view_desc *d, const void *buf, size_t len, void **out)
{
    *out = NULL;
    static const uint8_t empty[1];
    ProtobufCMessage *m = protobuf_c_message_unpack(d->msg, NULL, len, buf ? buf : empty);
    if (!m)
        return FERRY_ECORRUPT;
    int rc = proto_view_from(d, m, out);
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

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

/* Where a view's strings go: first only counted (at == NULL), then copied
 * behind the view in its allocation, the lists' entries first. */
typedef struct arena {
    char **slot; /* the next list entry */
    char *at;    /* the next string */
    size_t ptrs, bytes;
} arena;

/* Counts `s` (NULL is "") and copies it when the arena has room; returns the
 * copy, or NULL while counting. */
static char *keep(arena *a, const char *s)
{
    s = proto_str(s);
    size_t n = strlen(s) + 1;
    a->bytes += n;
    if (!a->at)
        return NULL;
    char *dst = memcpy(a->at, s, n);
    a->at += n;
    return dst;
}

/* Keeps the strings of the view `src`, whose own still point into the
 * message, and points `dst` (the view's copy, or NULL while counting) at the
 * kept ones. */
static void keep_strings(const proto_view_desc *d, const char *src, char *dst, arena *a)
{
    for (size_t i = 0; i < d->n_fields; i++) {
        const proto_field *f = &d->fields[i];
        const ProtobufCFieldDescriptor *fd;
        proto_kind kind;
        if (proto_field_find(d, f, &fd, &kind))
            continue; /* proto_fields_to_view() refused it already */
        if (kind == PROTO_KIND_STRING) {
            char *s = keep(a, *(char *const *)(src + f->off));
            if (dst)
                *(char **)(dst + f->off) = s;
        } else if (kind == PROTO_KIND_LIST) {
            size_t n = *(const size_t *)(src + f->n_off);
            char **list = *(char **const *)(src + f->off), **copy = a->slot;
            for (size_t j = 0; j < n; j++) {
                char *s = keep(a, list[j]);
                if (copy)
                    copy[j] = s;
            }
            a->ptrs += n;
            if (dst)
                *(char ***)(dst + f->off) = n ? copy : NULL;
            if (copy)
                a->slot += n;
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
    arena count = {0};
    keep_strings(d, tmpl, NULL, &count);
    size_t lists = count.ptrs * sizeof(char *);
    char *v = malloc(d->size + lists + count.bytes);
    if (!v)
        return FERRY_ENOMEM;
    memcpy(v, tmpl, d->size);
    arena put = {.slot = (char **)(v + d->size), .at = v + d->size + lists};
    keep_strings(d, tmpl, v, &put);
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

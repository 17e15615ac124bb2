/* Views and packed heads: the two shapes a message takes outside proto/.
 *
 * A view, its arrays and its strings share one allocation, so that whoever keeps a
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

/* Message lists packed at most in one view. */
#define MAX_NESTED 4

/* The message lists' messages made for packing a view: one block a list,
 * freed by the caller. */
typedef struct nested {
    const char *in; /* the view */
    ProtobufCMessage *m;
    void *blocks[MAX_NESTED];
    size_t n;
} nested;

/* Makes the messages of a message list of the view for its message. */
static int make_nested(const proto_field *f, const ProtobufCFieldDescriptor *fd,
                       proto_kind kind, void *arg)
{
    nested *ns = arg;
    const char *views =
        kind == PROTO_KIND_MESSAGES ? *(const char *const *)(ns->in + f->off) : NULL;
    if (!views)
        return 0;
    const proto_view_desc *sub = proto_nested_view(fd->descriptor);
    size_t n = *(const size_t *)(ns->in + f->n_off), each = sub->msg->sizeof_message;
    if (ns->n == MAX_NESTED)
        return FERRY_EINVAL;
    char *block = malloc(n * (sizeof(void *) + each) + 1);
    if (!block)
        return FERRY_ENOMEM;
    ns->blocks[ns->n++] = block;
    ProtobufCMessage **ptrs = (ProtobufCMessage **)block;
    for (size_t j = 0; j < n; j++) {
        ptrs[j] = (ProtobufCMessage *)(block + n * sizeof(void *) + j * each);
        protobuf_c_message_init(sub->msg, ptrs[j]);
        int rc = proto_fields_to_msg(sub, views + j * sub->size, ptrs[j]);
        if (rc)
            return rc;
    }
    *(size_t *)((char *)ns->m + fd->quantifier_offset) = n;
    *(ProtobufCMessage ***)((char *)ns->m + fd->offset) = ptrs;
    return 0;
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
    nested ns = {.in = in, .m = m};
    int rc = proto_fields_to_msg(d, in, m);
    if (rc == 0)
        rc = proto_fields_each(d, make_nested, &ns);
    if (rc == 0)
        out->len = protobuf_c_message_get_packed_size(m);
    if (out->len && !(out->data = malloc(out->len))) {
        out->len = 0;
        rc = FERRY_ENOMEM;
    }
    if (out->data)
        protobuf_c_message_pack(m, out->data);
    for (size_t i = 0; i < ns.n; i++)
        free(ns.blocks[i]);
    return rc;
}

/* Where a view's arrays and strings go: first only counted (at == NULL),
 * then copied behind the view in its allocation, the arrays first. */
typedef struct arena {
    char *blk; /* the next array */
    char *at;  /* the next string */
    size_t blocks, bytes;
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

/* Room for an array of `len` bytes, aligned as any member; NULL while
 * counting. */
static void *take(arena *a, size_t len)
{
    len =
        (len + _Alignof(max_align_t) - 1) / _Alignof(max_align_t) * _Alignof(max_align_t);
    a->blocks += len;
    if (!a->at)
        return NULL;
    void *p = a->blk;
    a->blk += len;
    return p;
}

static int keep_fields(const proto_view_desc *d, const char *src, char *dst, arena *a);

/* Makes the views of a message list's `n` messages `msgs` in the arena (at
 * `views`, or nowhere while counting). */
static int keep_nested(const proto_view_desc *sub, ProtobufCMessage *const *msgs,
                       size_t n, char *views, arena *a)
{
    _Alignas(max_align_t) char tmpl[512];
    if (sub->size > sizeof tmpl)
        return FERRY_EINVAL;
    for (size_t j = 0; j < n; j++) {
        memset(tmpl, 0, sub->size);
        char *v = views ? views + j * sub->size : NULL;
        int rc = proto_fields_to_view(sub, msgs[j], tmpl);
        if (rc == 0 && v)
            memcpy(v, tmpl, sub->size);
        if (rc == 0)
            rc = keep_fields(sub, tmpl, v, a);
        if (rc)
            return rc;
    }
    return 0;
}

/* A view whose strings and arrays still point into the message, and its
 * copy that points at the kept ones (NULL while counting). */
typedef struct keeping {
    const char *src;
    char *dst;
    arena *a;
} keeping;

/* A bytes field's bytes, kept in the arena like an array. */
static int keep_blob(const keeping *k, const proto_field *f)
{
    const proto_blob *b = (const proto_blob *)(k->src + f->off);
    uint8_t *copy = take(k->a, b->len);
    if (copy && b->len)
        memcpy(copy, b->data, b->len);
    if (k->dst)
        *(proto_blob *)(k->dst + f->off) =
            (proto_blob){.data = b->len ? copy : NULL, .len = b->len};
    return 0;
}

static int keep_field(const proto_field *f, const ProtobufCFieldDescriptor *fd,
                      proto_kind kind, void *arg)
{
    const keeping *k = arg;
    if (kind == PROTO_KIND_NUMBER || kind == PROTO_KIND_BOOL)
        return 0;
    if (kind == PROTO_KIND_BYTES)
        return keep_blob(k, f);
    const void *from = *(void *const *)(k->src + f->off);
    char *copy;
    int rc = 0;
    if (kind == PROTO_KIND_STRING) {
        copy = keep(k->a, from);
    } else {
        size_t n = *(const size_t *)(k->src + f->n_off);
        copy = take(k->a, n * (kind == PROTO_KIND_LIST ? sizeof(char *) : f->size));
        if (kind == PROTO_KIND_LIST) {
            for (size_t j = 0; j < n; j++) {
                char *s = keep(k->a, ((char *const *)from)[j]);
                if (copy)
                    ((char **)copy)[j] = s;
            }
        } else if (kind == PROTO_KIND_NUMBERS) {
            if (copy && n)
                memcpy(copy, from, n * f->size);
        } else {
            rc = keep_nested(proto_nested_view(fd->descriptor), from, n, copy, k->a);
        }
        copy = n ? copy : NULL;
    }
    if (k->dst)
        *(char **)(k->dst + f->off) = copy;
    return rc;
}

/* Keeps the strings and arrays of the view `src` and points `dst` at them. */
static int keep_fields(const proto_view_desc *d, const char *src, char *dst, arena *a)
{
    return proto_fields_each(d, keep_field, &(keeping){src, dst, a});
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
    arena count = {0};
    if (rc == 0)
        rc = keep_fields(d, tmpl, NULL, &count);
    if (rc)
        return rc;
    size_t head = (d->size + _Alignof(max_align_t) - 1) / _Alignof(max_align_t) *
                  _Alignof(max_align_t);
    char *v = malloc(head + count.blocks + count.bytes);
    if (!v)
        return FERRY_ENOMEM;
    memcpy(v, tmpl, d->size);
    arena put = {.blk = v + head, .at = v + head + count.blocks};
    rc = keep_fields(d, tmpl, v, &put);
    if (rc) {
        free(v);
        return rc;
    }
    *out = v;
    return 0;
}

/* Wipes a decoded message's bytes field: the only ones views hold are a
 * session's secret, which must not linger in freed memory. */
static int wipe_bytes(const proto_field *f, const ProtobufCFieldDescriptor *fd,
                      proto_kind kind, void *m)
{
    (void)f;
    const ProtobufCBinaryData *b = (const ProtobufCBinaryData *)((char *)m + fd->offset);
    if (kind == PROTO_KIND_BYTES && b->len)
        explicit_bzero(b->data, b->len);
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
    proto_fields_each(d, wipe_bytes, m);
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
}

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

int proto_pack(const ProtobufCMessage *m, proto_bytes *out)
{
    out->data = NULL;
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

static char **field(void *view, size_t off)
{
    return (char **)((char *)view + off);
}

/* Appends `s` at *at and returns where it landed. */
static char *put(char **at, const char *s)
{
    size_t n = strlen(s) + 1;
    char *dst = memcpy(*at, s, n);
    *at += n;
    return dst;
}

int proto_view_from(const proto_view_desc *d, const ProtobufCMessage *m, void **out)
{
    *out = NULL;
    /* The largest view is a few hundred bytes: room for any of them. */
    _Alignas(max_align_t) char tmpl[512];
    if (d->size > sizeof tmpl)
        return FERRY_EINVAL;
    memset(tmpl, 0, d->size);
    d->fill(tmpl, m);
    size_t n_list = d->list_n ? *(size_t *)(tmpl + d->list_n) : 0;
    char **list = d->list_n ? *(char ***)(tmpl + d->list) : NULL;
    size_t need = d->size + n_list * sizeof(char *);
    for (size_t i = 0; i < d->n_strs; i++)
        need += strlen(proto_str(*field(tmpl, d->strs[i]))) + 1;
    for (size_t i = 0; i < n_list; i++)
        need += strlen(proto_str(list[i])) + 1;
    char *v = malloc(need);
    if (!v)
        return FERRY_ENOMEM;
    memcpy(v, tmpl, d->size);
    char *at = v + d->size + n_list * sizeof(char *);
    for (size_t i = 0; i < d->n_strs; i++)
        *field(v, d->strs[i]) = put(&at, proto_str(*field(tmpl, d->strs[i])));
    if (d->list_n) {
        char **copy = (char **)(v + d->size);
        for (size_t i = 0; i < n_list; i++)
            copy[i] = put(&at, proto_str(list[i]));
        *(char ***)(v + d->list) = n_list ? copy : NULL;
    }
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

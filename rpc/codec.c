/* The payload codec: how bulk bytes ride inside a protobuf message.
 *
 * On the wire a ferry message is ordinary protobuf, written in this order:
 *
 *   field 14 PayloadInfo {codec, raw_size}   (only when there is a payload)
 *   field 15 bytes payload                   (raw, or one LZ4 frame)
 *   the method's other fields                (packed by protobuf-c)
 *
 * Writing the payload first lets the receiver stream it straight out of
 * gRPC's slices into one pooled buffer, decompressing on the fly, instead of
 * flattening the message and letting protobuf-c copy the bytes field a
 * second time. The sender hands a lent payload to gRPC without a copy, and
 * copies any other (rpc.h, rpc_msg_out). Other
 * clients may write fields in any order: the decoder walks whatever comes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>
#include <lz4frame.h>

#include "ferry.pb-c.h"
#include "rpc_int.h"

#define FIELD_INFO    14
#define FIELD_PAYLOAD 15
#define WT_VARINT     0
#define WT_I64        1
#define WT_LEN        2
#define WT_I32        5
#define AUTO_SAMPLE   (64 << 10)
#define AUTO_MIN      4096      /* smaller payloads are never worth compressing */
#define SMALL_COPY    (8 << 10) /* raw payloads up to this are copied into one slice */

/* ---- encoding ---------------------------------------------------------- */

typedef struct owned_payload {
    rpc_free_fn fn;
    void *arg;
    void *payload;
} owned_payload;

static void owned_payload_free(void *p)
{
    owned_payload *o = p;
    o->fn(o->payload, o->arg);
    free(o);
}

/* AUTO: compress a sample; lz4 only if it saves at least a fifth. */
static rpc_codec choose_codec(const void *payload, size_t len)
{
    if (len < AUTO_MIN)
        return RPC_CODEC_RAW;
    int n = len < AUTO_SAMPLE ? (int)len : AUTO_SAMPLE;
    int cap = LZ4_compressBound(n);
    char *tmp = malloc((size_t)cap);
    if (!tmp)
        return RPC_CODEC_RAW;
    int c = LZ4_compress_default(payload, tmp, n, cap);
    free(tmp);
    return c > 0 && c < n - n / 5 ? RPC_CODEC_LZ4 : RPC_CODEC_RAW;
}

static int lz4_compress(const void *src, size_t len, grpc_slice *out)
{
    LZ4F_preferences_t prefs = {
        .frameInfo = {.blockSizeID = LZ4F_max1MB,
                      .contentChecksumFlag = LZ4F_contentChecksumEnabled,
                      .contentSize = len},
    };
    size_t cap = LZ4F_compressFrameBound(len, &prefs);
    void *dst = rpc_buf_alloc(cap);
    if (!dst)
        return FERRY_ENOMEM;
    size_t n = LZ4F_compressFrame(dst, cap, src, len, &prefs);
    if (LZ4F_isError(n)) {
        rpc_buf_free(dst);
        return FERRY_EINTERNAL;
    }
    *out = grpc_slice_new(dst, n, rpc_buf_free);
    return 0;
}

/* The payload as gRPC will hold it: lent bytes wrapped as they are, to be
 * released by gRPC's last unref of the slice; anything else copied into a
 * pooled buffer, which that unref hands back to the pool. gRPC can keep a
 * slice after the call has completed, so no slice may point at bytes that
 * gRPC does not keep alive itself. */
static grpc_slice payload_slice(const rpc_msg_out *m, int *err)
{
    *err = 0;
    if (m->payload_free) {
        owned_payload *o = malloc(sizeof *o);
        if (!o) {
            *err = FERRY_ENOMEM;
            return grpc_empty_slice();
        }
        *o = (owned_payload){m->payload_free, m->free_arg, (void *)m->payload};
        return grpc_slice_new_with_user_data((void *)m->payload, m->payload_len,
                                             owned_payload_free, o);
    }
    void *copy = rpc_buf_alloc(m->payload_len);
    if (!copy) {
        *err = FERRY_ENOMEM;
        return grpc_empty_slice();
    }
    memcpy(copy, m->payload, m->payload_len);
    return grpc_slice_new(copy, m->payload_len, rpc_buf_free);
}

/* field 14 (PayloadInfo) and the header of field 15; returns its length */
static size_t put_payload_prefix(uint8_t *buf, rpc_codec codec, size_t raw_len,
                                 size_t wire_len)
{
    Ferry__PayloadInfo info = FERRY__PAYLOAD_INFO__INIT;
    info.codec =
        codec == RPC_CODEC_LZ4 ? FERRY__CODEC__CODEC_LZ4 : FERRY__CODEC__CODEC_RAW;
    info.raw_size = raw_len;
    size_t p = 0;
    buf[p++] = FIELD_INFO << 3 | WT_LEN;
    p += rpc_varint_put(buf + p, ferry__payload_info__get_packed_size(&info));
    p += ferry__payload_info__pack(&info, buf + p);
    buf[p++] = FIELD_PAYLOAD << 3 | WT_LEN;
    p += rpc_varint_put(buf + p, wire_len);
    return p;
}

static size_t head_size(const rpc_msg_out *m)
{
    return m->head_len;
}

static void put_head(const rpc_msg_out *m, uint8_t *dst)
{
    if (m->head_len)
        memcpy(dst, m->head_bytes, m->head_len);
}

/* A small message is built as one slice: copying a few KiB costs less than
 * the allocations of a multi-slice buffer, on both ends. */
static grpc_byte_buffer *encode_small(const rpc_msg_out *m)
{
    uint8_t prefix[64];
    size_t p = m->payload_len ? put_payload_prefix(prefix, RPC_CODEC_RAW, m->payload_len,
                                                   m->payload_len)
                              : 0;
    size_t h = head_size(m);
    grpc_slice s = grpc_slice_malloc(p + m->payload_len + h);
    uint8_t *d = GRPC_SLICE_START_PTR(s);
    memcpy(d, prefix, p);
    if (m->payload_len)
        memcpy(d + p, m->payload, m->payload_len);
    put_head(m, d + p + m->payload_len);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    if (m->payload_free && m->payload) /* copied: ownership ends here */
        m->payload_free((void *)m->payload, m->free_arg);
    return bb;
}

int rpc_codec_encode(const rpc_msg_out *m, size_t max_payload, grpc_byte_buffer **out)
{
    if ((m->payload_len && !m->payload) || (m->head_len && !m->head_bytes))
        return FERRY_EINVAL;
    if (m->payload_len > max_payload)
        return FERRY_EMSGSIZE;

    rpc_codec codec = m->codec;
    if (codec == RPC_CODEC_AUTO)
        codec = choose_codec(m->payload, m->payload_len);
    if (m->payload_len == 0 || (codec == RPC_CODEC_RAW && m->payload_len <= SMALL_COPY)) {
        *out = encode_small(m);
        return 0;
    }

    grpc_slice body;
    int err;
    if (codec == RPC_CODEC_LZ4) {
        err = lz4_compress(m->payload, m->payload_len, &body);
        if (err)
            return err;
        /* Data that does not compress goes raw: the receiver then skips a
         * pointless decode and the sender a copy. */
        if (GRPC_SLICE_LENGTH(body) >= m->payload_len - m->payload_len / 32) {
            grpc_slice_unref(body);
            codec = RPC_CODEC_RAW;
        }
    }
    if (codec != RPC_CODEC_LZ4) {
        body = payload_slice(m, &err);
        if (err)
            return err;
    }

    grpc_slice slices[3];
    size_t n = 0;
    uint8_t prefix[64];
    size_t p = put_payload_prefix(prefix, codec, m->payload_len, GRPC_SLICE_LENGTH(body));
    slices[n++] = grpc_slice_from_copied_buffer((const char *)prefix, p);
    slices[n++] = body;
    /* lz4 replaced the caller's bytes by a copy: hand them back now. */
    if (codec == RPC_CODEC_LZ4 && m->payload_free)
        m->payload_free((void *)m->payload, m->free_arg);
    size_t h = head_size(m);
    if (h) {
        slices[n] = grpc_slice_malloc(h);
        put_head(m, GRPC_SLICE_START_PTR(slices[n]));
        n++;
    }
    *out = grpc_raw_byte_buffer_create(slices, n);
    for (size_t i = 0; i < n; i++)
        grpc_slice_unref(slices[i]);
    return 0;
}

/* ---- decoding ---------------------------------------------------------- */

typedef struct decoder {
    rpc_wire_reader w;
    size_t max_payload;
    size_t defer_above; /* a payload declared larger: RPC_DECODE_DEFER */
    bool runs;          /* leave a raw payload in the buffer, as runs */
    uint8_t *head;
    size_t head_len, head_cap;
    bool has_info, has_payload;
    rpc_codec codec;
    uint64_t raw_size;
    char *err;
    size_t errlen;
} decoder;

#define FAIL(d, code, ...)                                                               \
    do {                                                                                 \
        snprintf((d)->err, (d)->errlen, __VA_ARGS__);                                    \
        return (code);                                                                   \
    } while (0)

static int head_put(decoder *d, const void *src, size_t n, rpc_wire_reader *from)
{
    if (d->head_len + n > d->head_cap) {
        size_t cap = d->head_cap ? d->head_cap : 256;
        while (cap < d->head_len + n)
            cap *= 2;
        uint8_t *h = realloc(d->head, cap);
        if (!h)
            FAIL(d, FERRY_ENOMEM, "out of memory for a %zu-byte message head", cap);
        d->head = h;
        d->head_cap = cap;
    }
    if (from) {
        if (rpc_wire_read(from, d->head + d->head_len, n))
            FAIL(d, FERRY_ECORRUPT, "message truncated inside a field");
    } else {
        memcpy(d->head + d->head_len, src, n);
    }
    d->head_len += n;
    return 0;
}

static int read_info(decoder *d, uint64_t len)
{
    uint8_t buf[64];
    if (d->has_payload)
        FAIL(d, FERRY_ECORRUPT, "payload_info after the payload");
    if (len > sizeof buf)
        FAIL(d, FERRY_ECORRUPT, "payload_info of %llu bytes", (unsigned long long)len);
    if (rpc_wire_read(&d->w, buf, len))
        FAIL(d, FERRY_ECORRUPT, "message truncated in payload_info");
    Ferry__PayloadInfo *info = ferry__payload_info__unpack(NULL, len, buf);
    if (!info)
        FAIL(d, FERRY_ECORRUPT, "payload_info is not valid protobuf");
    int codec = info->codec;
    d->raw_size = info->raw_size;
    ferry__payload_info__free_unpacked(info, NULL);
    if (codec != FERRY__CODEC__CODEC_RAW && codec != FERRY__CODEC__CODEC_LZ4)
        FAIL(d, FERRY_ECORRUPT, "unknown payload codec %d", codec);
    d->codec = codec == FERRY__CODEC__CODEC_LZ4 ? RPC_CODEC_LZ4 : RPC_CODEC_RAW;
    d->has_info = true;
    return 0;
}

static int read_lz4(decoder *d, uint8_t *dst, uint64_t wire_len)
{
    LZ4F_dctx *dctx;
    if (LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION)))
        FAIL(d, FERRY_ENOMEM, "cannot create an lz4 context");
    size_t produced = 0, hint = 1;
    int rc = 0;
    while (wire_len && rc == 0) {
        const uint8_t *run;
        size_t n = rpc_wire_next_run(&d->w, wire_len, &run);
        if (!n) {
            rc = FERRY_ECORRUPT;
            snprintf(d->err, d->errlen, "message truncated in the lz4 payload");
            break;
        }
        wire_len -= n;
        while (n) {
            size_t src_n = n, dst_n = d->raw_size - produced;
            hint = LZ4F_decompress(dctx, dst + produced, &dst_n, run, &src_n, NULL);
            if (LZ4F_isError(hint)) {
                rc = FERRY_ECORRUPT;
                snprintf(d->err, d->errlen, "corrupt lz4 payload: %s",
                         LZ4F_getErrorName(hint));
                break;
            }
            if (src_n == 0 && dst_n == 0) {
                rc = FERRY_ECORRUPT;
                snprintf(d->err, d->errlen,
                         "lz4 payload decodes past its declared %llu bytes",
                         (unsigned long long)d->raw_size);
                break;
            }
            produced += dst_n;
            run += src_n;
            n -= src_n;
        }
    }
    LZ4F_freeDecompressionContext(dctx);
    if (rc == 0 && hint != 0) {
        rc = FERRY_ECORRUPT;
        snprintf(d->err, d->errlen, "lz4 payload ends mid-frame");
    }
    if (rc == 0 && produced != d->raw_size) {
        rc = FERRY_ECORRUPT;
        snprintf(d->err, d->errlen, "lz4 payload decodes to %zu bytes, %llu declared",
                 produced, (unsigned long long)d->raw_size);
    }
    return rc;
}

/* Records where a raw payload's bytes lie in the message's slices. */
static int read_runs(decoder *d, uint64_t wire_len, rpc_msg *out)
{
    size_t cap = 0, n = 0;
    rpc_run *runs = NULL;
    out->wire_len = wire_len;
    out->payload_len = wire_len;
    out->codec = RPC_CODEC_RAW;
    while (wire_len) {
        const uint8_t *run;
        size_t got = rpc_wire_next_run(&d->w, wire_len, &run);
        if (!got) {
            free(runs);
            FAIL(d, FERRY_ECORRUPT, "message truncated in the payload");
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            rpc_run *r = realloc(runs, cap * sizeof *r);
            if (!r) {
                free(runs);
                FAIL(d, FERRY_ENOMEM, "out of memory for a payload's %zu runs", cap);
            }
            runs = r;
        }
        runs[n++] = (rpc_run){run, got};
        wire_len -= got;
    }
    out->runs = runs;
    out->n_runs = n;
    return 0;
}

static int read_payload(decoder *d, uint64_t wire_len, rpc_msg *out)
{
    if (d->has_payload)
        FAIL(d, FERRY_ECORRUPT, "two payload fields");
    d->has_payload = true;
    if (wire_len > d->w.left)
        FAIL(d, FERRY_ECORRUPT, "payload of %llu bytes but only %zu left in the message",
             (unsigned long long)wire_len, d->w.left);
    if (!d->has_info) {
        d->codec = RPC_CODEC_RAW;
        d->raw_size = wire_len;
    }
    if (d->codec == RPC_CODEC_RAW && d->raw_size != wire_len)
        FAIL(d, FERRY_ECORRUPT, "raw payload of %llu bytes declares %llu",
             (unsigned long long)wire_len, (unsigned long long)d->raw_size);
    if (d->raw_size > d->max_payload)
        FAIL(d, FERRY_EMSGSIZE, "payload of %llu bytes is over the limit of %zu",
             (unsigned long long)d->raw_size, d->max_payload);
    if (d->runs && d->codec == RPC_CODEC_RAW)
        return read_runs(d, wire_len, out);
    if (d->raw_size > d->defer_above)
        return RPC_DECODE_DEFER; /* nothing allocated yet */

    uint8_t *dst = rpc_buf_alloc(d->raw_size);
    if (!dst)
        FAIL(d, FERRY_ENOMEM, "out of memory for a %llu-byte payload",
             (unsigned long long)d->raw_size);
    int rc;
    if (d->codec == RPC_CODEC_LZ4) {
        rc = read_lz4(d, dst, wire_len);
    } else {
        rc = rpc_wire_read(&d->w, dst, wire_len);
        if (rc)
            snprintf(d->err, d->errlen, "message truncated in the payload");
    }
    if (rc) {
        rpc_buf_free(dst);
        return rc;
    }
    out->payload = dst;
    out->payload_len = d->raw_size;
    out->codec = d->codec;
    out->wire_len = wire_len;
    return 0;
}

/* Copies one field that is not ours into the head, tag included. */
static int copy_field(decoder *d, uint64_t tag)
{
    uint8_t buf[20];
    size_t n = rpc_varint_put(buf, tag);
    uint64_t v;
    switch (tag & 7) {
    case WT_VARINT:
        if (rpc_wire_read_varint(&d->w, &v))
            FAIL(d, FERRY_ECORRUPT, "bad varint in field %llu",
                 (unsigned long long)(tag >> 3));
        n += rpc_varint_put(buf + n, v);
        return head_put(d, buf, n, NULL);
    case WT_I64:
    case WT_I32: {
        int rc = head_put(d, buf, n, NULL);
        return rc ? rc : head_put(d, NULL, (tag & 7) == WT_I64 ? 8 : 4, &d->w);
    }
    case WT_LEN: {
        if (rpc_wire_read_varint(&d->w, &v) || v > d->w.left)
            FAIL(d, FERRY_ECORRUPT, "field %llu overruns the message",
                 (unsigned long long)(tag >> 3));
        n += rpc_varint_put(buf + n, v);
        int rc = head_put(d, buf, n, NULL);
        return rc ? rc : head_put(d, NULL, v, &d->w);
    }
    default:
        FAIL(d, FERRY_ECORRUPT, "unsupported wire type %d in field %llu", (int)(tag & 7),
             (unsigned long long)(tag >> 3));
    }
}

int rpc_codec_decode(grpc_byte_buffer *bb, size_t max_payload, rpc_msg *out, char *err,
                     size_t errlen)
{
    return rpc_codec_decode_capped(bb, max_payload, SIZE_MAX, out, err, errlen);
}

int rpc_codec_decode_capped(grpc_byte_buffer *bb, size_t max_payload, size_t defer_above,
                            rpc_msg *out, char *err, size_t errlen)
{
    return rpc_codec_decode_runs(bb, max_payload, defer_above, false, out, err, errlen);
}

int rpc_codec_decode_runs(grpc_byte_buffer *bb, size_t max_payload, size_t defer_above,
                          bool runs, rpc_msg *out, char *err, size_t errlen)
{
    /* Runs point into the buffer's own slices: only a plain one has them. */
    if (bb->type != GRPC_BB_RAW || bb->data.raw.compression != GRPC_COMPRESS_NONE)
        runs = false;
    decoder d = {.max_payload = max_payload,
                 .defer_above = defer_above,
                 .runs = runs,
                 .err = err,
                 .errlen = errlen};
    int rc;

    memset(out, 0, sizeof *out);
    if (errlen)
        err[0] = '\0';
    /* (With runs, the size of the message says nothing: only what an lz4
     * payload would decode to counts.) */
    if (!runs && defer_above != SIZE_MAX && grpc_byte_buffer_length(bb) > defer_above)
        return RPC_DECODE_DEFER;
    rc = rpc_wire_reader_init(&d.w, bb);
    if (rc) {
        snprintf(err, errlen, "unreadable message buffer");
        return rc;
    }
    while (rc == 0 && d.w.left) {
        uint64_t tag, len;
        if (rpc_wire_read_varint(&d.w, &tag) || (tag >> 3) == 0 ||
            (tag >> 3) > 0x1fffffff) {
            snprintf(err, errlen, "bad field tag");
            rc = FERRY_ECORRUPT;
        } else if ((tag >> 3) == FIELD_INFO || (tag >> 3) == FIELD_PAYLOAD) {
            if ((tag & 7) != WT_LEN || rpc_wire_read_varint(&d.w, &len)) {
                snprintf(err, errlen, "bad payload field header");
                rc = FERRY_ECORRUPT;
            } else if ((tag >> 3) == FIELD_INFO) {
                rc = read_info(&d, len);
            } else {
                rc = read_payload(&d, len, out);
            }
        } else {
            rc = copy_field(&d, tag);
        }
    }
    rpc_wire_reader_fini(&d.w);
    if (rc == 0 && d.has_info && !d.has_payload && d.raw_size != 0) {
        snprintf(err, errlen, "payload_info declares %llu bytes but no payload follows",
                 (unsigned long long)d.raw_size);
        rc = FERRY_ECORRUPT;
    }
    if (rc) {
        free(d.head);
        rpc_msg_fini(out);
        return rc;
    }
    out->head = d.head;
    out->head_len = d.head_len;
    if (out->runs)
        out->bb = bb;
    return 0;
}

/* ---- received messages ------------------------------------------------- */

void *rpc_msg_take_payload(rpc_msg *m, size_t *len)
{
    void *p = m->payload;
    if (len)
        *len = m->payload_len;
    m->payload = NULL;
    m->payload_len = 0;
    return p;
}

void rpc_msg_take_runs(rpc_msg *m, rpc_payload *out)
{
    memset(out, 0, sizeof *out);
    out->len = m->payload_len;
    if (m->runs) {
        out->runs = out->own_runs = m->runs;
        out->n_runs = m->n_runs;
        out->bb = m->bb;
        m->runs = NULL;
        m->n_runs = 0;
        m->bb = NULL;
    } else if (m->payload) {
        out->one = (rpc_run){m->payload, m->payload_len};
        out->runs = &out->one;
        out->n_runs = 1;
        out->buf = m->payload;
        m->payload = NULL;
    }
    m->payload_len = 0;
}

void rpc_payload_fini(rpc_payload *p)
{
    if (!p)
        return;
    free(p->own_runs);
    rpc_buf_free(p->buf);
    if (p->bb)
        grpc_byte_buffer_destroy(p->bb);
    memset(p, 0, sizeof *p);
}

void rpc_msg_fini(rpc_msg *m)
{
    free(m->head);
    free(m->runs);
    if (m->bb)
        grpc_byte_buffer_destroy(m->bb);
    rpc_buf_free(m->payload);
    memset(m, 0, sizeof *m);
}

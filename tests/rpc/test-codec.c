/* tests/rpc — the payload codec on grpc_byte_buffers: round trips, the wire
 * format, limits, and broken input (truncated, flipped, oversized, garbage).
 * Broken buffers are made by encoding, flattening to bytes, editing, and
 * wrapping the bytes again. Each test initialises gRPC itself (Criterion
 * forks each test: never in a constructor). */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

#include <lz4frame.h>

#include "rpc/rpc_int.h"
#include "proto/raw.h"

TestSuite(rpc_codec, .init = h_setup_grpc, .fini = h_teardown, .timeout = 120);

#define FIELD_PAYLOAD_INFO 14
#define FIELD_PAYLOAD      15

/* ---- byte buffers ------------------------------------------------------- */

static grpc_byte_buffer *encode_ok(const rpc_msg_out *m, size_t max)
{
    grpc_byte_buffer *bb = NULL;
    int rc = rpc_codec_encode(m, max, &bb);
    cr_assert(rc == 0, "rpc_codec_encode: %s", ferry_err_name(rc));
    cr_assert(bb != NULL);
    return bb;
}

/* Copies the bytes of bb into one malloc'd block, and destroys bb. */
static uint8_t *flatten(grpc_byte_buffer *bb, size_t *len)
{
    grpc_byte_buffer_reader r;
    cr_assert(grpc_byte_buffer_reader_init(&r, bb) != 0);
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    grpc_byte_buffer_destroy(bb);
    *len = GRPC_SLICE_LENGTH(s);
    uint8_t *p = malloc(*len ? *len : 1);
    memcpy(p, GRPC_SLICE_START_PTR(s), *len);
    grpc_slice_unref(s);
    return p;
}

/* Wraps bytes in a byte buffer of slices of at most `chunk` bytes (0: one). */
static grpc_byte_buffer *wrap_chunks(const uint8_t *p, size_t len, size_t chunk)
{
    if (chunk == 0 || chunk > len)
        chunk = len ? len : 1;
    size_t n = len ? (len + chunk - 1) / chunk : 0;
    grpc_slice *s = calloc(n ? n : 1, sizeof *s);
    for (size_t i = 0; i < n; i++) {
        size_t k = len - i * chunk < chunk ? len - i * chunk : chunk;
        s[i] = grpc_slice_from_copied_buffer((const char *)p + i * chunk, k);
    }
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(s, n);
    for (size_t i = 0; i < n; i++)
        grpc_slice_unref(s[i]);
    free(s);
    return bb;
}

static grpc_byte_buffer *wrap(const uint8_t *p, size_t len)
{
    return wrap_chunks(p, len, 0);
}

/* Decodes, checks the error text on failure, and destroys bb. */
static int decode(grpc_byte_buffer *bb, size_t max, rpc_msg *m)
{
    char err[256];
    memset(err, 0, sizeof err);
    memset(m, 0xa5, sizeof *m); /* decode must zero it */
    int rc = rpc_codec_decode(bb, max, m, err, sizeof err);
    grpc_byte_buffer_destroy(bb);
    if (rc != 0) {
        cr_assert(err[0] != 0, "decode failed with %s and no detail text",
                  ferry_err_name(rc));
        cr_assert(memchr(err, 0, sizeof err) != NULL, "detail text not terminated");
        cr_assert(m->payload == NULL, "a failed decode left a payload");
    }
    return rc;
}

static int decode_bytes(const uint8_t *p, size_t len, size_t max)
{
    rpc_msg m;
    int rc = decode(wrap(p, len), max, &m);
    rpc_msg_fini(&m);
    return rc;
}

/* ---- wire building ------------------------------------------------------ */

typedef struct wbuf {
    uint8_t b[4096];
    size_t n;
} wbuf;

static void w_varint(wbuf *w, uint64_t v)
{
    w->n += rpc_varint_put(w->b + w->n, v);
}

static void w_tag(wbuf *w, unsigned field, unsigned wt)
{
    w_varint(w, ((uint64_t)field << 3) | wt);
}

static void w_bytes(wbuf *w, unsigned field, const void *p, size_t len)
{
    w_tag(w, field, 2);
    w_varint(w, len);
    memcpy(w->b + w->n, p, len);
    w->n += len;
}

static void w_payload_info(wbuf *w, uint64_t codec, uint64_t raw_size)
{
    wbuf in = {.n = 0};
    w_tag(&in, 1, 0);
    w_varint(&in, codec);
    w_tag(&in, 2, 0);
    w_varint(&in, raw_size);
    w_bytes(w, FIELD_PAYLOAD_INFO, in.b, in.n);
}

/* Top-level field boundaries of a valid protobuf message; returns how many. */
typedef struct field_span {
    size_t start, value, end; /* tag offset, value offset, end */
    unsigned field, wt;
} field_span;

static size_t scan_fields(const uint8_t *p, size_t len, field_span *out, size_t max)
{
    size_t i = 0, n = 0;
    while (i < len) {
        cr_assert(n < max);
        field_span *f = &out[n++];
        f->start = i;
        uint64_t tag = 0;
        for (int sh = 0;; sh += 7) {
            cr_assert(i < len);
            tag |= (uint64_t)(p[i] & 0x7f) << sh;
            if (!(p[i++] & 0x80))
                break;
        }
        f->field = (unsigned)(tag >> 3);
        f->wt = tag & 7;
        uint64_t v = 0;
        switch (f->wt) {
        case 0:
            f->value = i;
            while (p[i++] & 0x80)
                ;
            break;
        case 1:
            f->value = i;
            i += 8;
            break;
        case 5:
            f->value = i;
            i += 4;
            break;
        case 2:
            for (int sh = 0;; sh += 7) {
                v |= (uint64_t)(p[i] & 0x7f) << sh;
                if (!(p[i++] & 0x80))
                    break;
            }
            f->value = i;
            i += v;
            break;
        default:
            cr_assert_fail("wire type %u in an encoded message", f->wt);
        }
        f->end = i;
        cr_assert(i <= len);
    }
    return n;
}

static const field_span *find_field(const field_span *f, size_t n, unsigned field)
{
    for (size_t i = 0; i < n; i++)
        if (f[i].field == field)
            return &f[i];
    return NULL;
}

/* ---- messages ----------------------------------------------------------- */

typedef struct sample {
    Ferry__CallRequest req;
    proto_raw head;
    rpc_msg_out out;
    uint8_t *payload;
    size_t len;
} sample;

enum { DATA_RANDOM, DATA_SPARSE, DATA_ZERO };

static void sample_make(sample *s, size_t len, int kind, rpc_codec codec)
{
    s->len = len;
    s->payload = len ? malloc(len) : NULL;
    if (kind == DATA_RANDOM)
        h_fill_random(s->payload, len, len * 31 + 7);
    else if (kind == DATA_SPARSE)
        h_fill_sparse(s->payload, len, len * 17 + 3);
    else if (len)
        memset(s->payload, 0, len);
    h_msg_out(&s->out, &s->req, &s->head, "e3b0c44298fc1c149afbf4c8996fb924", "matmul",
              s->payload, len, codec);
}

static void sample_free(sample *s)
{
    free(s->payload);
}

/* Checks that m holds s: head fields and payload bytes. */
static void check_msg(const rpc_msg *m, const sample *s)
{
    Ferry__CallRequest *r = h_reply_callreq(m);
    cr_assert_str_eq(r->sha256, s->req.sha256);
    cr_assert_str_eq(r->function, s->req.function);
    cr_assert(r->payload_info == NULL && r->payload.len == 0,
              "the head still carries the payload fields");
    protobuf_c_message_free_unpacked(&r->base, NULL);
    cr_assert(m->payload_len == s->len, "payload %zu bytes, expected %zu", m->payload_len,
              s->len);
    if (s->len == 0) {
        cr_assert(m->payload == NULL, "an empty payload gave a buffer");
        return;
    }
    cr_assert(m->payload != NULL);
    cr_assert(((uintptr_t)m->payload & 63) == 0, "payload at %p is not 64-byte aligned",
              m->payload);
    cr_assert(memcmp(m->payload, s->payload, s->len) == 0, "payload bytes differ");
}

/* Encodes s, decodes it back, checks it; returns the decoded codec and wire
 * length through the pointers. */
static void round_trip(const sample *s, rpc_codec *codec, size_t *wire_len)
{
    grpc_byte_buffer *bb = encode_ok(&s->out, RPC_DEFAULT_MAX_PAYLOAD);
    rpc_msg m;
    int rc = decode(bb, RPC_DEFAULT_MAX_PAYLOAD, &m);
    cr_assert(rc == 0, "decode: %s", ferry_err_name(rc));
    check_msg(&m, s);
    if (codec)
        *codec = m.codec;
    if (wire_len)
        *wire_len = m.wire_len;
    rpc_msg_fini(&m);
    cr_assert(m.payload == NULL && m.head == NULL, "rpc_msg_fini did not zero the msg");
}

static const rpc_codec all_codecs[] = {RPC_CODEC_RAW, RPC_CODEC_LZ4, RPC_CODEC_AUTO};

/* ---- round trips -------------------------------------------------------- */

H_TEST(rpc_codec, empty_payload_round_trips_with_every_codec)
{
    for (size_t i = 0; i < 3; i++) {
        sample s;
        sample_make(&s, 0, DATA_RANDOM, all_codecs[i]);
        round_trip(&s, NULL, NULL);
        sample_free(&s);
    }
}

H_TEST(rpc_codec, empty_message_round_trips)
{
    rpc_msg_out out = {0};
    rpc_msg m;
    cr_assert(decode(encode_ok(&out, RPC_DEFAULT_MAX_PAYLOAD),
                     RPC_DEFAULT_MAX_PAYLOAD, &m) == 0);
    cr_assert(m.payload == NULL && m.payload_len == 0);
    ProtobufCMessage *p = NULL;
    cr_assert(
        proto_raw_unpack(&ferry__ping_request__descriptor, m.head, m.head_len, &p) == 0);
    cr_assert(((Ferry__PingRequest *)p)->nonce == 0);
    protobuf_c_message_free_unpacked(p, NULL);
    rpc_msg_fini(&m);
    /* No bytes at all is a valid, empty message too. */
    cr_assert(decode_bytes((const uint8_t *)"", 0, RPC_DEFAULT_MAX_PAYLOAD) == 0);
}

H_TEST(rpc_codec, one_byte_payload_round_trips_with_every_codec)
{
    for (size_t i = 0; i < 3; i++) {
        sample s;
        sample_make(&s, 1, DATA_RANDOM, all_codecs[i]);
        rpc_codec c;
        round_trip(&s, &c, NULL);
        /* One byte never compresses: every codec sends it raw. */
        cr_assert(c == RPC_CODEC_RAW, "codec %d for one byte", c);
        sample_free(&s);
    }
}

/* Dense data asked as LZ4 falls back to raw (it does not compress). */
H_TEST(rpc_codec, payload_of_64_mib_round_trips_with_every_codec)
{
    size_t len = (size_t)64 << 20;
    for (size_t i = 0; i < 3; i++) {
        sample s;
        sample_make(&s, len, DATA_RANDOM, all_codecs[i]);
        rpc_codec c;
        size_t wire;
        round_trip(&s, &c, &wire);
        cr_assert(c == RPC_CODEC_RAW, "codec %d for random bytes, asked %d", c,
                  all_codecs[i]);
        cr_assert(wire == len, "raw wire_len %zu", wire);
        sample_free(&s);
    }
}

H_TEST(rpc_codec, sparse_payload_of_64_mib_round_trips_compressed)
{
    size_t len = (size_t)64 << 20;
    sample s;
    sample_make(&s, len, DATA_SPARSE, RPC_CODEC_LZ4);
    rpc_codec c;
    size_t wire;
    round_trip(&s, &c, &wire);
    cr_assert(c == RPC_CODEC_LZ4);
    cr_assert(wire < len / 4, "lz4 wire_len %zu of %zu", wire, len);
    sample_free(&s);
}

/* Incompressible bytes go raw with LZ4 too: the frame would not be smaller,
 * and the receiver would decode it for nothing. */
H_TEST(rpc_codec, incompressible_data_goes_raw_with_lz4_and_auto)
{
    size_t len = (size_t)1 << 20;
    sample s;
    sample_make(&s, len, DATA_RANDOM, RPC_CODEC_LZ4);
    rpc_codec c;
    size_t wire;
    round_trip(&s, &c, &wire);
    cr_assert(c == RPC_CODEC_RAW, "LZ4 on random bytes was sent as %d", c);
    cr_assert(wire == len, "LZ4 fallback wire_len %zu", wire);
    s.out.codec = RPC_CODEC_AUTO;
    round_trip(&s, &c, &wire);
    cr_assert(c == RPC_CODEC_RAW, "AUTO chose %d for random bytes", c);
    cr_assert(wire == len, "AUTO raw wire_len %zu", wire);
    sample_free(&s);
}

H_TEST(rpc_codec, compressible_data_is_much_smaller_with_lz4_and_auto)
{
    size_t len = (size_t)4 << 20;
    int kinds[] = {DATA_SPARSE, DATA_ZERO};
    for (size_t k = 0; k < 2; k++) {
        sample s;
        sample_make(&s, len, kinds[k], RPC_CODEC_LZ4);
        rpc_codec c;
        size_t wire;
        round_trip(&s, &c, &wire);
        cr_assert(c == RPC_CODEC_LZ4);
        size_t bound = kinds[k] == DATA_ZERO ? len / 100 : len / 4;
        cr_assert(wire < bound, "lz4 wire_len %zu of %zu (kind %d)", wire, len, kinds[k]);
        s.out.codec = RPC_CODEC_AUTO;
        round_trip(&s, &c, &wire);
        cr_assert(c == RPC_CODEC_LZ4, "AUTO chose %d for compressible data", c);
        cr_assert(wire < bound);
        sample_free(&s);
    }
}

H_TEST(rpc_codec, fragmented_buffers_decode_like_whole_ones)
{
    /* gRPC hands messages over in many slices, even small ones: varints and
     * lengths split across slices must decode the same. */
    for (size_t ci = 0; ci < 2; ci++) {
        sample s;
        sample_make(&s, 3000, DATA_SPARSE, all_codecs[ci]);
        size_t len;
        uint8_t *wire = flatten(encode_ok(&s.out, RPC_DEFAULT_MAX_PAYLOAD), &len);
        size_t chunks[] = {1, 2, 3, 7, 64, 1000};
        for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
            rpc_msg m;
            int rc =
                decode(wrap_chunks(wire, len, chunks[k]), RPC_DEFAULT_MAX_PAYLOAD, &m);
            cr_assert(rc == 0, "slices of %zu: %s", chunks[k], ferry_err_name(rc));
            check_msg(&m, &s);
            rpc_msg_fini(&m);
        }
        free(wire);
        sample_free(&s);
    }
}

H_TEST(rpc_codec, decode_limit_is_inclusive)
{
    sample s;
    sample_make(&s, 1000, DATA_RANDOM, RPC_CODEC_RAW);
    size_t len;
    uint8_t *wire = flatten(encode_ok(&s.out, 1000), &len);
    cr_assert(decode_bytes(wire, len, 1000) == 0);
    cr_assert(decode_bytes(wire, len, 999) == FERRY_EMSGSIZE);
    free(wire);
    sample_free(&s);
}

H_TEST(rpc_codec, head_given_as_packed_bytes_round_trips)
{
    sample s;
    sample_make(&s, 4000, DATA_SPARSE, RPC_CODEC_LZ4);
    size_t hlen = ferry__call_request__get_packed_size(&s.req);
    uint8_t *hbytes = malloc(hlen);
    ferry__call_request__pack(&s.req, hbytes);
    s.out.head_bytes = hbytes;
    s.out.head_len = hlen;
    grpc_byte_buffer *bb = encode_ok(&s.out, RPC_DEFAULT_MAX_PAYLOAD);
    memset(hbytes, 0xff, hlen); /* "Copied": the buffer no longer needs them */
    rpc_msg m;
    cr_assert(decode(bb, RPC_DEFAULT_MAX_PAYLOAD, &m) == 0);
    check_msg(&m, &s);
    cr_assert(m.head_len == hlen);
    rpc_msg_fini(&m);
    /* head_len without bytes is a caller error */
    s.out.head_bytes = NULL;
    bb = NULL;
    int rc = rpc_codec_encode(&s.out, RPC_DEFAULT_MAX_PAYLOAD, &bb);
    cr_assert(rc == FERRY_EINVAL, "head_len %zu at NULL: %s", hlen, ferry_err_name(rc));
    free(hbytes);
    sample_free(&s);
}

H_TEST(rpc_codec, encode_above_max_payload_fails_with_emsgsize)
{
    sample s;
    sample_make(&s, 1001, DATA_RANDOM, RPC_CODEC_RAW);
    grpc_byte_buffer *bb = NULL;
    for (size_t i = 0; i < 3; i++) {
        s.out.codec = all_codecs[i];
        int rc = rpc_codec_encode(&s.out, 1000, &bb);
        cr_assert(rc == FERRY_EMSGSIZE, "codec %zu: %s", i, ferry_err_name(rc));
    }
    grpc_byte_buffer_destroy(encode_ok(&s.out, 1001));
    sample_free(&s);
}

static atomic_int freed;
static void count_free(void *payload, void *arg)
{
    cr_assert(arg == &freed);
    free(payload);
    atomic_fetch_add(&freed, 1);
}

H_TEST(rpc_codec, owned_payload_is_freed_once_with_the_buffer)
{
    for (size_t i = 0; i < 3; i++) {
        atomic_store(&freed, 0);
        sample s;
        sample_make(&s, 100000, DATA_SPARSE, all_codecs[i]);
        uint8_t *copy = malloc(s.len);
        memcpy(copy, s.payload, s.len);
        s.out.payload_free = count_free;
        s.out.free_arg = &freed;
        grpc_byte_buffer *bb = encode_ok(&s.out, RPC_DEFAULT_MAX_PAYLOAD);
        rpc_msg m;
        cr_assert(decode(bb, RPC_DEFAULT_MAX_PAYLOAD, &m) == 0); /* destroys bb */
        cr_assert(atomic_load(&freed) == 1, "codec %zu: payload_free ran %d times", i,
                  atomic_load(&freed));
        s.payload = copy;
        check_msg(&m, &s);
        rpc_msg_fini(&m);
        sample_free(&s);
    }
}

H_TEST(rpc_codec, failed_encode_leaves_an_owned_payload_with_the_caller)
{
    atomic_store(&freed, 0);
    sample s;
    sample_make(&s, 2000, DATA_RANDOM, RPC_CODEC_RAW);
    s.out.payload_free = count_free;
    s.out.free_arg = &freed;
    grpc_byte_buffer *bb = NULL;
    cr_assert(rpc_codec_encode(&s.out, 1000, &bb) == FERRY_EMSGSIZE);
    cr_assert(atomic_load(&freed) == 0, "payload freed by a failed encode");
    sample_free(&s);
}

H_TEST(rpc_codec, copied_payload_does_not_depend_on_the_source)
{
    sample s;
    sample_make(&s, 5000, DATA_RANDOM, RPC_CODEC_RAW);
    uint8_t *copy = malloc(s.len);
    memcpy(copy, s.payload, s.len);
    grpc_byte_buffer *bb = encode_ok(&s.out, RPC_DEFAULT_MAX_PAYLOAD);
    memset(s.payload, 0xee, s.len);
    free(s.payload);
    s.payload = copy;
    rpc_msg m;
    cr_assert(decode(bb, RPC_DEFAULT_MAX_PAYLOAD, &m) == 0);
    check_msg(&m, &s);
    rpc_msg_fini(&m);
    sample_free(&s);
}

/* ---- the wire format ---------------------------------------------------- */

H_TEST(rpc_codec, encoded_message_is_plain_protobuf_with_a_standard_lz4_frame)
{
    for (size_t i = 0; i < 2; i++) {
        sample s;
        sample_make(&s, 70000, DATA_SPARSE, all_codecs[i]);
        size_t len;
        uint8_t *wire = flatten(encode_ok(&s.out, RPC_DEFAULT_MAX_PAYLOAD), &len);
        Ferry__CallRequest *r = ferry__call_request__unpack(NULL, len, wire);
        cr_assert(r != NULL, "protobuf-c cannot unpack ferry's encoding");
        cr_assert_str_eq(r->sha256, s.req.sha256);
        cr_assert_str_eq(r->function, s.req.function);
        /* The payload fields come first, so a receiver can stream them. */
        field_span f[16];
        size_t nf = scan_fields(wire, len, f, 16);
        cr_assert(nf >= 3);
        cr_assert(f[0].field == FIELD_PAYLOAD_INFO || f[0].field == FIELD_PAYLOAD,
                  "first field is %u", f[0].field);
        if (all_codecs[i] == RPC_CODEC_RAW) {
            cr_assert(r->payload_info == NULL ||
                      r->payload_info->codec == FERRY__CODEC__CODEC_RAW);
            cr_assert(r->payload.len == s.len);
            cr_assert(memcmp(r->payload.data, s.payload, s.len) == 0);
        } else {
            cr_assert(r->payload_info != NULL);
            cr_assert(r->payload_info->codec == FERRY__CODEC__CODEC_LZ4);
            cr_assert(r->payload_info->raw_size == s.len);
            LZ4F_dctx *dctx;
            cr_assert(
                !LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION)));
            LZ4F_frameInfo_t fi;
            size_t src = r->payload.len;
            size_t hint = LZ4F_getFrameInfo(dctx, &fi, r->payload.data, &src);
            cr_assert(!LZ4F_isError(hint), "not an lz4 frame: %s",
                      LZ4F_getErrorName(hint));
            cr_assert(fi.contentChecksumFlag == LZ4F_contentChecksumEnabled,
                      "the lz4 frame has no content checksum");
            uint8_t *out = malloc(s.len);
            size_t dst = s.len, in = r->payload.len - src;
            size_t rc =
                LZ4F_decompress(dctx, out, &dst, r->payload.data + src, &in, NULL);
            cr_assert(rc == 0, "frame incomplete or bad: %zu", rc);
            cr_assert(dst == s.len && memcmp(out, s.payload, s.len) == 0);
            free(out);
            LZ4F_freeDecompressionContext(dctx);
        }
        ferry__call_request__free_unpacked(r, NULL);
        free(wire);
        sample_free(&s);
    }
}

/* What any protobuf library writes: fields in number order, the payload
 * fields last; payload_info absent for raw bytes. */
H_TEST(rpc_codec, decode_accepts_payload_fields_after_the_head)
{
    sample s;
    sample_make(&s, 3000, DATA_SPARSE, RPC_CODEC_RAW);
    Ferry__CallRequest r = FERRY__CALL_REQUEST__INIT;
    r.sha256 = s.req.sha256;
    r.function = s.req.function;
    r.payload.data = s.payload;
    r.payload.len = s.len;
    Ferry__PayloadInfo pi = FERRY__PAYLOAD_INFO__INIT;

    for (int variant = 0; variant < 3; variant++) {
        uint8_t *frame = NULL;
        if (variant == 0) { /* no payload_info */
            r.payload_info = NULL;
            r.payload.data = s.payload;
            r.payload.len = s.len;
        } else if (variant == 1) { /* explicit raw */
            pi.codec = FERRY__CODEC__CODEC_RAW;
            pi.raw_size = s.len;
            r.payload_info = &pi;
        } else { /* an lz4 frame made by liblz4 itself */
            LZ4F_preferences_t prefs = {0};
            prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
            size_t cap = LZ4F_compressFrameBound(s.len, &prefs);
            frame = malloc(cap);
            size_t n = LZ4F_compressFrame(frame, cap, s.payload, s.len, &prefs);
            cr_assert(!LZ4F_isError(n));
            pi.codec = FERRY__CODEC__CODEC_LZ4;
            pi.raw_size = s.len;
            r.payload_info = &pi;
            r.payload.data = frame;
            r.payload.len = n;
        }
        size_t len = ferry__call_request__get_packed_size(&r);
        uint8_t *wire = malloc(len);
        ferry__call_request__pack(&r, wire);
        field_span f[8];
        size_t nf = scan_fields(wire, len, f, 8);
        cr_assert(f[nf - 1].field == FIELD_PAYLOAD, "protobuf-c wrote the payload early");
        rpc_msg m;
        int rc = decode(wrap_chunks(wire, len, 100), RPC_DEFAULT_MAX_PAYLOAD, &m);
        cr_assert(rc == 0, "variant %d: %s", variant, ferry_err_name(rc));
        check_msg(&m, &s);
        cr_assert(m.codec == (variant == 2 ? RPC_CODEC_LZ4 : RPC_CODEC_RAW));
        rpc_msg_fini(&m);
        free(wire);
        free(frame);
    }
    sample_free(&s);
}

H_TEST(rpc_codec, fini_of_a_zeroed_or_finished_msg_is_safe)
{
    rpc_msg m = {0};
    rpc_msg_fini(&m);
    rpc_msg_fini(&m);
    size_t len = 1;
    cr_assert(rpc_msg_take_payload(&m, &len) == NULL);
}

H_TEST(rpc_codec, buffer_pool_returns_aligned_memory)
{
    size_t sizes[] = {1, 63, 64, 4096, 1 << 20, (size_t)33 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint8_t *p = rpc_buf_alloc(sizes[i]);
        cr_assert(p != NULL && ((uintptr_t)p & 63) == 0);
        memset(p, 0x5a, sizes[i]);
        rpc_buf_free(p);
    }
    rpc_buf_free(NULL);
}

/* ---- broken input ------------------------------------------------------- */

/* Cuts an encoded message at every offset in `cuts`: a cut inside a field must
 * fail with ECORRUPT; a cut between fields may decode (a shorter message) but
 * then never yields a payload of the wrong size or bytes. */
static void check_truncations(const sample *s, const size_t *cuts, size_t n_cuts)
{
    size_t len;
    uint8_t *wire = flatten(encode_ok(&s->out, RPC_DEFAULT_MAX_PAYLOAD), &len);
    field_span f[16];
    size_t nf = scan_fields(wire, len, f, 16);
    const field_span *info = find_field(f, nf, FIELD_PAYLOAD_INFO);
    const field_span *pay = find_field(f, nf, FIELD_PAYLOAD);
    for (size_t k = 0; k < n_cuts; k++) {
        size_t cut = cuts[k];
        if (cut >= len)
            continue;
        bool boundary = false;
        for (size_t i = 0; i < nf; i++)
            boundary |= f[i].start == cut;
        rpc_msg m;
        int rc = decode(wrap_chunks(wire, cut, 4096), RPC_DEFAULT_MAX_PAYLOAD, &m);
        if (!boundary) {
            cr_assert(rc == FERRY_ECORRUPT, "cut at %zu of %zu (inside a field): %s", cut,
                      len, ferry_err_name(rc));
        } else {
            cr_assert(rc == 0 || rc == FERRY_ECORRUPT, "cut at %zu of %zu: %s", cut, len,
                      ferry_err_name(rc));
            bool has_info = info && info->end <= cut;
            bool has_pay = pay && pay->end <= cut;
            if (has_info && !has_pay && s->len > 0)
                cr_assert(rc == FERRY_ECORRUPT,
                          "payload_info promised %zu bytes, none came, decode said OK",
                          s->len);
            if (rc == 0 && m.payload_len > 0) {
                cr_assert(m.payload_len == s->len);
                cr_assert(memcmp(m.payload, s->payload, s->len) == 0);
            }
        }
        rpc_msg_fini(&m);
    }
    free(wire);
}

H_TEST(rpc_codec, truncation_at_every_offset_of_a_small_message_fails_cleanly)
{
    for (size_t ci = 0; ci < 2; ci++) {
        sample s;
        sample_make(&s, 300, DATA_SPARSE, all_codecs[ci]);
        size_t cuts[2048];
        for (size_t i = 0; i < 2048; i++)
            cuts[i] = i;
        check_truncations(&s, cuts, 2048);
        sample_free(&s);
    }
}

H_TEST(rpc_codec, truncation_of_big_messages_at_sampled_offsets_fails_cleanly)
{
    for (size_t ci = 0; ci < 2; ci++) {
        sample s;
        sample_make(&s, (size_t)2 << 20, ci ? DATA_SPARSE : DATA_RANDOM, all_codecs[ci]);
        size_t len;
        uint8_t *wire = flatten(encode_ok(&s.out, RPC_DEFAULT_MAX_PAYLOAD), &len);
        free(wire);
        enum { N = 200 };
        size_t cuts[N];
        size_t n = 0;
        for (size_t i = 0; i < 40; i++) /* the headers */
            cuts[n++] = i;
        for (size_t i = 1; i <= 40; i++) /* the tail: checksum, head fields */
            cuts[n++] = len - i;
        uint64_t seed = 99;
        while (n < N) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            cuts[n++] = (size_t)(seed >> 20) % len;
        }
        check_truncations(&s, cuts, n);
        sample_free(&s);
    }
}

/* Flips bytes of the lz4 frame. The frame carries a content checksum, so a
 * flip must fail with ECORRUPT, with one exception: in highly redundant data
 * a flipped match offset can copy other, identical bytes. Such a flip changes
 * nothing that was sent, and decoding it to the original bytes is right. For
 * random data (no matches) every flip must fail. */
/* The wire bytes of a CallRequest whose payload is one lz4 frame, as liblz4
 * writes it with ferry's settings: ferry itself sends incompressible data
 * raw, but another sender may still send it as lz4. */
static uint8_t *lz4_message(const sample *s, size_t *len)
{
    LZ4F_preferences_t prefs = {0};
    prefs.frameInfo.blockSizeID = LZ4F_max1MB;
    prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
    prefs.frameInfo.contentSize = s->len;
    size_t cap = LZ4F_compressFrameBound(s->len, &prefs);
    uint8_t *frame = malloc(cap);
    size_t n = LZ4F_compressFrame(frame, cap, s->payload, s->len, &prefs);
    cr_assert(!LZ4F_isError(n));
    Ferry__PayloadInfo pi = FERRY__PAYLOAD_INFO__INIT;
    pi.codec = FERRY__CODEC__CODEC_LZ4;
    pi.raw_size = s->len;
    Ferry__CallRequest r = s->req;
    r.payload_info = &pi;
    r.payload.data = frame;
    r.payload.len = n;
    *len = ferry__call_request__get_packed_size(&r);
    uint8_t *wire = malloc(*len);
    ferry__call_request__pack(&r, wire);
    free(frame);
    return wire;
}

/* Flips bytes of the lz4 frame. The frame carries a content checksum, so a
 * flip must fail with ECORRUPT, with one exception: in highly redundant data
 * a flipped match offset can copy other, identical bytes. Such a flip changes
 * nothing that was sent, and decoding it to the original bytes is right. For
 * random data (no matches) every flip must fail. Sparse data is encoded by
 * ferry, random data by liblz4 directly (ferry would send it raw). */
static void check_flips(size_t payload_len, int kind, size_t stride)
{
    sample s;
    sample_make(&s, payload_len, kind, RPC_CODEC_LZ4);
    size_t len;
    uint8_t *wire = kind == DATA_RANDOM
                        ? lz4_message(&s, &len)
                        : flatten(encode_ok(&s.out, RPC_DEFAULT_MAX_PAYLOAD), &len);
    field_span f[16];
    size_t nf = scan_fields(wire, len, f, 16);
    const field_span *pay = find_field(f, nf, FIELD_PAYLOAD);
    cr_assert(pay != NULL);
    rpc_msg m;
    cr_assert(decode(wrap(wire, len), RPC_DEFAULT_MAX_PAYLOAD, &m) == 0);
    cr_assert(m.codec == RPC_CODEC_LZ4, "the test message is not lz4");
    rpc_msg_fini(&m);
    const uint8_t masks[] = {0x01, 0x80, 0xff};
    size_t tried = 0, harmless = 0;
    for (size_t at = pay->value; at < pay->end; at += stride) {
        for (size_t k = 0; k < sizeof masks; k++) {
            wire[at] ^= masks[k];
            int rc = decode(wrap(wire, len), RPC_DEFAULT_MAX_PAYLOAD, &m);
            wire[at] ^= masks[k];
            tried++;
            if (rc == 0 && kind != DATA_RANDOM && m.payload_len == s.len &&
                memcmp(m.payload, s.payload, s.len) == 0) {
                harmless++;
                rpc_msg_fini(&m);
                continue;
            }
            cr_assert(rc == FERRY_ECORRUPT,
                      "lz4 byte %zu of %zu xor 0x%02x: decode returned %s%s",
                      at - pay->value, pay->end - pay->value, masks[k],
                      rc ? ferry_err_name(rc) : "success",
                      rc == 0 ? " with different bytes" : "");
            rpc_msg_fini(&m);
        }
    }
    cr_assert(tried > 0);
    cr_assert(harmless * 10 < tried, "%zu of %zu flips went unnoticed", harmless, tried);
    free(wire);
    sample_free(&s);
}

H_TEST(rpc_codec, every_flipped_byte_of_a_small_lz4_payload_fails_with_ecorrupt)
{
    check_flips(2000, DATA_SPARSE, 1);
    check_flips(2000, DATA_RANDOM, 1);
}

H_TEST(rpc_codec, flipped_bytes_in_a_big_lz4_payload_fail_with_ecorrupt)
{
    check_flips((size_t)1 << 20, DATA_SPARSE, 997);
    check_flips((size_t)256 << 10, DATA_RANDOM, 4999);
}

H_TEST(rpc_codec, flipped_bytes_in_the_payload_info_fail_cleanly)
{
    sample s;
    sample_make(&s, 2000, DATA_SPARSE, RPC_CODEC_LZ4);
    size_t len;
    uint8_t *wire = flatten(encode_ok(&s.out, RPC_DEFAULT_MAX_PAYLOAD), &len);
    field_span f[16];
    size_t nf = scan_fields(wire, len, f, 16);
    const field_span *info = find_field(f, nf, FIELD_PAYLOAD_INFO);
    cr_assert(info != NULL);
    for (size_t at = info->start; at < info->end; at++) {
        for (unsigned bit = 0; bit < 8; bit++) {
            wire[at] ^= (uint8_t)(1u << bit);
            rpc_msg m;
            int rc = decode(wrap(wire, len), RPC_DEFAULT_MAX_PAYLOAD, &m);
            wire[at] ^= (uint8_t)(1u << bit);
            cr_assert(rc == 0 || rc == FERRY_ECORRUPT || rc == FERRY_EMSGSIZE,
                      "byte %zu bit %u: %s", at, bit, ferry_err_name(rc));
            /* A flip may keep the message valid protobuf: a tag that now
             * names another field (payload_info becomes an unknown head
             * field, the frame a raw payload). Anywhere else, a success
             * must give back the original bytes. */
            if (rc == 0 && at != info->start)
                cr_assert(m.payload_len == s.len &&
                              memcmp(m.payload, s.payload, s.len) == 0,
                          "byte %zu bit %u: decoded %zu wrong bytes", at - info->start,
                          bit, m.payload_len);
            rpc_msg_fini(&m);
        }
    }
    free(wire);
    sample_free(&s);
}

/* The point of raw_size: an lz4 payload of a few bytes can declare gigabytes.
 * The limit is checked on the declared size before anything is reserved (a
 * reservation of 2^62 bytes would abort under ASan). */
H_TEST(rpc_codec, declared_raw_size_above_the_limit_fails_with_emsgsize)
{
    const uint64_t sizes[] = {1001, (uint64_t)1 << 40, (uint64_t)1 << 62, UINT64_MAX};
    uint8_t frame[256];
    LZ4F_preferences_t prefs = {0};
    prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
    size_t n = LZ4F_compressFrame(frame, sizeof frame, "0123456789", 10, &prefs);
    cr_assert(!LZ4F_isError(n));
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        wbuf w = {.n = 0};
        w_payload_info(&w, 1, sizes[i]);
        w_bytes(&w, FIELD_PAYLOAD, frame, n);
        int rc = decode_bytes(w.b, w.n, 1000);
        cr_assert(rc == FERRY_EMSGSIZE, "lz4 raw_size %llu: %s",
                  (unsigned long long)sizes[i], ferry_err_name(rc));
        if (sizes[i] > RPC_DEFAULT_MAX_PAYLOAD) {
            rc = decode_bytes(w.b, w.n, RPC_DEFAULT_MAX_PAYLOAD);
            cr_assert(rc == FERRY_EMSGSIZE, "raw_size %llu at the default limit: %s",
                      (unsigned long long)sizes[i], ferry_err_name(rc));
        }
    }
    /* A raw payload that really is over the limit. */
    static uint8_t big[1001];
    wbuf w = {.n = 0};
    w_payload_info(&w, 0, sizeof big);
    w_bytes(&w, FIELD_PAYLOAD, big, sizeof big);
    cr_assert(decode_bytes(w.b, w.n, 1000) == FERRY_EMSGSIZE);
    /* A raw payload of 10 bytes declaring 2^62: over the limit, or simply
     * inconsistent; either way no reservation. */
    w.n = 0;
    w_payload_info(&w, 0, (uint64_t)1 << 62);
    w_bytes(&w, FIELD_PAYLOAD, "0123456789", 10);
    int rc = decode_bytes(w.b, w.n, RPC_DEFAULT_MAX_PAYLOAD);
    cr_assert(rc == FERRY_EMSGSIZE || rc == FERRY_ECORRUPT, "%s", ferry_err_name(rc));
}

H_TEST(rpc_codec, raw_payload_above_the_limit_without_payload_info_fails_with_emsgsize)
{
    static uint8_t big[2000];
    wbuf w = {.n = 0};
    w_bytes(&w, 1, "abc", 3);
    w_bytes(&w, FIELD_PAYLOAD, big, sizeof big);
    cr_assert(decode_bytes(w.b, w.n, 1000) == FERRY_EMSGSIZE);
    cr_assert(decode_bytes(w.b, w.n, 2000) == 0);
}

H_TEST(rpc_codec, raw_size_that_disagrees_with_the_payload_fails_with_ecorrupt)
{
    /* raw: the bytes are the payload, so raw_size must be their count. */
    const uint64_t wrong[] = {9, 11, 0};
    for (size_t i = 0; i < 3; i++) {
        wbuf w = {.n = 0};
        w_payload_info(&w, 0, wrong[i]);
        w_bytes(&w, FIELD_PAYLOAD, "0123456789", 10);
        int rc = decode_bytes(w.b, w.n, 1000);
        cr_assert(rc == FERRY_ECORRUPT, "raw, raw_size %llu for 10 bytes: %s",
                  (unsigned long long)wrong[i], ferry_err_name(rc));
    }
    /* lz4: the frame decodes to 500 bytes; any other raw_size is corrupt. */
    uint8_t plain[500];
    h_fill_sparse(plain, sizeof plain, 5);
    LZ4F_preferences_t prefs = {0};
    prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
    uint8_t frame[1024];
    size_t n = LZ4F_compressFrame(frame, sizeof frame, plain, sizeof plain, &prefs);
    cr_assert(!LZ4F_isError(n));
    const uint64_t sizes[] = {499, 501, 1000, 0, 500};
    for (size_t i = 0; i < 5; i++) {
        wbuf w = {.n = 0};
        w_payload_info(&w, 1, sizes[i]);
        w_bytes(&w, FIELD_PAYLOAD, frame, n);
        rpc_msg m;
        int rc = decode(wrap(w.b, w.n), 1000, &m);
        if (sizes[i] == 500) {
            cr_assert(rc == 0, "the right raw_size failed: %s", ferry_err_name(rc));
            cr_assert(m.payload_len == 500 && memcmp(m.payload, plain, 500) == 0);
            cr_assert(m.codec == RPC_CODEC_LZ4 && m.wire_len == n);
        } else {
            cr_assert(rc == FERRY_ECORRUPT, "lz4, raw_size %llu for 500 bytes: %s",
                      (unsigned long long)sizes[i], ferry_err_name(rc));
        }
        rpc_msg_fini(&m);
    }
}

H_TEST(rpc_codec, lz4_payload_that_is_not_a_frame_fails_with_ecorrupt)
{
    const char *junk[] = {"", "x", "not an lz4 frame at all", "\x04\x22\x4d\x18"};
    for (size_t i = 0; i < 4; i++) {
        wbuf w = {.n = 0};
        w_payload_info(&w, 1, 20);
        w_bytes(&w, FIELD_PAYLOAD, junk[i], strlen(junk[i]));
        cr_assert(decode_bytes(w.b, w.n, 1000) == FERRY_ECORRUPT, "junk %zu", i);
    }
    /* Two frames back to back are not "one frame". */
    uint8_t frame[256];
    LZ4F_preferences_t prefs = {0};
    prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
    size_t n = LZ4F_compressFrame(frame, 128, "hellohello", 10, &prefs);
    cr_assert(!LZ4F_isError(n) && n < 128);
    memcpy(frame + n, frame, n);
    wbuf w = {.n = 0};
    w_payload_info(&w, 1, 10);
    w_bytes(&w, FIELD_PAYLOAD, frame, 2 * n);
    cr_assert(decode_bytes(w.b, w.n, 1000) == FERRY_ECORRUPT, "trailing bytes accepted");
}

H_TEST(rpc_codec, explicit_empty_payload_decodes_to_an_empty_payload)
{
    for (int with_info = 0; with_info < 2; with_info++) {
        for (uint64_t codec = 0; codec < (with_info ? 2u : 1u); codec++) {
            wbuf w = {.n = 0};
            w_bytes(&w, 1, "abc", 3);
            if (with_info)
                w_payload_info(&w, codec, 0);
            uint8_t frame[64];
            size_t n = 0;
            if (codec == 1) {
                LZ4F_preferences_t prefs = {0};
                n = LZ4F_compressFrame(frame, sizeof frame, "", 0, &prefs);
                cr_assert(!LZ4F_isError(n));
            }
            w_bytes(&w, FIELD_PAYLOAD, frame, n);
            rpc_msg m;
            int rc = decode(wrap(w.b, w.n), 1000, &m);
            cr_assert(rc == 0, "info %d codec %llu: %s", with_info,
                      (unsigned long long)codec, ferry_err_name(rc));
            cr_assert(m.payload_len == 0);
            rpc_msg_fini(&m);
        }
    }
    /* payload_info declaring nothing, and no payload field */
    wbuf w = {.n = 0};
    w_payload_info(&w, 0, 0);
    rpc_msg m;
    cr_assert(decode(wrap(w.b, w.n), 1000, &m) == 0);
    cr_assert(m.payload == NULL && m.payload_len == 0);
    rpc_msg_fini(&m);
}

H_TEST(rpc_codec, unknown_codec_fails_with_ecorrupt)
{
    wbuf w = {.n = 0};
    w_payload_info(&w, 7, 3);
    w_bytes(&w, FIELD_PAYLOAD, "abc", 3);
    cr_assert(decode_bytes(w.b, w.n, 1000) == FERRY_ECORRUPT);
}

H_TEST(rpc_codec, payload_fields_with_the_wrong_wire_type_fail_with_ecorrupt)
{
    const unsigned fields[] = {FIELD_PAYLOAD_INFO, FIELD_PAYLOAD};
    for (size_t i = 0; i < 2; i++) {
        wbuf w = {.n = 0};
        w_tag(&w, fields[i], 0); /* varint */
        w_varint(&w, 5);
        cr_assert(decode_bytes(w.b, w.n, 1000) == FERRY_ECORRUPT, "field %u as varint",
                  fields[i]);
        w.n = 0;
        w_tag(&w, fields[i], 5); /* fixed32 */
        memcpy(w.b + w.n, "abcd", 4);
        w.n += 4;
        cr_assert(decode_bytes(w.b, w.n, 1000) == FERRY_ECORRUPT, "field %u as fixed32",
                  fields[i]);
    }
}

H_TEST(rpc_codec, group_wire_type_fails_with_ecorrupt)
{
    /* payload fields as a group */
    const unsigned fields[] = {FIELD_PAYLOAD_INFO, FIELD_PAYLOAD};
    for (size_t i = 0; i < 2; i++) {
        wbuf w = {.n = 0};
        w_tag(&w, fields[i], 3); /* start group */
        w_tag(&w, 1, 0);
        w_varint(&w, 1);
        w_tag(&w, fields[i], 4); /* end group */
        cr_assert(decode_bytes(w.b, w.n, 1000) == FERRY_ECORRUPT, "field %u as group",
                  fields[i]);
    }
    /* a lone end-group, and a group in a head field: corrupt at decode, or at
     * the latest when the head is unpacked */
    const unsigned wts[] = {3, 4};
    for (size_t i = 0; i < 2; i++) {
        wbuf w = {.n = 0};
        w_bytes(&w, 1, "abc", 3);
        w_tag(&w, 2, wts[i]);
        w_tag(&w, 1, 0);
        w_varint(&w, 1);
        w_tag(&w, 2, 4);
        rpc_msg m;
        int rc = decode(wrap(w.b, w.n), 1000, &m);
        if (rc == 0) {
            ProtobufCMessage *p = NULL;
            rc = proto_raw_unpack(&ferry__call_request__descriptor, m.head, m.head_len,
                                  &p);
            if (rc == 0)
                protobuf_c_message_free_unpacked(p, NULL);
        }
        rpc_msg_fini(&m);
        cr_assert(rc == FERRY_ECORRUPT, "head with wire type %u: %s", wts[i],
                  ferry_err_name(rc));
    }
}

H_TEST(rpc_codec, wire_types_6_and_7_fail_with_ecorrupt)
{
    for (unsigned wt = 6; wt <= 7; wt++) {
        for (unsigned field = 1; field <= 15; field += 14) {
            wbuf w = {.n = 0};
            w_tag(&w, field, wt);
            w_varint(&w, 1);
            cr_assert(decode_bytes(w.b, w.n, 1000) == FERRY_ECORRUPT, "field %u wt %u",
                      field, wt);
        }
    }
}

H_TEST(rpc_codec, overlong_varints_and_lengths_fail_with_ecorrupt)
{
    uint8_t ff[16];
    memset(ff, 0xff, sizeof ff);
    cr_assert(decode_bytes(ff, sizeof ff, 1000) == FERRY_ECORRUPT, "16 bytes of 0xff");
    /* field 15 with a length longer than the message */
    wbuf w = {.n = 0};
    w_tag(&w, FIELD_PAYLOAD, 2);
    w_varint(&w, 1000000);
    memcpy(w.b + w.n, "abc", 3);
    w.n += 3;
    int rc = decode_bytes(w.b, w.n, RPC_DEFAULT_MAX_PAYLOAD);
    cr_assert(rc == FERRY_ECORRUPT, "length past the end: %s", ferry_err_name(rc));
    /* a length of 2^63: corrupt or too big, never an allocation */
    w.n = 0;
    w_tag(&w, FIELD_PAYLOAD, 2);
    w_varint(&w, (uint64_t)1 << 63);
    rc = decode_bytes(w.b, w.n, RPC_DEFAULT_MAX_PAYLOAD);
    cr_assert(rc == FERRY_ECORRUPT || rc == FERRY_EMSGSIZE, "length 2^63: %s",
              ferry_err_name(rc));
    /* payload_info whose own length runs past the message */
    w.n = 0;
    w_tag(&w, FIELD_PAYLOAD_INFO, 2);
    w_varint(&w, 50);
    w_tag(&w, 1, 0);
    w_varint(&w, 1);
    cr_assert(decode_bytes(w.b, w.n, 1000) == FERRY_ECORRUPT);
}

H_TEST(rpc_codec, garbage_bytes_fail_cleanly)
{
    uint8_t buf[512];
    uint64_t seed = 1;
    for (int iter = 0; iter < 3000; iter++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t len = (size_t)(seed >> 33) % sizeof buf;
        h_fill_random(buf, len, seed);
        /* a third of the time, make it look like a payload message */
        if (iter % 3 == 0 && len > 2)
            buf[0] = (FIELD_PAYLOAD_INFO << 3) | 2;
        else if (iter % 3 == 1 && len > 2)
            buf[0] = (FIELD_PAYLOAD << 3) | 2;
        rpc_msg m;
        int rc = decode(wrap_chunks(buf, len, 1 + iter % 17), 1 << 20, &m);
        cr_assert(rc == 0 || rc == FERRY_ECORRUPT || rc == FERRY_EMSGSIZE,
                  "garbage %d (%zu bytes): %s", iter, len, ferry_err_name(rc));
        if (rc == 0 && m.payload_len)
            cr_assert(m.payload != NULL);
        rpc_msg_fini(&m);
    }
}

/* ---- payloads left in place as runs (RPC_METHOD_PAYLOAD_RUNS) ------------ */

/* Decodes bb with runs; the msg owns bb on success when it has runs. */
static int decode_runs(grpc_byte_buffer *bb, rpc_msg *m, rpc_payload *pl)
{
    char err[256];
    int rc = rpc_codec_decode_runs(bb, RPC_DEFAULT_MAX_PAYLOAD, RPC_INLINE_DECODE_MAX,
                                   true, m, err, sizeof err);
    if (rc == 0 && m->bb != bb)
        grpc_byte_buffer_destroy(bb);
    if (rc == 0)
        rpc_msg_take_runs(m, pl);
    return rc;
}

/* The runs of a payload split across slices at odd places, put together,
 * are its bytes; nothing is deferred however large it is. */
H_TEST(rpc_codec, raw_payload_left_in_odd_slices_reads_back_as_runs)
{
    size_t len = ((size_t)1 << 20) + 12;
    sample s;
    sample_make(&s, len, DATA_RANDOM, RPC_CODEC_RAW);
    size_t wire_len;
    uint8_t *wire = flatten(encode_ok(&s.out, RPC_DEFAULT_MAX_PAYLOAD), &wire_len);
    const size_t chunks[] = {0, 1, 3, 4099, 65537};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        rpc_msg m;
        rpc_payload pl;
        int rc = decode_runs(wrap_chunks(wire, wire_len, chunks[c]), &m, &pl);
        cr_assert(rc == 0, "decode with runs, slices of %zu: %s", chunks[c],
                  ferry_err_name(rc));
        cr_assert(m.payload == NULL && m.runs == NULL && m.bb == NULL,
                  "taking the runs left them in the msg");
        cr_assert(pl.len == len && pl.n_runs >= 1, "%zu bytes in %zu runs", pl.len,
                  pl.n_runs);
        size_t at = 0;
        for (size_t r = 0; r < pl.n_runs; r++) {
            cr_assert(at + pl.runs[r].len <= len, "runs overrun the payload");
            cr_assert(memcmp(pl.runs[r].p, (const uint8_t *)s.payload + at,
                             pl.runs[r].len) == 0,
                      "run %zu differs (slices of %zu)", r, chunks[c]);
            at += pl.runs[r].len;
        }
        cr_assert(at == len, "runs hold %zu of %zu bytes", at, len);
        rpc_payload_fini(&pl);
        rpc_msg_fini(&m);
    }
    free(wire);
    sample_free(&s);
}

/* An lz4 payload is decoded as before (one run of its own buffer), and
 * deferred past the cap like any other. */
H_TEST(rpc_codec, lz4_payload_with_runs_is_decoded_or_deferred)
{
    sample s;
    sample_make(&s, (size_t)1 << 20, DATA_SPARSE, RPC_CODEC_LZ4);
    grpc_byte_buffer *bb = encode_ok(&s.out, RPC_DEFAULT_MAX_PAYLOAD);
    rpc_msg m;
    char err[256];
    int rc = rpc_codec_decode_runs(bb, RPC_DEFAULT_MAX_PAYLOAD, RPC_INLINE_DECODE_MAX,
                                   true, &m, err, sizeof err);
    cr_assert(rc == RPC_DECODE_DEFER, "lz4 over the cap: %d", rc);
    rpc_payload pl;
    rc = rpc_codec_decode_runs(bb, RPC_DEFAULT_MAX_PAYLOAD, SIZE_MAX, true, &m, err,
                               sizeof err);
    cr_assert(rc == 0, "decode: %s", err);
    cr_assert(m.codec == RPC_CODEC_LZ4 && m.bb == NULL && m.payload != NULL);
    grpc_byte_buffer_destroy(bb);
    rpc_msg_take_runs(&m, &pl);
    cr_assert(pl.n_runs == 1 && pl.len == s.len);
    cr_assert(memcmp(pl.runs[0].p, s.payload, s.len) == 0);
    rpc_payload_fini(&pl);
    rpc_msg_fini(&m);
    sample_free(&s);
}

/* A payload cut short fails as before, and leaves nothing behind. */
H_TEST(rpc_codec, truncated_payload_with_runs_fails)
{
    sample s;
    sample_make(&s, 100000, DATA_RANDOM, RPC_CODEC_RAW);
    size_t wire_len;
    uint8_t *wire = flatten(encode_ok(&s.out, RPC_DEFAULT_MAX_PAYLOAD), &wire_len);
    grpc_byte_buffer *bb = wrap_chunks(wire, 5000, 777);
    rpc_msg m;
    char err[256];
    int rc = rpc_codec_decode_runs(bb, RPC_DEFAULT_MAX_PAYLOAD, RPC_INLINE_DECODE_MAX,
                                   true, &m, err, sizeof err);
    cr_assert(rc == FERRY_ECORRUPT, "truncated: %s", ferry_err_name(rc));
    cr_assert(m.runs == NULL && m.bb == NULL && m.payload == NULL);
    grpc_byte_buffer_destroy(bb);
    free(wire);
    sample_free(&s);
}

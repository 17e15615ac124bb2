/* Reading a received message in place, across the ~1,000 slices that gRPC
 * hands a large message in, without first making it contiguous. Only what
 * the payload framing needs: varints and byte runs. Every read is bounded by
 * what is left, so a truncated message can never be over-read. */
#include <string.h>

#include "rpc_int.h"

int rpc_wire_reader_init(rpc_wire_reader *w, grpc_byte_buffer *bb)
{
    memset(w, 0, sizeof *w);
    if (!grpc_byte_buffer_reader_init(&w->r, bb))
        return FERRY_ECORRUPT;
    w->left = grpc_byte_buffer_length(bb);
    return 0;
}

void rpc_wire_reader_fini(rpc_wire_reader *w)
{
    grpc_byte_buffer_reader_destroy(&w->r);
}

/* Makes p..end non-empty unless the message is exhausted. */
static bool fill(rpc_wire_reader *w)
{
    while (w->p == w->end) {
        grpc_slice *s;
        if (!grpc_byte_buffer_reader_peek(&w->r, &s))
            return false;
        w->p = GRPC_SLICE_START_PTR(*s);
        w->end = w->p + GRPC_SLICE_LENGTH(*s);
    }
    return true;
}

size_t rpc_wire_next_run(rpc_wire_reader *w, size_t n, const uint8_t **run)
{
    if (n > w->left)
        n = w->left;
    if (n == 0 || !fill(w))
        return 0;
    size_t have = (size_t)(w->end - w->p);
    if (n > have)
        n = have;
    *run = w->p;
    w->p += n;
    w->left -= n;
    return n;
}

int rpc_wire_read(rpc_wire_reader *w, void *dst, size_t n)
{
    if (n > w->left)
        return FERRY_ECORRUPT;
    uint8_t *d = dst;
    while (n) {
        const uint8_t *run;
        size_t got = rpc_wire_next_run(w, n, &run);
        if (!got)
            return FERRY_ECORRUPT;
        if (d) {
            memcpy(d, run, got);
            d += got;
        }
        n -= got;
    }
    return 0;
}

int rpc_wire_read_varint(rpc_wire_reader *w, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        uint8_t byte;
        if (rpc_wire_read(w, &byte, 1))
            return FERRY_ECORRUPT;
        x |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return FERRY_ECORRUPT; /* more than 10 bytes */
}

size_t rpc_varint_put(uint8_t *buf, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        buf[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    buf[n++] = (uint8_t)v;
    return n;
}

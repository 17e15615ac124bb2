/* Writes the seed corpus of fuzz-decode into a directory: requests as
 * ferry's own encoder writes them (raw and lz4 payloads, with and without
 * heads, for each method the worker serves) and the hostile shapes of
 * tests/runtime/test-hardening.c (garbage, a payload longer than its
 * message, an unknown codec, a 1 TiB declaration, an lz4 frame that claims
 * 1 GiB). Each file starts with fuzz-decode's slice-length byte. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lz4frame.h>

#include "proto/raw.h"
#include "rpc/rpc_int.h"

static const char *dir;
static int count;

static void put(uint8_t cut, const void *bytes, size_t len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/seed-%03d", dir, count++);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(&cut, 1, 1, f) != 1 || fwrite(bytes, 1, len, f) != len ||
        fclose(f) != 0) {
        fprintf(stderr, "fuzz-seeds: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

static void put_encoded(const rpc_msg_out *m)
{
    grpc_byte_buffer *bb;
    if (rpc_codec_encode(m, RPC_DEFAULT_MAX_PAYLOAD, &bb) != 0) {
        fprintf(stderr, "fuzz-seeds: cannot encode a seed\n");
        exit(1);
    }
    grpc_byte_buffer_reader r;
    grpc_byte_buffer_reader_init(&r, bb);
    grpc_slice all = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    put(0, GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all));
    put(7, GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all));
    grpc_slice_unref(all);
    grpc_byte_buffer_destroy(bb);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fputs("usage: fuzz-seeds DIR\n", stderr);
        return 2;
    }
    dir = argv[1];
    grpc_init();

    static uint8_t sparse[20000], dense[300];
    for (size_t i = 0; i < sizeof sparse; i += 97)
        sparse[i] = (uint8_t)i;
    for (size_t i = 0; i < sizeof dense; i++)
        dense[i] = (uint8_t)(i * 131 + 7);

    Ferry__PingRequest ping = FERRY__PING_REQUEST__INIT;
    ping.nonce = 77;
    Ferry__LoadModuleRequest load = FERRY__LOAD_MODULE_REQUEST__INIT;
    load.sha256 = "f387023e9d47673d6e748f6efb81203cced36402d4678b9dbb18ee41a510b3a8";
    load.name = "demo.so";
    Ferry__CallRequest call = FERRY__CALL_REQUEST__INIT;
    call.sha256 = load.sha256;
    call.function = "square";
    call.rank = 1;
    call.world_size = 4;
    Ferry__ShutdownRequest shut = FERRY__SHUTDOWN_REQUEST__INIT;
    shut.grace_ms = 1000;
    Ferry__ReduceChunkRequest chunk = FERRY__REDUCE_CHUNK_REQUEST__INIT;
    const ProtobufCMessage *heads[] = {&ping.base, &load.base,  &call.base,
                                       &shut.base, &chunk.base, NULL};
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        proto_raw h = proto_raw_pack(heads[i]);
        put_encoded(&(rpc_msg_out){.head_bytes = h.data, .head_len = h.len});
        put_encoded(&(rpc_msg_out){.head_bytes = h.data,
                                   .head_len = h.len,
                                   .payload = dense,
                                   .payload_len = sizeof dense});
        put_encoded(&(rpc_msg_out){.head_bytes = h.data,
                                   .head_len = h.len,
                                   .payload = sparse,
                                   .payload_len = sizeof sparse,
                                   .codec = RPC_CODEC_LZ4});
    }

    static const struct {
        uint8_t b[32];
        size_t len;
    } junk[] = {
        {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 8},
        {{15 << 3 | 2, 0x80, 0x80, 0x04, 1, 2, 3}, 7},
        {{14 << 3 | 2, 2, 1 << 3, 9, 15 << 3 | 2, 1, 0}, 7},
        {{1 << 3 | 7, 0}, 2},
        {{14 << 3 | 2, 9, 1 << 3, 1, 2 << 3, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20,
          15 << 3 | 2, 1, 0},
         14},
    };
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++)
        put(0, junk[i].b, junk[i].len);

    /* A short lz4 frame of zeros declared at 1 GiB, then at its true size. */
    static uint8_t zeros[65536], frame[70000], msg[70100];
    size_t fl = LZ4F_compressFrame(frame, sizeof frame, zeros, sizeof zeros, NULL);
    if (LZ4F_isError(fl)) {
        fprintf(stderr, "fuzz-seeds: lz4: %s\n", LZ4F_getErrorName(fl));
        return 1;
    }
    const uint64_t declared[] = {(uint64_t)1 << 30, sizeof zeros};
    for (size_t i = 0; i < 2; i++) {
        uint8_t info[16];
        size_t il = 0, p = 0;
        info[il++] = 1 << 3; /* codec: LZ4 */
        info[il++] = 1;
        info[il++] = 2 << 3; /* raw_size */
        il += rpc_varint_put(info + il, declared[i]);
        msg[p++] = 14 << 3 | 2;
        msg[p++] = (uint8_t)il;
        memcpy(msg + p, info, il);
        p += il;
        msg[p++] = 15 << 3 | 2;
        p += rpc_varint_put(msg + p, fl);
        memcpy(msg + p, frame, fl);
        put(0, msg, p + fl);
    }

    grpc_shutdown();
    printf("%d seeds in %s\n", count, dir);
    return 0;
}

/* bench — the client half of one gRPC-core unary call as one 6-op batch,
 * for the benches that use gRPC core directly (bare_echo, grpc_allreduce):
 * what rpc/call.c does for ferry, without its token or bookkeeping. */
#ifndef FERRY_BENCH_GRPC_UNARY_H
#define FERRY_BENCH_GRPC_UNARY_H

#include <grpc/grpc.h>

/* What the call sends and where its results land. */
typedef struct bench_unary {
    grpc_byte_buffer *send, *recv;
    grpc_metadata_array initial, trailing;
    grpc_status_code status;
    grpc_slice details;
} bench_unary;

/* Takes `send` (owned from here on) and starts send-metadata,
 * send-message, close, receive-metadata, receive-message and
 * receive-status on `call` with `tag`. */
grpc_call_error bench_unary_start(grpc_call *call, bench_unary *u, grpc_byte_buffer *send,
                                  void *tag);
/* Releases what a completed call sent and received (not the call). */
void bench_unary_fini(bench_unary *u);

#endif

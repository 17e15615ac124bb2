/* bench — one unary call's batch (grpc_unary.h). */
#include "grpc_unary.h"

#include <grpc/byte_buffer.h>
#include <string.h>

grpc_call_error bench_unary_start(grpc_call *call, bench_unary *u, grpc_byte_buffer *send,
                                  void *tag)
{
    memset(u, 0, sizeof *u);
    u->send = send;
    grpc_metadata_array_init(&u->initial);
    grpc_metadata_array_init(&u->trailing);
    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = u->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &u->initial;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &u->recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &u->trailing;
    ops[5].data.recv_status_on_client.status = &u->status;
    ops[5].data.recv_status_on_client.status_details = &u->details;
    return grpc_call_start_batch(call, ops, 6, tag, NULL);
}

void bench_unary_fini(bench_unary *u)
{
    grpc_metadata_array_destroy(&u->initial);
    grpc_metadata_array_destroy(&u->trailing);
    grpc_slice_unref(u->details);
    grpc_byte_buffer_destroy(u->send);
    if (u->recv)
        grpc_byte_buffer_destroy(u->recv);
}

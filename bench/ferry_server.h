/* bench — the ferry rpc_server the benchmark calls, in a forked child.
 *
 * Methods:
 *   BENCH_ECHO_METHOD  RPC_METHOD_INLINE; replies with the request's payload
 *                      (the head is empty both ways).
 *   BENCH_SINK_METHOD  runs on the handler pool; takes a payload, frees it
 *                      with rpc_msg_fini() and replies with no payload. The
 *                      request head is a ferry.PingRequest whose nonce is the
 *                      payload's decoded size (checked); the reply head is a
 *                      PingRequest whose nonce is the payload's wire size, so
 *                      the client can report lz4's ratio as sent. */
#ifndef FERRY_BENCH_FERRY_SERVER_H
#define FERRY_BENCH_FERRY_SERVER_H

#include "child.h"

#define BENCH_ECHO_METHOD "/ferry.bench.Bench/Echo"
#define BENCH_SINK_METHOD "/ferry.bench.Bench/Sink"

/* Forks the server. Call before the parent calls grpc_init(). */
int bench_ferry_server_start(bench_child *c);

#endif

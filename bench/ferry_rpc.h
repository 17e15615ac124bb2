/* bench — ferry's rpc client, driven against bench/ferry_server.c.
 *
 * One uv loop, one rpc_client, one rpc_channel to 127.0.0.1:port. N calls
 * are kept in flight by completion callbacks that start the next call.
 * Sink payloads are lent from the caller's preallocated buffer (no copy:
 * payload_free counts the releases), as the collective and a push send. */
#ifndef FERRY_BENCH_FERRY_RPC_H
#define FERRY_BENCH_FERRY_RPC_H

#include <stddef.h>
#include <stdint.h>

#include "rpc/rpc.h"

typedef struct bench_ferry bench_ferry;

/* Creates the loop, client and channel. The caller has called grpc_init().
 * Returns 0 or -1 with a message. */
int bench_ferry_open(bench_ferry **out, int port);

/* Makes `calls` echo calls with a BENCH_ECHO_BYTES payload keeping `inflight`
 * in flight; stores each call's latency in µs in lat_us[calls] when not
 * NULL. Returns the elapsed seconds, or -1 with a message on stderr. */
double bench_ferry_echo(bench_ferry *f, int inflight, int calls, double *lat_us);

/* Sends payload[0..len) with `codec` to the sink `calls` times, one at a
 * time. Stores the wire bytes of the last one in *wire_len. Returns the
 * elapsed seconds, or -1, once gRPC has let go of the payload (not
 * counted in the seconds). */
double bench_ferry_sink(bench_ferry *f, const void *payload, size_t len, rpc_codec codec,
                        int calls, uint64_t *wire_len);

/* Destroys the channel and client, runs the loop dry and closes it. Returns
 * 0, or -1 if the loop still had handles open. NULL is a no-op. */
int bench_ferry_close(bench_ferry *f);

#endif

/* bench — baseline B: the least a plain-C gRPC-core echo costs.
 *
 * Server: a forked child with one registered method, its own completion-queue
 * thread, and one 4-op batch per reply (send initial metadata, send the
 * request's bytes back, send status, receive close). Client: the calling
 * thread, one channel, a registered call and one 6-op batch per call, polling
 * its completion queue directly (no libuv, no framework). Max message
 * lengths are -1 on both sides. */
#ifndef FERRY_BENCH_BARE_ECHO_H
#define FERRY_BENCH_BARE_ECHO_H

#include "child.h"
#include "opts.h"

#define BENCH_BARE_METHOD "/ferry.bench.BareEcho/Echo"

/* Forks the echo server. Call before the parent calls grpc_init(). */
int bench_bare_server_start(bench_child *c);

typedef struct bench_bare bench_bare;

/* Opens a channel to 127.0.0.1:port. The caller has called grpc_init().
 * Returns 0 or -1. */
int bench_bare_open(bench_bare **out, int port);

/* Makes `calls` echoes of BENCH_ECHO_BYTES bytes keeping `inflight` in
 * flight; stores each call's latency in µs in lat_us[calls] when not NULL.
 * Returns the elapsed seconds, or -1 with a message on stderr. */
double bench_bare_run(bench_bare *b, int inflight, int calls, double *lat_us);

/* Closes the channel and its queue. NULL is a no-op. */
void bench_bare_close(bench_bare *b);

#endif

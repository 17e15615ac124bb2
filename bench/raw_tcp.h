/* bench — baseline A: bulk bytes over a loopback TCP socket.
 *
 * A forked child accepts one connection and, for each message, reads it
 * whole into a reused, pre-touched buffer of the largest message's size,
 * then answers one byte. The parent writes each message in 1 MiB writes and
 * times from the first write to the answer: the span a unary call with an
 * empty reply covers. No gRPC here. */
#ifndef FERRY_BENCH_RAW_TCP_H
#define FERRY_BENCH_RAW_TCP_H

#include <stddef.h>

#include "child.h"

#define BENCH_TCP_WRITE ((size_t)1 << 20)

typedef struct bench_tcp {
    bench_child child;
    int listen_fd, fd;
    size_t max_len;
} bench_tcp;

/* Forks the receiver (messages up to max_len bytes). Call before the parent
 * calls grpc_init(); connect with bench_tcp_connect() after forking any
 * other child, so that no child inherits the connection. */
int bench_tcp_start(bench_tcp *t, size_t max_len);
int bench_tcp_connect(bench_tcp *t);

/* Sends buf[0..len) and waits for the answer. Returns seconds, or -1. */
double bench_tcp_send(bench_tcp *t, const void *buf, size_t len);

/* Tells the receiver to stop and reaps it. Returns 0 if it exited cleanly. */
int bench_tcp_stop(bench_tcp *t);

#endif

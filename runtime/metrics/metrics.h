/* runtime/metrics — a worker's figures in Prometheus' text format, served
 * over HTTP for a monitoring system to scrape (`ferry start N
 * --metrics-port P`: worker r on port P + r):
 *
 *   ferry_rpc_calls_total{method,code}       calls ended, by gRPC status
 *   ferry_rpc_received_bytes_total{method}   requests as on the wire
 *   ferry_rpc_sent_bytes_total{method}       replies as on the wire
 *   ferry_rpc_call_seconds{method}           a histogram of call latency
 *   ferry_executor_slots{state}              handler threads: total, busy, stuck
 *   ferry_executor_queued                    calls waiting for one
 *   ferry_device_memory_bytes{kind}          free and total (a device that says)
 *   ferry_modules_loaded, ferry_uptime_seconds, ferry_worker_restarts
 *   ferry_train_epochs_total, ferry_train_steps_total,
 *   ferry_train_samples_total, ferry_train_samples_per_second
 *
 * Every series carries the worker's rank (rank="-1" for a worker of no
 * cluster). The server is libmicrohttpd's, on a thread of its own: a
 * scrape never waits on the worker's calls, nor they on it. */
#ifndef FERRY_RUNTIME_METRICS_H
#define FERRY_RUNTIME_METRICS_H

#include <stddef.h>

#include "runtime/runtime.h"

typedef struct rt_metrics rt_metrics;

/* Serves `w`'s metrics at http://HOST:PORT/metrics (host "127.0.0.1",
 * "::1", or another address of this machine; port 0 picks a free one).
 * Returns 0, or FERRY_EADDRINUSE / FERRY_EINVAL / FERRY_EIO with `err`
 * saying why. */
int rt_metrics_start(rt_worker *w, const char *host, int port, rt_metrics **out,
                     char *err, size_t errlen);
/* The bound port. */
int rt_metrics_port(const rt_metrics *m);
/* Stops serving and frees; NULL is a no-op. */
void rt_metrics_stop(rt_metrics *m);

/* The exposition text of `w` now (malloc'd, NUL-terminated), or NULL for
 * want of memory. */
char *rt_metrics_text(rt_worker *w);

#endif

/* runtime — the worker: its gRPC service handlers. (Module cache, executor,
 * devices and collectives arrive with later issues.) */
#ifndef FERRY_RUNTIME_H
#define FERRY_RUNTIME_H

#include "rpc/rpc.h"

#define RT_METHOD_PING "/ferry.Worker/Ping"

/* Replies to Ping with this process's ferry version, pid, host name, device
 * description, the request's nonce, rank and uptime. Never blocks: register it
 * with RPC_METHOD_INLINE. `data` may be NULL or an rt_identity. */
void rt_ping_handler(rpc_srv_call *sc, rpc_msg *req, void *data);

/* What a worker says about itself. */
typedef struct rt_identity {
    int rank;       /* -1 before the cluster assigns one */
    double started; /* uv_hrtime() / 1e9 at start */
} rt_identity;

/* A one-line description of the CPU this process runs on, e.g.
 * "cpu: AMD EPYC 7B13 (2 cores)". Writes at most len bytes into buf. */
void rt_cpu_describe(char *buf, size_t len);

#endif

/* proxyworker — the master's typed stub for one worker.
 *
 * Each request is an rpc_call in caller memory: pass a callback, or NULL and
 * wait on it as a future (rpc_call_wait / rpc_call_wait_all). Every request
 * of every proxyworker of a client shares that client's libuv loop, and all
 * requests to one worker share one HTTP/2 connection. Start functions run on
 * the loop thread; a start that fails returns the error and never completes
 * the call (rpc's contract). Every request but ping carries the token. */
#ifndef FERRY_PROXYWORKER_H
#define FERRY_PROXYWORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"
#include "rpc/rpc.h"

typedef struct pw pw;

typedef struct pw_opts {
    const char *target; /* "127.0.0.1:7100" */
    const char *token;  /* the cluster token; copied */
    int rank;
    size_t max_payload; /* 0: RPC_DEFAULT_MAX_PAYLOAD */
} pw_opts;

/* Opens the channel (lazily connected). Returns 0 or a FERRY_E* code. */
int pw_create(rpc_client *c, const pw_opts *opts, pw **out);

/* Cancels what is in flight (callbacks still run) and frees. NULL: no-op. */
void pw_destroy(pw *p);

const char *pw_target(const pw *p);
int pw_rank(const pw *p);

/* Requests. `timeout_ms` <= 0: no deadline. */
int pw_ping(pw *p, rpc_call *call, uint64_t nonce, int64_t timeout_ms, rpc_call_cb cb);

/* Offers module `sha256` (hex) named `name`; `bytes` NULL asks whether the
 * worker has it already (it fails with FERRY_ENOENT if not). `bytes` is
 * copied by the start: the caller may reuse it once the start returns. */
int pw_load_module(pw *p, rpc_call *call, const char *sha256, const char *name,
                   const void *bytes, size_t len, int64_t timeout_ms, rpc_call_cb cb);

/* Runs `function` of module `sha256`, with the rank and world size handed to
 * it. `arg` is copied by the start, as `bytes` above. */
int pw_call(pw *p, rpc_call *call, const char *sha256, const char *function,
            int world_size, const void *arg, size_t len, int64_t timeout_ms,
            rpc_call_cb cb);

int pw_stats(pw *p, rpc_call *call, int64_t timeout_ms, rpc_call_cb cb);

/* Asks the worker to exit, giving its calls `grace_ms`. */
int pw_shutdown(pw *p, rpc_call *call, uint32_t grace_ms, int64_t timeout_ms,
                rpc_call_cb cb);

/* Asks rank 0 of a launcher's world who has joined its rendezvous. */
int pw_rendezvous(pw *p, rpc_call *call, int64_t timeout_ms, rpc_call_cb cb);

/* Sends bytes offset..offset+len of data file `sha256` (hex) of `size`
 * bytes, kept as `name`; `chunk` NULL (len 0) asks whether the worker has
 * it. `chunk` is copied by the start. */
int pw_put_data(pw *p, rpc_call *call, const char *sha256, const char *name,
                uint64_t size, uint64_t offset, const void *chunk, size_t len,
                int64_t timeout_ms, rpc_call_cb cb);

/* Replies of completed, successful calls, as proto/'s views. Each returns
 * 0 with a view to free with proto_free(), FERRY_EINVAL when the call has
 * not completed or failed, or FERRY_ECORRUPT when its head is not the
 * method's reply. */
int pw_ping_result(const rpc_call *call, proto_ping_reply **out);
int pw_load_module_result(const rpc_call *call, proto_load_module_reply **out);
int pw_stats_result(const rpc_call *call, proto_stats_reply **out);
int pw_rendezvous_result(const rpc_call *call, proto_rendezvous_reply **out);
int pw_put_data_result(const rpc_call *call, proto_put_data_reply **out);

/* Takes a Call's result bytes out of the reply: *out to free with
 * rpc_buf_free() (NULL with *len 0 when empty). */
void pw_call_result(rpc_call *call, void **out, size_t *len);

#endif

/* runtime/collective — all-reduce and broadcast of float32 buffers between
 * the ranks of a session, worker to worker over gRPC (ReduceChunk); the
 * master is never on the data path.
 *
 *   geometry.c  how a buffer splits into segments and chunks (both ends
 *               compute it, so the receiver can check every chunk)
 *   hub.c       a process's sessions by id; the ReduceChunk handler
 *   comm.c      a session: who runs its work, its channels, ops, waits
 *   ring.c      the ring all-reduce and broadcast as chunk events
 *   half.c      float32 <-> IEEE half for --grad-compression fp16
 *
 * Algorithm: ring reduce-scatter then all-gather (Patarasuk and Yuan's
 * bandwidth-optimal ring, as in Horovod and NCCL). Each rank's segment is
 * cut into chunks; a chunk is forwarded as soon as it has been reduced, so
 * sending, receiving and reducing overlap down the ring. Two ranks without
 * fp16 exchange their whole buffers instead (one hop instead of two, the
 * same bytes). A session keeps a few chunks on the wire at a time, in the
 * order they became ready. Sends lend the caller's buffer to gRPC (no copy
 * before the kernel), and an op ends only once gRPC has let go of all of
 * it, failed or not; received chunks are reduced straight from rpc's receive
 * buffer into place.
 *
 * Threads. A hub's sessions run on its server's poller: one thread that
 * receives every chunk (the ReduceChunk handler runs inline there) and
 * completes every send, as the server and the sessions' clients share its
 * queue. A session's work is done under its own mutex by whichever thread
 * has it to do: the caller that starts an op sends its first chunks
 * itself; the poller's thread reduces a chunk where it arrived and sends
 * it on. Nothing is handed between threads but the end of an op, to its
 * waiter; a ticker thread per session retries sends and finds silent
 * peers.
 * Callers start ops and wait for them from any one thread at a time. */
#ifndef FERRY_RUNTIME_COLLECTIVE_H
#define FERRY_RUNTIME_COLLECTIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"
#include "proto/train_spec.h"
#include "rpc/rpc.h"

/* The flags ReduceChunk is served with: inline, its payload read where gRPC
 * received it (see rt_reduce_chunk_handler). */
#define RT_REDUCE_CHUNK_FLAGS (RPC_METHOD_INLINE | RPC_METHOD_PAYLOAD_RUNS)

/* The session's secret: every chunk carries it, and a chunk without it is
 * refused before anything else (rt_reduce_chunk_handler). The cluster
 * token lets a client call ReduceChunk; only the session's ranks, told
 * the secret by their master, can pass for one of them. */
#define RT_COMM_SECRET_BYTES 32

#define RT_COMM_DEFAULT_CHUNK   ((size_t)PROTO_TRAIN_WORKER_CHUNK_BYTES)
#define RT_COMM_DEFAULT_TIMEOUT PROTO_TRAIN_WORKER_TIMEOUT_MS

/* An all-reduce in a world of 2^k ranks runs as k exchange rounds (rank r
 * with r ^ 2^j in round j) up to this many bytes, and round the ring
 * above: k rounds move k whole buffers where the ring moves under two, but
 * take k hops instead of 2 (W - 1), and each hop has a fixed cost. On 4
 * local ranks (2 vCPUs) rounds took half the ring's time at 64 KiB, about
 * the same at 1 MiB and 15% more at 2 MiB; the mlp's 0.9 MB gradient
 * trained 15-45% faster. Two ranks always exchange. */
#define RT_EX_MAX_BYTES ((size_t)1 << 20)

/* The exchange rounds of a world: log2(world), or 0 when the world is not
 * a power of two (those run the ring). */
int rt_exchange_rounds(int world);

/* ---- the hub: a process's sessions ------------------------------------------ */

typedef struct rt_hub rt_hub;

/* `poller`: the one the hub's server runs on (rpc_server_opts.poller),
 * where its sessions' calls complete. It must outlive the hub. */
int rt_hub_create(rpc_poller *poller, rt_hub **out);
/* Every session must have been destroyed. NULL: no-op. */
void rt_hub_destroy(rt_hub *h);

/* The ReduceChunk method: register it with RPC_METHOD_INLINE and the hub as
 * its data (behind the cluster-token check). Checks the chunk against its
 * session's geometry and files it; replies at once. Refusals: NOT_FOUND for
 * an unknown session; PERMISSION_DENIED, naming the caller's address, for a
 * chunk without the session's secret (checked first: such a chunk is
 * neither kept nor counted, and learns nothing of the session);
 * FAILED_PRECONDITION for a session that has failed,
 * with its error ("rank 1 of session 7 stopped (ETIMEDOUT): ..."),
 * INVALID_ARGUMENT for a wrong sender, phase, step, ring step, chunk index,
 * element type or length; each text says what was expected. Never
 * blocks. */
void rt_reduce_chunk_handler(rpc_srv_call *sc, rpc_msg *req, void *hub);

/* ---- a session --------------------------------------------------------------- */

typedef enum {
    RT_COMPRESS_NONE = 0,
    RT_COMPRESS_LZ4 = 1,  /* each chunk lz4-framed where that pays (rpc's AUTO) */
    RT_COMPRESS_FP16 = 2, /* values travel as IEEE half, are summed in float32 */
} rt_compress;

/* "none"/"" , "lz4", "fp16" -> RT_COMPRESS_*; -1 for anything else. */
int rt_compress_parse(const char *name);
const char *rt_compress_name(rt_compress c);

typedef struct rt_comm_opts {
    uint64_t session; /* unique among the hub's sessions; names it on the wire */
    int rank, world;  /* 0 <= rank < world */
    /* world addresses ("127.0.0.1:7101"); only the right neighbour's,
     * peers[(rank + 1) % world], and in a world of 2^k ranks the exchange
     * partners', peers[rank ^ 2^j], are dialled. Copied. */
    const char *const *peers;
    const char *token;  /* sent with every chunk; NULL: none. Copied. */
    /* RT_COMM_SECRET_BYTES bytes, the same on every rank of the session:
     * sent with every chunk, and a chunk received without it is refused.
     * Required when world > 1. Copied, and wiped when the session ends. */
    const uint8_t *secret;
    size_t chunk_bytes; /* 0: RT_COMM_DEFAULT_CHUNK; rounded to 64 bytes */
    rt_compress compress;
    /* A collective that makes no progress this long fails, naming the rank
     * it waits for (0: RT_COMM_DEFAULT_TIMEOUT). Sends carry it as their
     * deadline. */
    int64_t timeout_ms;
    size_t max_payload; /* 0: RPC_DEFAULT_MAX_PAYLOAD */
} rt_comm_opts;

typedef struct rt_comm rt_comm;

/* Registers session o->session in `hub` (chunks for it are kept from now
 * on) and starts its ticker. Returns 0, or FERRY_EINVAL / FERRY_EEXIST /
 * FERRY_ENOMEM with `err` saying why. */
int rt_comm_create(rt_hub *hub, const rt_comm_opts *o, rt_comm **out, char *err,
                   size_t errlen);

/* Unregisters, fails what is still running, waits for its sends to end
 * and for gRPC to let go of their bytes, and frees, ops never waited for
 * included. No rt_comm_wait may be
 * running, and it must not run on the hub's poller (whose thread ends the
 * sends). NULL: no-op. */
void rt_comm_destroy(rt_comm *c);

int rt_comm_rank(const rt_comm *c);
int rt_comm_world(const rt_comm *c);

/* One collective in flight. */
typedef struct rt_comm_op rt_comm_op;

/* Starts summing `n` floats at `buf` across the ranks, in place. Every rank
 * must start the same collectives, with the same n, in the same order.
 * `buf` is lent until rt_comm_wait() returns (or rt_comm_destroy(), for an
 * op never waited for), which is only once gRPC holds none of it: do not
 * touch it meanwhile.
 * Returns 0 with *op set, or the session's sticky error (a collective
 * failed earlier: the session is unusable). Any thread. */
int rt_comm_allreduce_start(rt_comm *c, float *buf, size_t n, rt_comm_op **op);

/* Starts copying `n` floats at root's `buf` into every rank's `buf`. */
int rt_comm_broadcast_start(rt_comm *c, float *buf, size_t n, int root, rt_comm_op **op);

/* Waits for `op` and frees it. Polls cancelled(arg) (NULL: never) about
 * every 20 ms: a cancellation fails the session. Returns 0; FERRY_ETIMEDOUT
 * when a peer went silent, FERRY_EUNAVAIL when the right neighbour cannot
 * be reached (one never reached yet is retried until the timeout),
 * FERRY_EPROTO when peers disagree, FERRY_ECANCELED; or, when the right
 * neighbour's session failed first, its code. `err` names the rank, its
 * address and what the collective was doing ("rank 1 (127.0.0.1:7101) sent
 * nothing for 3.0 s: all-reduce 12, reduce-scatter ring step 0, chunk 0 of
 * 1"; "rank 1 (...) did not take all-reduce 12, ...: rank 1 of session 7
 * stopped (ETIMEDOUT): <its error>"). The first failure is sticky. */
int rt_comm_wait(rt_comm *c, rt_comm_op *op, bool (*cancelled)(void *), void *arg,
                 char *err, size_t errlen);

/* Fails the session from this rank (FERRY_ECANCELED, `why` its text, as
 * "rank 1 of session 7 stopped (ECANCELED): <why>" to the peers): what is
 * in flight fails and every later op at once, and a peer's next chunk is
 * refused with this error, so that it stops instead of waiting for a rank
 * that has left the collective. Any thread but the hub's poller's. */
void rt_comm_abort(rt_comm *c, const char *why);

/* Blocking forms: start and wait, polling cancelled(arg) as rt_comm_wait
 * does (NULL: never). A start that fails says why in `err` (the session's
 * error when it has one). */
int rt_comm_allreduce(rt_comm *c, float *buf, size_t n, bool (*cancelled)(void *),
                      void *arg, char *err, size_t errlen);
int rt_comm_broadcast(rt_comm *c, float *buf, size_t n, int root,
                      bool (*cancelled)(void *), void *arg, char *err, size_t errlen);

/* What the session has moved so far (for benchmarks and tests). */
typedef struct rt_comm_stats {
    uint64_t ops;           /* collectives completed */
    uint64_t chunks_sent;   /* ReduceChunk calls that succeeded */
    uint64_t chunks_lz4;    /* of those received, how many arrived lz4-framed */
    uint64_t bytes_sent;    /* payload bytes before compression */
    uint64_t wire_received; /* payload bytes received, as on the wire */
    uint64_t retries;       /* sends repeated because the peer had not yet
                               registered the session */
    uint64_t reconnects;    /* sends repeated because the right neighbour's
                               server could not be reached yet */
    /* Chunks that came before this rank started their collective. */
    uint64_t held;          /* kept until it started */
    uint64_t held_bytes;    /* what those kept now are charged (payload and
                               overhead), never above the session's budget */
    uint64_t held_peak;     /* the most held_bytes has been */
    uint64_t held_refused;  /* refused (NOT_FOUND): too far ahead or over budget */
    uint64_t strays;        /* kept, then dropped: they did not fit their
                               collective when it started */
} rt_comm_stats;

void rt_comm_get_stats(rt_comm *c, rt_comm_stats *out);

/* Records the chunks' sends, receives and reductions into `tl`
 * (runtime/train/timeline.h), which must outlive the session (a training
 * session destroys its comm before its trainer); between ops. */
struct rt_timeline;
void rt_comm_set_timeline(rt_comm *c, struct rt_timeline *tl);

/* ---- fp16 --------------------------------------------------------------------- */

/* IEEE binary16 <-> float32, round to nearest even; NaN and Inf survive. */
void rt_half_from_float(uint16_t *dst, const float *src, size_t n);
void rt_half_to_float(float *dst, const uint16_t *src, size_t n);
void rt_half_add_to_float(float *dst, const uint16_t *src, size_t n);
/* Rounds each value to the nearest half, in place (what a receiver of the
 * fp16 copy will hold). */
void rt_half_round(float *x, size_t n);

#endif

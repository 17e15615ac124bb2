/* proto — the wire protocol as ferry's own C: the Worker service's method
 * names, and each message of the worker's own methods as a plain struct
 * (a "view") with one function that packs it and one that unpacks it.
 *
 * The generated protobuf-c code stays behind this header: a master or a
 * worker speaks these messages without ferry.pb-c.h. Bulk bytes (module images, call
 * arguments and results) are never in a view: they travel as rpc's payload beside the
 * packed head (rpc/rpc.h).
 *
 * Packing gives the head's bytes (proto_bytes, to hand to rpc_msg_out's
 * head_bytes); an empty message (StatsRequest, ShutdownReply) packs to no
 * bytes, which rpc sends when an rpc_msg_out has neither head nor
 * head_bytes. Unpacking reads a received head (rpc_msg's head, head_len)
 * into one allocation that holds the view and its strings, freed with
 * proto_free(); its strings are never NULL ("" when the field was absent).
 * An unpack refuses bytes that are not the message with FERRY_ECORRUPT, as
 * rpc_msg_unpack() does. Every function is thread-safe. */
#ifndef FERRY_PROTO_H
#define FERRY_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the Worker service's methods (proto/ferry.proto) ---------------------- */

#define PROTO_METHOD_PING         "/ferry.Worker/Ping"
#define PROTO_METHOD_LOAD_MODULE  "/ferry.Worker/LoadModule"
#define PROTO_METHOD_CALL         "/ferry.Worker/Call"
#define PROTO_METHOD_STATS        "/ferry.Worker/Stats"
#define PROTO_METHOD_SHUTDOWN     "/ferry.Worker/Shutdown"
#define PROTO_METHOD_REDUCE_CHUNK "/ferry.Worker/ReduceChunk"
#define PROTO_METHOD_PUSH         "/ferry.Worker/Push"
#define PROTO_METHOD_PULL         "/ferry.Worker/Pull"

/* ---- packed heads ----------------------------------------------------------- */

/* A packed message head. `data` is malloc'd (NULL when len is 0). */
typedef struct proto_bytes {
    uint8_t *data;
    size_t len;
} proto_bytes;

/* Frees what `b` holds and zeroes it. Safe on a zeroed one. */
void proto_bytes_fini(proto_bytes *b);

/* Frees a view an unpack returned. NULL: no-op. */
void proto_free(void *view);

/* ---- Ping --------------------------------------------------------------------- */

typedef struct proto_ping_req {
    uint64_t nonce; /* echoed in the reply */
} proto_ping_req;

/* What a worker says about itself: the fields `ferry status` and the health
 * checks read. */
typedef struct proto_ping_reply {
    char *version; /* the worker's ferry version, "MAJOR.MINOR.PATCH" */
    int32_t pid;
    char *hostname;
    char *device; /* "cpu: ... (2 cores)" or "cuda:0 ..." */
    uint64_t nonce;
    int32_t rank; /* -1 before one is assigned */
    double uptime_s;
    char *last_crash;  /* the crash recorded before this start, "" if none */
    uint64_t crash_id; /* changes with each recorded crash; 0 if none */
    uint32_t restarts; /* how often the supervisor restarted the worker */
    uint32_t slots;    /* the worker's handler threads */
    uint32_t busy_slots;
    uint32_t stuck_calls;
    double oldest_call_s;
} proto_ping_reply;

int proto_ping_req_pack(const proto_ping_req *in, proto_bytes *out);
int proto_ping_req_unpack(const void *buf, size_t len, proto_ping_req **out);
int proto_ping_reply_pack(const proto_ping_reply *in, proto_bytes *out);
int proto_ping_reply_unpack(const void *buf, size_t len, proto_ping_reply **out);

/* ---- LoadModule --------------------------------------------------------------- */

typedef struct proto_load_module_req {
    char *sha256; /* hex digest of the module's bytes (the payload) */
    char *name;   /* the file name the master knows it by, as sent */
} proto_load_module_req;

typedef struct proto_load_module_reply {
    char *task_name;
    size_t n_functions;
    char **functions;
    bool cached; /* the worker had these bytes already */
} proto_load_module_reply;

int proto_load_module_req_pack(const proto_load_module_req *in, proto_bytes *out);
int proto_load_module_req_unpack(const void *buf, size_t len,
                                 proto_load_module_req **out);
int proto_load_module_reply_pack(const proto_load_module_reply *in, proto_bytes *out);
int proto_load_module_reply_unpack(const void *buf, size_t len,
                                   proto_load_module_reply **out);

/* ---- Call ------------------------------------------------------------------------ */

typedef struct proto_call_req {
    char *sha256;       /* the module */
    char *function;     /* the name it exports */
    int32_t rank;       /* the worker's rank, as the master sees it */
    int32_t world_size; /* the cluster's size; both are handed to the function */
} proto_call_req;

typedef struct proto_call_reply {
    double elapsed_s;
} proto_call_reply;

int proto_call_req_pack(const proto_call_req *in, proto_bytes *out);
int proto_call_req_unpack(const void *buf, size_t len, proto_call_req **out);
int proto_call_reply_pack(const proto_call_reply *in, proto_bytes *out);
int proto_call_reply_unpack(const void *buf, size_t len, proto_call_reply **out);

/* ---- Stats (its request is empty) --------------------------------------------- */

typedef struct proto_stats_reply {
    uint64_t calls_served; /* Call requests ended, failed ones included */
    uint32_t in_flight;    /* Call requests running now */
    uint32_t modules_loaded;
    double uptime_s;
    uint64_t calls_failed;
    uint32_t restarts;
    char *last_crash;
    uint32_t slots;
    uint32_t busy_slots;
    uint32_t stuck_calls;
    double oldest_call_s;
    char *oldest_call;  /* what the oldest running call is */
    char *slot_holders; /* what every busy slot holds */
    uint32_t queued_calls;
} proto_stats_reply;

int proto_stats_reply_pack(const proto_stats_reply *in, proto_bytes *out);
int proto_stats_reply_unpack(const void *buf, size_t len, proto_stats_reply **out);

/* ---- Shutdown (its reply is empty) -------------------------------------------- */

typedef struct proto_shutdown_req {
    uint32_t grace_ms; /* time given to calls in flight before they are cancelled */
} proto_shutdown_req;

int proto_shutdown_req_pack(const proto_shutdown_req *in, proto_bytes *out);
int proto_shutdown_req_unpack(const void *buf, size_t len, proto_shutdown_req **out);

#endif

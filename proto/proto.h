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

#include <ferry/version.h>

/* ---- the Worker service's methods (proto/ferry.proto) ---------------------- */

/* The wire's version: raised when a message changes so that a peer of the
 * last one would misread it (a field's meaning; a field appended does not
 * count). With ferry's own version, what every call says it speaks
 * (rpc's RPC_VERSION_KEY) and a worker checks: peers of two builds never
 * half understand each other. */
#define PROTO_WIRE_VERSION 1
#define PROTO_VERSION                                                                    \
    "wire " PROTO_STR_(PROTO_WIRE_VERSION) ", ferry " FERRY_VERSION_STRING
#define PROTO_STR_(x)  PROTO_STR__(x)
#define PROTO_STR__(x) #x

#define PROTO_METHOD_PING         "/ferry.Worker/Ping"
#define PROTO_METHOD_LOAD_MODULE  "/ferry.Worker/LoadModule"
#define PROTO_METHOD_CALL         "/ferry.Worker/Call"
#define PROTO_METHOD_STATS        "/ferry.Worker/Stats"
#define PROTO_METHOD_SHUTDOWN     "/ferry.Worker/Shutdown"
#define PROTO_METHOD_REDUCE_CHUNK "/ferry.Worker/ReduceChunk"
#define PROTO_METHOD_PUSH         "/ferry.Worker/Push"
#define PROTO_METHOD_PULL         "/ferry.Worker/Pull"
#define PROTO_METHOD_TRAIN_HOLD   "/ferry.Worker/TrainHold"
#define PROTO_METHOD_RENDEZVOUS   "/ferry.Worker/Rendezvous"
#define PROTO_METHOD_PUT_DATA     "/ferry.Worker/PutData"

/* ---- packed heads ----------------------------------------------------------- */

/* A packed message head. `data` is malloc'd (NULL when len is 0). */
typedef struct proto_bytes {
    uint8_t *data;
    size_t len;
} proto_bytes;

/* A bytes field of a view (a session's secret): `len` bytes at `data`. In
 * an unpacked view they lie in the view's allocation; the decoder's own
 * copy is wiped before it is freed. */
typedef struct proto_blob {
    uint8_t *data;
    size_t len;
} proto_blob;

/* Frees what `b` holds and zeroes it. Safe on a zeroed one. */
void proto_bytes_fini(proto_bytes *b);

/* Frees a view an unpack returned. NULL: no-op. */
void proto_free(void *view);

/* ---- the views' fields ------------------------------------------------------ */

/* Each view's fields are written once, as a list: F(type, name) for a field
 * of the message that has that name in proto/ferry.proto, LIST(name) for a
 * repeated string field (the view holds size_t n_<name> and char **<name>),
 * F(proto_blob, name) for a bytes field,
 * REP(type, name) for a repeated number or message field (size_t n_<name>
 * and type *<name>, type a number or the nested message's view). The struct
 * below is made from the list, and so are its pack and unpack, which copy
 * each field by the name it has in the message. */
#define PROTO_MEMBER(type, name) type name;
#define PROTO_LIST_MEMBER(name)                                                          \
    size_t n_##name;                                                                     \
    char **name;
#define PROTO_REP_MEMBER(type, name)                                                     \
    size_t n_##name;                                                                     \
    type *name;

/* ---- Ping --------------------------------------------------------------------- */

#define PROTO_PING_REQ_FIELDS(F, LIST) F(uint64_t, nonce) /* echoed in the reply */

typedef struct proto_ping_req {
    PROTO_PING_REQ_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_ping_req;

/* What a worker says about itself: the fields `ferry status` and the health
 * checks read. */
#define PROTO_PING_REPLY_FIELDS(F, LIST)                                                 \
    F(char *, version) /* the worker's ferry version, "MAJOR.MINOR.PATCH" */             \
    F(int32_t, pid)                                                                      \
    F(char *, hostname)                                                                  \
    F(char *, device) /* "cpu: ... (2 cores)" or "cuda:0 ..." */                         \
    F(uint64_t, nonce)                                                                   \
    F(int32_t, rank) /* -1 before one is assigned */                                     \
    F(double, uptime_s)                                                                  \
    F(char *, last_crash) /* the crash recorded before this start, "" if none */         \
    F(uint64_t, crash_id) /* changes with each recorded crash; 0 if none */              \
    F(uint32_t, restarts) /* how often the supervisor restarted the worker */            \
    F(uint32_t, slots)    /* the worker's handler threads */                             \
    F(uint32_t, busy_slots)                                                              \
    F(uint32_t, stuck_calls)                                                             \
    F(double, oldest_call_s)                                                             \
    F(uint64_t, clock_ns) /* the worker's monotonic clock as it replied */

typedef struct proto_ping_reply {
    PROTO_PING_REPLY_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_ping_reply;

int proto_ping_req_pack(const proto_ping_req *in, proto_bytes *out);
int proto_ping_req_unpack(const void *buf, size_t len, proto_ping_req **out);
int proto_ping_reply_pack(const proto_ping_reply *in, proto_bytes *out);
int proto_ping_reply_unpack(const void *buf, size_t len, proto_ping_reply **out);

/* ---- LoadModule --------------------------------------------------------------- */

#define PROTO_LOAD_MODULE_REQ_FIELDS(F, LIST)                                            \
    F(char *, sha256) /* hex digest of the module's bytes (the payload) */               \
    F(char *, name)   /* the file name the master knows it by, as sent */

typedef struct proto_load_module_req {
    PROTO_LOAD_MODULE_REQ_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_load_module_req;

#define PROTO_LOAD_MODULE_REPLY_FIELDS(F, LIST)                                          \
    F(char *, task_name)                                                                 \
    LIST(functions) /* n_functions, functions */                                         \
    F(bool, cached) /* the worker had these bytes already */

typedef struct proto_load_module_reply {
    PROTO_LOAD_MODULE_REPLY_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_load_module_reply;

int proto_load_module_req_pack(const proto_load_module_req *in, proto_bytes *out);
int proto_load_module_req_unpack(const void *buf, size_t len,
                                 proto_load_module_req **out);
int proto_load_module_reply_pack(const proto_load_module_reply *in, proto_bytes *out);
int proto_load_module_reply_unpack(const void *buf, size_t len,
                                   proto_load_module_reply **out);

/* ---- Call ------------------------------------------------------------------------ */

#define PROTO_CALL_REQ_FIELDS(F, LIST)                                                   \
    F(char *, sha256)      /* the module */                                              \
    F(char *, function)    /* the name it exports */                                     \
    F(int32_t, rank)       /* the worker's rank, as the master sees it */                \
    F(int32_t, world_size) /* the cluster's size; both are handed to the function */

typedef struct proto_call_req {
    PROTO_CALL_REQ_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_call_req;

#define PROTO_CALL_REPLY_FIELDS(F, LIST)                                                 \
    F(double, elapsed_s)                                                                 \
    LIST(log_lines) /* what the function logged; see CallReply.log_lines */

typedef struct proto_call_reply {
    PROTO_CALL_REPLY_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_call_reply;

int proto_call_req_pack(const proto_call_req *in, proto_bytes *out);
int proto_call_req_unpack(const void *buf, size_t len, proto_call_req **out);
int proto_call_reply_pack(const proto_call_reply *in, proto_bytes *out);
int proto_call_reply_unpack(const void *buf, size_t len, proto_call_reply **out);

/* ---- Stats (its request is empty) --------------------------------------------- */

#define PROTO_STATS_REPLY_FIELDS(F, LIST, REP)                                           \
    F(uint64_t, calls_served) /* Call requests ended, failed ones included */            \
    F(uint32_t, in_flight)    /* Call requests running now */                            \
    F(uint32_t, modules_loaded)                                                          \
    F(double, uptime_s)                                                                  \
    F(uint64_t, calls_failed)                                                            \
    F(uint32_t, restarts)                                                                \
    F(char *, last_crash)                                                                \
    F(uint32_t, slots)                                                                   \
    F(uint32_t, busy_slots)                                                              \
    F(uint32_t, stuck_calls)                                                             \
    F(double, oldest_call_s)                                                             \
    F(char *, oldest_call)  /* what the oldest running call is */                        \
    F(char *, slot_holders) /* what every busy slot holds */                             \
    F(uint32_t, queued_calls)                                                            \
    F(uint64_t, train_epochs) /* training: epochs finished here */                       \
    F(uint64_t, train_steps)                                                             \
    F(double, train_samples_per_s) /* over the last epoch */                             \
    LIST(where_module) /* each running call: see StatsReply.where_* */                   \
    LIST(where_function)                                                                 \
    LIST(where_phase)                                                                    \
    REP(int64_t, where_epoch)                                                            \
    REP(uint64_t, where_step)                                                            \
    REP(int32_t, where_waits_for)                                                        \
    REP(double, where_idle_s)                                                            \
    F(char *, ended_function) /* the last call that stepped, as it ended */              \
    F(char *, ended_phase)                                                               \
    F(int64_t, ended_epoch)                                                              \
    F(uint64_t, ended_step)                                                              \
    F(int32_t, ended_waits_for)                                                          \
    F(double, ended_ago_s)

typedef struct proto_stats_reply {
    PROTO_STATS_REPLY_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER, PROTO_REP_MEMBER)
} proto_stats_reply;

int proto_stats_reply_pack(const proto_stats_reply *in, proto_bytes *out);
int proto_stats_reply_unpack(const void *buf, size_t len, proto_stats_reply **out);

/* ---- Shutdown (its reply is empty) -------------------------------------------- */

#define PROTO_SHUTDOWN_REQ_FIELDS(F, LIST)                                               \
    F(uint32_t, grace_ms) /* time given to calls in flight before they are cancelled */

typedef struct proto_shutdown_req {
    PROTO_SHUTDOWN_REQ_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_shutdown_req;

int proto_shutdown_req_pack(const proto_shutdown_req *in, proto_bytes *out);
int proto_shutdown_req_unpack(const void *buf, size_t len, proto_shutdown_req **out);

/* ---- Between a run's workers: all-reduce chunks, parameter-server shards ------- */

/* The heads of the messages the hot path sends: their values travel as rpc's
 * payload beside them (a chunk of the buffer, a shard's floats), never in
 * the view. ReduceChunk's reply is empty. ferry.proto says what each field
 * means. */
#define PROTO_REDUCE_CHUNK_REQ_FIELDS(F, LIST)                                           \
    F(uint64_t, job) /* the session */                                                   \
    F(uint64_t, step)                                                                    \
    F(uint32_t, phase)                                                                   \
    F(uint32_t, chunk)                                                                   \
    F(uint32_t, from_rank)                                                               \
    F(uint32_t, ring_step)                                                               \
    F(uint64_t, count)                                                                   \
    F(uint32_t, elem) /* Elem: 0 float32, 1 binary16 */                                  \
    F(uint32_t, root)                                                                    \
    F(proto_blob, secret)

typedef struct proto_reduce_chunk_req {
    PROTO_REDUCE_CHUNK_REQ_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_reduce_chunk_req;

#define PROTO_PUSH_REQ_FIELDS(F, LIST)                                                   \
    F(uint64_t, job)                                                                     \
    F(uint32_t, shard)                                                                   \
    F(uint64_t, worker_step)                                                             \
    F(uint32_t, from_rank)                                                               \
    F(uint64_t, version)                                                                 \
    F(uint32_t, kind) /* PROTO_PUSH_GRADIENT or PROTO_PUSH_ELASTIC */                    \
    F(uint32_t, samples)                                                                 \
    F(bool, pull)                                                                        \
    F(uint64_t, until_samples)                                                           \
    F(proto_blob, secret)

/* PushKind: how the shard takes a push's values. */
enum { PROTO_PUSH_GRADIENT = 0, PROTO_PUSH_ELASTIC = 1 };

typedef struct proto_push_req {
    PROTO_PUSH_REQ_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_push_req;

#define PROTO_PUSH_REPLY_FIELDS(F, LIST)                                                 \
    F(uint64_t, shard_version)                                                           \
    F(uint64_t, samples)                                                                 \
    F(uint64_t, staleness)                                                               \
    F(uint64_t, min_clock)

typedef struct proto_push_reply {
    PROTO_PUSH_REPLY_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_push_reply;

#define PROTO_PULL_REQ_FIELDS(F, LIST)                                                   \
    F(uint64_t, job)                                                                     \
    F(uint32_t, shard)                                                                   \
    F(uint64_t, worker_step)                                                             \
    F(uint32_t, from_rank)                                                               \
    F(uint64_t, until_samples)                                                           \
    F(proto_blob, secret)                                                                \
    F(bool, rejoin)

typedef struct proto_pull_req {
    PROTO_PULL_REQ_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_pull_req;

#define PROTO_PULL_REPLY_FIELDS(F, LIST)                                                 \
    F(uint64_t, shard_version)                                                           \
    F(uint64_t, samples)                                                                 \
    F(uint64_t, min_clock)

typedef struct proto_pull_reply {
    PROTO_PULL_REPLY_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_pull_reply;

int proto_reduce_chunk_req_pack(const proto_reduce_chunk_req *in, proto_bytes *out);
int proto_reduce_chunk_req_unpack(const void *buf, size_t len,
                                  proto_reduce_chunk_req **out);
int proto_push_req_pack(const proto_push_req *in, proto_bytes *out);
int proto_push_req_unpack(const void *buf, size_t len, proto_push_req **out);
int proto_push_reply_pack(const proto_push_reply *in, proto_bytes *out);
int proto_push_reply_unpack(const void *buf, size_t len, proto_push_reply **out);
int proto_pull_req_pack(const proto_pull_req *in, proto_bytes *out);
int proto_pull_req_unpack(const void *buf, size_t len, proto_pull_req **out);
int proto_pull_reply_pack(const proto_pull_reply *in, proto_bytes *out);
int proto_pull_reply_unpack(const void *buf, size_t len, proto_pull_reply **out);

/* ---- Training (the results and arguments of ferry.train.*) -------------------- */

/* How a run saw its data, which a prediction must see the same way
 * (ferry.proto's TrainBeginReply says each field): TrainBeginReply and
 * PredictRequest both end with these. */
#define PROTO_SAVED_DATA_FIELDS(F, LIST, REP)                                            \
    F(char *, normalize)                                                                 \
    REP(float, norm_shift)                                                               \
    REP(float, norm_scale)                                                               \
    LIST(class_names)                                                                    \
    REP(uint32_t, input)                                                                 \
    F(uint32_t, outputs)

/* TrainBegin's options are the training spec's (train_spec.h). */
#define PROTO_TRAIN_BEGIN_REPLY_FIELDS(F, LIST, REP)                                     \
    F(uint64_t, params) /* parameters that count (padding excluded) */                   \
    F(uint64_t, train_samples)                                                           \
    F(uint64_t, test_samples)                                                            \
    F(char *, device)                                                                    \
    F(uint64_t, steps_per_epoch)                                                         \
    F(uint32_t, rank)                                                                    \
    F(uint32_t, world)                                                                   \
    F(uint32_t, buckets) /* all-reduce buckets a step (sync mode) */                    \
    F(char *, data_about) /* what the worker read: rt_dataset.about */                  \
    PROTO_SAVED_DATA_FIELDS(F, LIST, REP)

typedef struct proto_train_begin_reply {
    PROTO_TRAIN_BEGIN_REPLY_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER, PROTO_REP_MEMBER)
} proto_train_begin_reply;

#define PROTO_TRAIN_EPOCH_FIELDS(F, LIST) F(uint64_t, session)

typedef struct proto_train_epoch {
    PROTO_TRAIN_EPOCH_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_train_epoch;

/* One of the model's own figures (ModelMetric). */
#define PROTO_MODEL_METRIC_FIELDS(F, LIST) F(char *, name) F(double, value)

typedef struct proto_model_metric {
    PROTO_MODEL_METRIC_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_model_metric;

/* An epoch's figures: over every rank in sync mode, this rank's in async
 * mode (ferry.proto says which). */
#define PROTO_TRAIN_EPOCH_REPLY_FIELDS(F, LIST, REP)                                     \
    F(uint32_t, epoch) /* epochs done, 1-based */                                        \
    F(double, train_loss)                                                                \
    F(double, test_loss)                                                                 \
    F(double, test_accuracy)                                                             \
    F(uint64_t, samples)                                                                 \
    F(double, train_s)                                                                   \
    F(double, eval_s)                                                                    \
    F(double, samples_per_s)                                                             \
    F(double, allreduce_s)                                                               \
    F(double, compute_s)                                                                 \
    F(uint64_t, local_samples)                                                           \
    F(uint64_t, eval_samples)                                                            \
    F(uint64_t, pushes)                                                                  \
    REP(uint64_t, staleness) /* pushes applied, by staleness (last: that or more) */     \
    F(double, ps_wait_s)                                                                 \
    F(uint64_t, steps)                                                                   \
    REP(proto_model_metric, metrics)                                                     \
    REP(uint32_t, timeline_what) /* with a timeline: proto/timeline.h */                 \
    REP(uint64_t, timeline_start_ns)                                                     \
    REP(uint64_t, timeline_dur_ns)                                                       \
    F(uint64_t, timeline_dropped)                                                        \
    REP(double, loss_curve)       /* the training loss through the epoch */              \
    F(uint32_t, loss_curve_every) /* steps an entry (the last: what was left) */         \
    F(char *, checkpoint) /* rank 0's newest checkpoint file, "" if none this epoch */   \
    REP(double, lr_curve) /* the learning rate over loss_curve's steps */

typedef struct proto_train_epoch_reply {
    PROTO_TRAIN_EPOCH_REPLY_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER, PROTO_REP_MEMBER)
} proto_train_epoch_reply;

#define PROTO_TRAIN_END_FIELDS(F, LIST)                                                  \
    F(uint64_t, session)                                                                 \
    F(bool, discard)     /* free the session without reading its parameters back */      \
    F(bool, with_params) /* and send them back, tensor by tensor */

typedef struct proto_train_end {
    PROTO_TRAIN_END_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_train_end;

/* With with_params, the tensors: n_tensor_names names, 4 dimensions each in
 * tensor_shapes, and their float32 values one after another. */
#define PROTO_TRAIN_END_REPLY_FIELDS(F, LIST, REP)                                       \
    F(char *, params_sha256) /* of the final flat float32 parameter buffer */            \
    F(uint64_t, params)                                                                  \
    LIST(tensor_names)                                                                   \
    REP(uint32_t, tensor_shapes)                                                         \
    F(proto_blob, tensor_values)

typedef struct proto_train_end_reply {
    PROTO_TRAIN_END_REPLY_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER, PROTO_REP_MEMBER)
} proto_train_end_reply;

/* Async mode: rank `rank` was lost (its reply is empty). */
#define PROTO_TRAIN_LEAVE_FIELDS(F, LIST) F(uint64_t, session) F(uint32_t, rank)

typedef struct proto_train_leave {
    PROTO_TRAIN_LEAVE_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_train_leave;

int proto_train_begin_reply_pack(const proto_train_begin_reply *in, proto_bytes *out);
int proto_train_begin_reply_unpack(const void *buf, size_t len,
                                   proto_train_begin_reply **out);
int proto_train_epoch_pack(const proto_train_epoch *in, proto_bytes *out);
int proto_train_epoch_unpack(const void *buf, size_t len, proto_train_epoch **out);
int proto_train_epoch_reply_pack(const proto_train_epoch_reply *in, proto_bytes *out);
int proto_train_epoch_reply_unpack(const void *buf, size_t len,
                                   proto_train_epoch_reply **out);
int proto_train_end_pack(const proto_train_end *in, proto_bytes *out);
int proto_train_end_unpack(const void *buf, size_t len, proto_train_end **out);
int proto_train_end_reply_pack(const proto_train_end_reply *in, proto_bytes *out);
int proto_train_end_reply_unpack(const void *buf, size_t len,
                                 proto_train_end_reply **out);
int proto_train_leave_pack(const proto_train_leave *in, proto_bytes *out);
int proto_train_leave_unpack(const void *buf, size_t len, proto_train_leave **out);

/* ---- Predict (the arguments and result of ferry.train.predict) ------------------ */

#define PROTO_PREDICT_REQ_FIELDS(F, LIST, REP)                                           \
    F(proto_blob, spec) /* a TrainBegin packed with the data options */                  \
    LIST(param_names)                                                                    \
    REP(uint32_t, param_shapes) /* 4 a tensor */                                         \
    F(proto_blob, param_values)                                                          \
    F(uint32_t, batch)                                                                   \
    PROTO_SAVED_DATA_FIELDS(F, LIST, REP)                                                \
    F(char *, data) /* what the run read, for a file without the above */

typedef struct proto_predict_req {
    PROTO_PREDICT_REQ_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER, PROTO_REP_MEMBER)
} proto_predict_req;

#define PROTO_PREDICT_REPLY_FIELDS(F, LIST, REP)                                         \
    F(uint64_t, samples)                                                                 \
    F(uint32_t, outputs)                                                                 \
    F(proto_blob, values) /* float32, samples x outputs */                               \
    REP(int32_t, labels)                                                                 \
    F(char *, device)                                                                    \
    F(bool, classifier)

typedef struct proto_predict_reply {
    PROTO_PREDICT_REPLY_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER, PROTO_REP_MEMBER)
} proto_predict_reply;

int proto_predict_req_pack(const proto_predict_req *in, proto_bytes *out);
int proto_predict_req_unpack(const void *buf, size_t len, proto_predict_req **out);
int proto_predict_reply_pack(const proto_predict_reply *in, proto_bytes *out);
int proto_predict_reply_unpack(const void *buf, size_t len, proto_predict_reply **out);

/* ---- TrainHold ------------------------------------------------------------------ */

/* A master's hold on its training session, parked on the worker for the
 * run (ferry.proto says how it ends). Its reply is empty. */
#define PROTO_TRAIN_HOLD_REQ_FIELDS(F, LIST)                                             \
    F(uint64_t, session)                                                                 \
    F(proto_blob, secret) /* the session's */

typedef struct proto_train_hold_req {
    PROTO_TRAIN_HOLD_REQ_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_train_hold_req;

int proto_train_hold_req_pack(const proto_train_hold_req *in, proto_bytes *out);
int proto_train_hold_req_unpack(const void *buf, size_t len, proto_train_hold_req **out);

/* ---- Rendezvous ----------------------------------------------------------------- */

/* A worker joining rank 0's world, or a submitter asking who has joined. */
#define PROTO_RENDEZVOUS_REQ_FIELDS(F, LIST)                                             \
    F(bool, join)                                                                        \
    F(int32_t, rank)                                                                     \
    F(int32_t, world_size)                                                               \
    F(char *, address) /* "host:port"; a wildcard host: the caller's */

typedef struct proto_rendezvous_req {
    PROTO_RENDEZVOUS_REQ_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_rendezvous_req;

#define PROTO_RENDEZVOUS_REPLY_FIELDS(F, LIST)                                           \
    F(int32_t, world_size)                                                               \
    LIST(addresses) /* rank r's at r; "" not joined yet */

typedef struct proto_rendezvous_reply {
    PROTO_RENDEZVOUS_REPLY_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_rendezvous_reply;

int proto_rendezvous_req_pack(const proto_rendezvous_req *in, proto_bytes *out);
int proto_rendezvous_req_unpack(const void *buf, size_t len, proto_rendezvous_req **out);
int proto_rendezvous_reply_pack(const proto_rendezvous_reply *in, proto_bytes *out);
int proto_rendezvous_reply_unpack(const void *buf, size_t len,
                                  proto_rendezvous_reply **out);

/* ---- PutData ------------------------------------------------------------------ */

/* A data file's chunk (the payload), or, without one, whether the worker
 * has the file. A training names a file a worker holds so:
 * "ferry-data:<sha256>/<name>". */
#define PROTO_DATA_REF_PREFIX "ferry-data:"
#define PROTO_PUT_DATA_REQ_FIELDS(F, LIST)                                               \
    F(char *, sha256)                                                                    \
    F(char *, name)                                                                      \
    F(uint64_t, size)                                                                    \
    F(uint64_t, offset)

typedef struct proto_put_data_req {
    PROTO_PUT_DATA_REQ_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_put_data_req;

#define PROTO_PUT_DATA_REPLY_FIELDS(F, LIST)                                             \
    F(bool, have)                                                                        \
    F(uint64_t, received)

typedef struct proto_put_data_reply {
    PROTO_PUT_DATA_REPLY_FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)
} proto_put_data_reply;

int proto_put_data_req_pack(const proto_put_data_req *in, proto_bytes *out);
int proto_put_data_req_unpack(const void *buf, size_t len, proto_put_data_req **out);
int proto_put_data_reply_pack(const proto_put_data_reply *in, proto_bytes *out);
int proto_put_data_reply_unpack(const void *buf, size_t len, proto_put_data_reply **out);

#endif

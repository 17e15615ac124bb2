/* The worker's own methods' messages as views: each made from its field list
 * in proto.h and the generated message of the same fields. */
#include "proto_int.h"

/* Ping: the one method a caller without the token may use. */
PROTO_VIEW(ping_req, ping_request, PROTO_PING_REQ_FIELDS)
PROTO_VIEW(ping_reply, ping_reply, PROTO_PING_REPLY_FIELDS)

/* LoadModule: a module offered by its digest, its bytes as the payload. */
PROTO_VIEW(load_module_req, load_module_request, PROTO_LOAD_MODULE_REQ_FIELDS)
PROTO_VIEW(load_module_reply, load_module_reply, PROTO_LOAD_MODULE_REPLY_FIELDS)

/* Call: a function of a loaded module, its argument and result as payloads. */
PROTO_VIEW(call_req, call_request, PROTO_CALL_REQ_FIELDS)
PROTO_VIEW(call_reply, call_reply, PROTO_CALL_REPLY_FIELDS)

/* Stats: the worker's counters and what holds its handler slots. */
PROTO_REP_VIEW(stats_reply, stats_reply, PROTO_STATS_REPLY_FIELDS)

/* Shutdown: the worker exits, giving its calls a grace period. */
PROTO_VIEW(shutdown_req, shutdown_request, PROTO_SHUTDOWN_REQ_FIELDS)

/* Between a run's workers: a ring's chunks, and pushes to and pulls from the
 * parameter server's shards, each head beside its payload of floats. */
PROTO_VIEW(reduce_chunk_req, reduce_chunk_request, PROTO_REDUCE_CHUNK_REQ_FIELDS)
PROTO_VIEW(push_req, push_request, PROTO_PUSH_REQ_FIELDS)
PROTO_VIEW(push_reply, push_reply, PROTO_PUSH_REPLY_FIELDS)
PROTO_VIEW(pull_req, pull_request, PROTO_PULL_REQ_FIELDS)
PROTO_VIEW(pull_reply, pull_reply, PROTO_PULL_REPLY_FIELDS)

/* Training: ferry.train.*'s results and arguments, carried as Call's. */
PROTO_REP_VIEW(train_begin_reply, train_begin_reply, PROTO_TRAIN_BEGIN_REPLY_FIELDS)
PROTO_VIEW(train_epoch, train_epoch, PROTO_TRAIN_EPOCH_FIELDS)
PROTO_REP_VIEW(train_epoch_reply, train_epoch_reply, PROTO_TRAIN_EPOCH_REPLY_FIELDS)
PROTO_VIEW(train_end, train_end, PROTO_TRAIN_END_FIELDS)
PROTO_REP_VIEW(train_end_reply, train_end_reply, PROTO_TRAIN_END_REPLY_FIELDS)
PROTO_VIEW(train_leave, train_leave, PROTO_TRAIN_LEAVE_FIELDS)

/* Predict: a model run forward over a test set with given parameters. */
PROTO_REP_VIEW(predict_req, predict_request, PROTO_PREDICT_REQ_FIELDS)
PROTO_REP_VIEW(predict_reply, predict_reply, PROTO_PREDICT_REPLY_FIELDS)

/* TrainHold: a master's hold on its session, for as long as its run. */
PROTO_VIEW(train_hold_req, train_hold_request, PROTO_TRAIN_HOLD_REQ_FIELDS)
/* Rendezvous: workers started by an engine, and their submitter, meet at rank 0. */
PROTO_VIEW(rendezvous_req, rendezvous_request, PROTO_RENDEZVOUS_REQ_FIELDS)
PROTO_VIEW(rendezvous_reply, rendezvous_reply, PROTO_RENDEZVOUS_REPLY_FIELDS)
/* PutData: a data file shipped to a worker that lacks it. */
PROTO_VIEW(put_data_req, put_data_request, PROTO_PUT_DATA_REQ_FIELDS)
PROTO_VIEW(put_data_reply, put_data_reply, PROTO_PUT_DATA_REPLY_FIELDS)

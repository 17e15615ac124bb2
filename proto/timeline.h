/* What a timeline event is (TrainEpochReply.timeline_what): its kind in the
 * top 8 bits, and the all-reduce bucket or the parameter-server shard it
 * concerns (0 otherwise) in the low 24. Workers record them
 * (runtime/train/timeline.c), the submitter writes them out as a trace
 * (cluster/train/timeline.c). */
#ifndef FERRY_PROTO_TIMELINE_H
#define FERRY_PROTO_TIMELINE_H

#include <stdint.h>

typedef enum proto_tl_kind {
    PROTO_TL_COMPUTE = 1, /* the model's loss_grad: forward and backward */
    PROTO_TL_OPTIM,       /* the optimizer's step */
    PROTO_TL_DATA,        /* waiting for the loader's next batch */
    PROTO_TL_EVAL,        /* the evaluation after the epoch */
    PROTO_TL_BUCKET,      /* sync: waiting for a bucket's sum (arg: bucket) */
    PROTO_TL_PUSH,        /* async: a push to the shards (with a pull, both) */
    PROTO_TL_PULL,        /* async: a pull, the staleness bound's wait included */
    PROTO_TL_SEND,        /* a chunk's send, queued to acknowledged (arg: chunk) */
    PROTO_TL_RECV,        /* a chunk's wait, from the collective's last move */
    PROTO_TL_REDUCE,      /* a received chunk added in place (arg: chunk) */
    PROTO_TL_WAIT,        /* a collective's start to its first chunk (arg: sender) */
    PROTO_TL_CKPT,        /* a checkpoint written */
    PROTO_TL_KINDS
} proto_tl_kind;

#define PROTO_TL_ARG_MAX ((1u << 24) - 1)

static inline uint32_t proto_tl_what(proto_tl_kind kind, uint32_t arg)
{
    return (uint32_t)kind << 24 | (arg > PROTO_TL_ARG_MAX ? PROTO_TL_ARG_MAX : arg);
}

static inline proto_tl_kind proto_tl_kind_of(uint32_t what)
{
    return (proto_tl_kind)(what >> 24);
}

static inline uint32_t proto_tl_arg_of(uint32_t what)
{
    return what & PROTO_TL_ARG_MAX;
}

#endif

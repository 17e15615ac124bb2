/* runtime/ps — private header shared by the files of this folder. */
#ifndef FERRY_RUNTIME_PS_INT_H
#define FERRY_RUNTIME_PS_INT_H

#include <pthread.h>

#include "ps.h"
#include "runtime/optim/optim.h"

/* A pull the staleness bound holds back, answered by a later push. */
typedef struct rt_parked {
    struct rt_parked *next;
    rpc_srv_call *sc;
    uint64_t step, until; /* until: samples that let it go (0: none) */
    int from;
    /* A push that also pulls: its PushReply waits, with what the push saw. */
    bool push;
    uint64_t version, samples, staleness;
} rt_parked;

typedef struct rt_ps_sess rt_ps_sess;

typedef struct rt_shard {
    rt_ps_sess *sess;
    int index;
    rt_ps_span span;
    ferry_device_t *cpu; /* the values' and the optimizer's */
    pthread_mutex_t mu; /* one push at a time; everything below */
    float *values;
    rt_optim *opt; /* downpour, dynsgd */
    uint64_t version, samples;
    uint64_t *clock; /* by rank: worker_step of its last push */
    uint64_t *pushed; /* by rank: the samples its pushes claimed */
    bool *gone;      /* by rank: left the session */
    /* Continued from a checkpoint: a push may carry a version of the
     * shard's life before it (the ranks that went on pulled it), taken as
     * the current one. */
    bool restored;
    rt_parked *parked;
    rt_ps_shard_stats stats;
} rt_shard;

struct rt_ps_sess {
    rt_ps_sess *next; /* in the store, under its mutex */
    uint64_t id;
    int rank, world, shards, staleness;
    rt_ps_algo algo;
    float lr;
    uint64_t schedule_samples;
    uint32_t batch, push_steps; /* rt_ps_session_opts' */
    rt_shard *held; /* this rank's shards, in shard order */
    int n_held;
    int refs; /* handlers using it; under the store's mutex */
    uint64_t close_at; /* uv_hrtime() when the sweeper closes it; 0: open */
    uint8_t secret[RT_PS_SECRET_BYTES];
};

/* ---- shard.c -------------------------------------------------------------------- */

int rt_shard_init(rt_shard *sh, rt_ps_sess *s, int index, ferry_device_t *cpu,
                  const rt_optim_opts *optim, const float *init, size_t n);
/* Its state copied, under its mutex. Returns 0 or FERRY_ENOMEM. */
int rt_shard_snapshot(rt_shard *sh, rt_ps_shard_state *out);
/* A shard just made continues from `from` (its span checked). Returns 0 or
 * FERRY_EINVAL. */
int rt_shard_restore(rt_shard *sh, const rt_ps_shard_state *from);
/* Fails its parked pulls (the session ended) and frees. */
void rt_shard_fini(rt_shard *sh);
/* Applies one push and answers the pulls it releases; the reply or the
 * refusal goes to `sc`. */
typedef struct rt_push_in {
    int from, kind;
    uint64_t step, version;
    uint32_t samples;
    bool pull; /* the reply carries the values, as a pull at `step` */
    uint64_t until;
    const float *values;
    size_t n;
} rt_push_in;

void rt_shard_push(rt_shard *sh, rpc_srv_call *sc, const rt_push_in *in);
/* Answers now, or parks the pull until the staleness bound lets it go. */
void rt_shard_pull(rt_shard *sh, rpc_srv_call *sc, int from, uint64_t step, uint64_t until);
/* A restarted rank takes its place again and reads the values at once:
 * live, its clock the slowest live rank's (it neither holds the others
 * back nor waits for them), its pushes' samples counted from zero. */
void rt_shard_rejoin(rt_shard *sh, rpc_srv_call *sc, int rank);
/* The rank left: it no longer holds the bound back. */
void rt_shard_leave(rt_shard *sh, int rank);
/* Fails the parked pulls whose callers gave up (all of them with `all`). */
void rt_shard_sweep(rt_shard *sh, bool all);

#endif

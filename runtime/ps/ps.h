/* runtime/ps — asynchronous training's parameter server, held by the
 * workers themselves.
 *
 *   layout.c  how the flat parameter buffer splits into shards and which
 *             rank holds each (both ends compute it)
 *   shard.c   one shard: its slice, optimizer state, version, the ranks'
 *             clocks, the pulls parked by the staleness bound
 *   store.c   a worker's shards by session; the Push and Pull handlers;
 *             the sweeper that ends parked pulls whose caller gave up
 *   client.c  a worker's side of a session: pull every shard and push to
 *             every shard, all in flight at once, over one channel a peer
 *
 * A shard applies pushes one at a time (its mutex), so no update is lost
 * whatever the number of pushers; its version counts them. With a
 * staleness bound K (SSP, Ho et al. 2013) a shard parks a pull whose
 * worker_step is more than K ahead of the slowest live rank's last push and
 * answers it when that rank pushes: the wait is where the data is, so K = 0
 * is lock-step and every pull of round c sees every push of round c. */
#ifndef FERRY_RUNTIME_PS_H
#define FERRY_RUNTIME_PS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/proto.h"
#include "rpc/rpc.h"


/* Staleness histogram buckets: 0 .. RT_PS_STALE_BUCKETS-2, then "that or
 * more". */
#define RT_PS_STALE_BUCKETS 33
/* Shards a session may have. */
#define RT_PS_MAX_SHARDS 4096
/* The session's secret (TrainBegin.secret): every push and pull carries it,
 * so that only the session's ranks, told it by their master, touch its
 * shards. */
#define RT_PS_SECRET_BYTES 32

struct rt_optim_opts;
typedef struct rt_ps_shard_state rt_ps_shard_state;

/* ---- layout ---------------------------------------------------------------- */

typedef struct rt_ps_span {
    size_t lo, hi; /* floats [lo, hi) of the flat buffer */
} rt_ps_span;

/* Shard s of `n` floats cut into `shards` on 16-float boundaries (the
 * first ones a block longer); empty when there are more shards than blocks. */
rt_ps_span rt_ps_shard_span(size_t n, int shards, int s);
/* The rank that holds shard s. */
static inline int rt_ps_shard_rank(int s, int world)
{
    return s % world;
}

/* ---- the algorithms ----------------------------------------------------------- */

typedef enum {
    RT_PS_DOWNPOUR = 0, /* gradients pushed, stepped by the shard's optimizer */
    RT_PS_DYNSGD = 1,   /* the same, the step scaled by 1 / (staleness + 1) */
    RT_PS_EASGD = 2,    /* elastic averaging: workers push alpha (x - centre) */
} rt_ps_algo;

/* "", "downpour", "dynsgd", "easgd" -> RT_PS_*; -1 for anything else. */
int rt_ps_algo_parse(const char *name);
const char *rt_ps_algo_name(rt_ps_algo a);

/* ---- the store: a worker's shards ---------------------------------------------- */

typedef struct rt_ps_store rt_ps_store;

int rt_ps_store_create(rt_ps_store **out);
/* Fails every parked pull and refuses new ones (the server is about to
 * shut down and would wait for them). Idempotent. */
void rt_ps_store_shutdown(rt_ps_store *st);
/* Frees the sessions still held, lingering ones included. No handler may
 * be running. NULL: no-op. */
void rt_ps_store_destroy(rt_ps_store *st);

/* The Push and Pull methods: register them on the handler pool (not
 * inline: a push steps the optimizer) with the store as their data, behind
 * the cluster-token check. Refusals: NOT_FOUND for a session or shard this
 * worker does not hold, PERMISSION_DENIED for a call without the session's
 * secret (before anything else is read of it), INVALID_ARGUMENT for a wrong rank or length or a
 * push claiming more samples than its sender can have computed, each text
 * saying what was expected. */
void rt_ps_push_handler(rpc_srv_call *sc, rpc_msg *req, void *store);
void rt_ps_pull_handler(rpc_srv_call *sc, rpc_msg *req, void *store);

typedef struct rt_ps_session_opts {
    uint64_t session;
    int rank, world;
    int shards;    /* 0: world */
    int staleness; /* < 0: unbounded */
    rt_ps_algo algo;
    const struct rt_optim_opts *optim; /* downpour and dynsgd; defaults filled */
    /* Cosine schedule over this many samples (0: constant rate). */
    uint64_t schedule_samples;
    /* What a push may claim (the epoch ends on the samples the shards
     * count): rank r computes at most its slice of a global batch of
     * `batch` samples a local step (batch / world, the first batch % world
     * ranks one more), and one push gathers at most `push_steps` steps.
     * Both at least 1. */
    uint32_t batch, push_steps;
    /* The initial parameters (all n floats; this rank keeps its shards'). */
    const float *init;
    size_t n;
    const uint8_t *secret; /* RT_PS_SECRET_BYTES; required; copied */
    /* A run continued from a checkpoint: the states of the shards this
     * rank holds (any order, n_resume of them); a held shard without one
     * starts from `init`. Copied. */
    const rt_ps_shard_state *resume;
    int n_resume;
} rt_ps_session_opts;

/* Starts holding this rank's shards of session o->session, from o->init.
 * Returns 0, or FERRY_EEXIST / FERRY_EINVAL / FERRY_ENOMEM with `err`. */
int rt_ps_open(rt_ps_store *st, const rt_ps_session_opts *o, char *err, size_t errlen);
/* Stops holding the session's shards after `linger_ms` (0: now; waits for
 * the handlers using them): the other ranks may still read the final
 * values meanwhile. Parked pulls fail. No-op for a session not held. */
void rt_ps_close(rt_ps_store *st, uint64_t session, int64_t linger_ms);
/* Rank `rank` has left the session (its worker was lost): the staleness
 * bound stops waiting for it. Returns 0 or FERRY_ENOENT. */
int rt_ps_leave(rt_ps_store *st, uint64_t session, int rank);

/* What this worker's shards of a session saw since the last call (and
 * resets it): pushes applied and their staleness histogram. */
typedef struct rt_ps_shard_stats {
    uint64_t pushes;
    uint64_t staleness[RT_PS_STALE_BUCKETS];
} rt_ps_shard_stats;

int rt_ps_take_stats(rt_ps_store *st, uint64_t session, rt_ps_shard_stats *out);

/* ---- snapshots: what a checkpoint keeps of a shard (snapshot.c) -------------------- */

struct rt_ps_shard_state {
    int index, shards;
    size_t lo, hi;         /* floats [lo, hi) of the flat buffer */
    float *values, *m, *v; /* hi - lo each; m, v NULL where the optimizer has none */
    int t;                 /* the optimizer's steps */
    uint64_t version, samples;
};

/* The k-th shard this rank holds of `session`, copied under its mutex into
 * *out (malloc'd: rt_ps_shard_state_free). Returns 0, FERRY_ENOENT past the
 * last one or for a session not held, or FERRY_ENOMEM. */
int rt_ps_snapshot(rt_ps_store *st, uint64_t session, int k, rt_ps_shard_state *out);
void rt_ps_shard_state_free(rt_ps_shard_state *s);

/* ---- the client: a worker's side ---------------------------------------------------- */

typedef struct rt_ps_client rt_ps_client;

typedef struct rt_ps_client_opts {
    uint64_t session;
    int rank, world, shards; /* shards 0: world */
    size_t n;                /* floats in the flat buffer */
    const char *const *peers; /* world addresses; copied */
    const char *token;        /* copied */
    /* A shard that does not answer this long fails the call, naming it
     * (0: 30 s). A peer that has not yet opened the session, or not yet
     * listening, is retried meanwhile. */
    int64_t timeout_ms;
    const uint8_t *secret; /* RT_PS_SECRET_BYTES, sent with every call; required */
} rt_ps_client_opts;

/* Creates the client: its own libuv loop and rpc client, run only inside
 * its calls; every call must come from one thread at a time. */
int rt_ps_client_create(const rt_ps_client_opts *o, rt_ps_client **out, char *err,
                        size_t errlen);
void rt_ps_client_destroy(rt_ps_client *c);

/* Drops every channel and opens new ones, each peer "not there yet" again
 * (retried until the timeout): after a round trip failed on a shard whose
 * holder was lost, its restarted successor is reached at once rather than
 * after the old channel's reconnect backoff. Returns 0 or FERRY_E*. */
int rt_ps_client_reconnect(rt_ps_client *c, char *err, size_t errlen);

/* What a round trip learnt. */
typedef struct rt_ps_seen {
    uint64_t samples;   /* the most any shard reported */
    uint64_t min_clock; /* pulls: the least any shard reported */
} rt_ps_seen;

/* Pulls every shard into `params` (n host floats) at once and records
 * their versions for the next push. worker_step > 0: the staleness bound
 * may hold it. Returns 0, or FERRY_E* with `err` naming the shard, its
 * rank and address. A pull parked by the bound is also let go once the
 * shard has taken `until_samples` samples (0: never). */
int rt_ps_pull(rt_ps_client *c, float *params, uint64_t worker_step, uint64_t until_samples,
               rt_ps_seen *seen, bool (*cancelled)(void *), void *arg, char *err,
               size_t errlen);
/* The first pull of a rank whose worker was restarted and takes its place
 * in the session again: every shard counts it live from now on, its clock
 * the slowest live rank's (seen->min_clock: the clock to go on from). */
int rt_ps_rejoin(rt_ps_client *c, float *params, rt_ps_seen *seen,
                 bool (*cancelled)(void *), void *arg, char *err, size_t errlen);
/* Pushes `values` (n host floats; each shard gets its slice, sent without
 * a copy) to every shard at once, with the versions of the last pull.
 * Returns once gRPC has let go of every slice, whatever the outcome: the
 * caller may then reuse `values`. */
int rt_ps_push(rt_ps_client *c, const float *values, int kind, uint64_t worker_step,
               uint32_t samples, rt_ps_seen *seen, bool (*cancelled)(void *), void *arg,
               char *err, size_t errlen);
/* rt_ps_push that also pulls, in the same round trip: every shard's values
 * after the push land in `params` (n host floats; may be `values`), as
 * rt_ps_pull(worker_step, until_samples) would leave them. */
int rt_ps_push_pull(rt_ps_client *c, const float *values, int kind, uint64_t worker_step,
                    uint32_t samples, float *params, uint64_t until_samples,
                    rt_ps_seen *seen, bool (*cancelled)(void *), void *arg, char *err,
                    size_t errlen);

#endif

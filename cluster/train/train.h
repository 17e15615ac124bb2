/* cluster/train — the master side of a training run: trains a module's
 * model on the workers of a cluster through their built-in "ferry.train.*"
 * functions (begin, one call an epoch, end), in single, sync or async mode.
 * The data never crosses the network: each worker reads its own copy.
 *
 * Nothing here prints: what a run has to say (that it started, each epoch,
 * a worker lost, an error) goes to the caller's callbacks, and its figures
 * come back in a cluster_train_result. `ferry submit` is one caller; a
 * program that drives a run without the command line is another.
 *
 * Where things are:
 *   run.c         cluster_train_run: the workers, begin, the epochs, end
 *   begin.c       the TrainBegin each rank gets: session, secret, options
 *   calls.c       packing and calling ranks together, and discarding a run
 *   hold.c        the master's hold on each rank's session for the run
 *   mode_sync.c   single and sync mode's epoch and end (rank 0 speaks for all)
 *   mode_async.c  async mode's epoch and end (every rank speaks for itself)
 *   scores.c      a model's own metrics, averaged over async mode's ranks
 *   stall.c       the stall inspector: who holds the others up, and why
 *   recover.c     sync mode: a worker lost mid-run, every rank rolled back */
#ifndef FERRY_CLUSTER_TRAIN_H
#define FERRY_CLUSTER_TRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ferry/model.h>

#include "cluster/cluster.h"
#include "cluster/params/params.h"
#include "proto/train_spec.h"

typedef struct cluster_train_opts {
    /* The run's options, by name or as one spec (the same fields:
     * proto/train_spec.h says each one's meaning and default). mode NULL: sync when the
     * cluster has more than one worker; workers 0: all; the other numbers' 0: the
     * workers' defaults. */
    union {
        proto_train_spec spec;
        struct {
            PROTO_TRAIN_FIELDS
        };
    };
    bool json;
    bool ship_data;  /* the command line's --ship-data: the data files go first */
    bool classifier; /* the model's kind: reports accuracy */
    /* Parameters to start from instead of the model's initialisation (the
     * workers refuse tensors that are not the model's); NULL: none. */
    const cluster_tensors *init;
    bool with_params; /* bring the final parameters back (result.tensors) */
    /* A run continued from a checkpoint (the spec's resume names it, as
     * the workers read it): its first epoch, the one after the
     * checkpoint's (0: 1). */
    int first_epoch;
    /* The cluster file's stall thresholds (stall.c), in ms; the spec's
     * stall_warn / stall_abort, when set, win. 0: never. */
    int64_t stall_warn_ms, stall_abort_ms;
} cluster_train_opts;

/* What the workers said when the run began (rank 0's reply). */
typedef struct cluster_train_started {
    const char *mode; /* "single", "sync" or "async" */
    int workers;      /* ranks the run began with */
    int shards;       /* async mode: the parameter server's */
    const char *device;
    uint64_t params, train_samples, test_samples;
    unsigned buckets; /* sync mode: gradient buckets a step */
    const char *data; /* what rank 0 read: samples, shape, classes, normalisation */
} cluster_train_started;

typedef struct cluster_train_metric {
    const char *name;
    double value;
} cluster_train_metric;

/* One epoch over every rank: losses, accuracy and samples over all of them
 * (sync: reduced by the workers; async: added up here, weighted by each
 * rank's samples, with samples/s over the slowest rank's time). */
typedef struct cluster_train_epoch {
    unsigned epoch; /* 1-based */
    double train_loss, test_loss, test_accuracy;
    uint64_t samples;
    double samples_per_s, train_s, eval_s;
    double allreduce_s, compute_s; /* sync mode: rank 0's own */
    /* Async mode: pushes, waiting on the shards, the staleness of the
     * pushes applied so far (min/median/max in steps; `saturated`: the max
     * is the histogram's last bucket, "that or more"), live ranks. */
    double ps_wait_s;
    uint64_t pushes;
    uint64_t staleness_min, staleness_median, staleness_max;
    bool staleness_saturated;
    int live_workers;
    size_t n_metrics; /* the model's own figures */
    cluster_train_metric metrics[FERRY_MODEL_METRICS_MAX];
    /* Single and sync mode: the training loss through the epoch, each entry
     * the mean over loss_curve_every steps (the last over what was left);
     * borrowed for the callback. Async mode: none. */
    const double *loss_curve;
    size_t n_loss_curve;
    const double *lr_curve; /* the learning rate of the same steps (n_loss_curve) */
    unsigned loss_curve_every;
    const char *checkpoint; /* written in this epoch and durable ("": none) */
} cluster_train_epoch;

/* Sync mode: the worker of `rank` (at `target`, the cluster's worker
 * `worker`, process `pid`) was lost in epoch `epoch`, `how` (its
 * supervisor's record, "" when none); `back`: it was restarted, else the
 * run goes on with `left` workers. Every rank continues from `from` (a
 * checkpoint, or "" for the start), restart `restart` of at most `max`.
 * Where the run was, as the other ranks recorded it when their step failed
 * or was cancelled: `step` of the epoch (0: not known) and their `phase`
 * ("all-reduce", "gradient exchange", ...); `waited`: they were waiting
 * there for this rank's part. */
typedef struct cluster_train_lost {
    int rank, worker;
    const char *target;
    int pid, epoch;
    const char *how;
    bool back;
    int left;
    const char *from;
    int restart, max;
    uint64_t step;
    const char *phase;
    bool waited;
} cluster_train_lost;

/* The run's callbacks, all called on the caller's thread during
 * cluster_train_run(); any may be NULL. Strings are borrowed for the call. */
typedef struct cluster_train_events {
    void *data;
    /* Why the run failed, or a reply it could not read: one message each. */
    void (*error)(void *data, const char *message);
    void (*started)(void *data, const cluster_train_started *s);
    void (*epoch)(void *data, const cluster_train_epoch *e);
    /* Async mode: `rank` (at `target`) was lost in epoch `epoch` for `why`
     * and the run goes on with `left` workers. */
    void (*worker_lost)(void *data, int rank, const char *target, int epoch,
                        const char *why, int left);
    /* The training has made no progress for the stall threshold: `report`
     * names the ranks that have not arrived and what each rank is doing,
     * one line each after the first. Said once a stall. */
    void (*stall)(void *data, const char *report);
    /* Sync mode: a worker was lost and every rank goes on (see
     * cluster_train_lost). */
    void (*worker_restarted)(void *data, const cluster_train_lost *lost);
    /* Sync mode: the cluster's worker `worker` (at `target`), left out
     * earlier (`first`: it did not answer when the run began, so it was
     * never in it), answers and is taken in after epoch `epoch`: every
     * rank continues from `from` on `workers` workers. */
    void (*worker_rejoined)(void *data, int worker, const char *target, int epoch,
                            const char *from, int workers, bool first);
    /* Sync mode with --min-workers: the cluster's worker `worker` (at
     * `target`) does not answer as the run begins; the run begins without
     * it on `workers` workers. */
    void (*worker_absent)(void *data, int worker, const char *target, int workers);
    /* Async mode: the worker of `rank` (at `target`), lost in epoch
     * `lost_in` (`how`: its supervisor's crash record, "" when none), was
     * restarted and takes its place again after epoch `after` from the
     * shards' current values (`back`), or did not come back within the
     * wait or with restarts left (`restart` of at most `max` used) and the
     * run goes on without it. `from`: the checkpoint its shard was restored
     * from ("": it holds none), the others running epoch `after` again. */
    void (*worker_back)(void *data, int rank, const char *target, int lost_in,
                        const char *how, bool back, int after, int restart, int max,
                        const char *from);
    /* Sync mode, at a checkpoint of a run that grows: true, with the
     * address of the cluster's worker `worker` in `target`, when the
     * cluster has that worker now (one joined it after the run began). */
    bool (*joined)(void *data, int worker, char *target, size_t len);
    /* Sync mode: the cluster's worker `worker` (at `target`), which joined
     * the cluster while the run trained, is taken in after epoch `epoch`:
     * every rank continues from `from` on `workers` workers. */
    void (*worker_joined)(void *data, int worker, const char *target, int epoch,
                          const char *from, int workers);
    /* Sync mode, while a lost worker is waited for: true when it will not
     * come back for a reason the caller knows (the cluster shut down). */
    bool (*give_up)(void *data);
} cluster_train_events;

/* What a run that succeeded added up to. Strings are owned by it until
 * cluster_train_result_fini(). */
typedef struct cluster_train_result {
    cluster_train_started started;
    cluster_train_epoch last;                                   /* the last epoch */
    double samples, train_s, allreduce_s, compute_s, ps_wait_s; /* over the epochs */
    double wall_s;
    const char *params_sha256; /* the final parameters' */
    bool identical;            /* every rank ended with the same ones */
    /* Async mode: ranks lost, pushes over the run, the staleness of every
     * push applied, and each rank's local steps (started.workers of them). */
    int lost;
    uint64_t pushes;
    uint64_t staleness_min, staleness_median, staleness_max;
    uint64_t *steps_by_worker;
    /* With opts.with_params: the final parameters, tensor by tensor. */
    cluster_tensors tensors;
    /* Rank 0's begin reply: how the run saw its data (--save keeps it). */
    struct proto_train_begin_reply *begin;
    char *owned;         /* the strings above, one block */
    void *owned_tensors; /* the tensors', one block */
} cluster_train_result;

/* Trains the model of module `m` (called `module` in messages) as `o`
 * says, on worker 0 or on the first workers together. Sets the cluster's
 * call timeout to a day (epochs run as long as they take; the heartbeat
 * finds a dead worker). Returns 0 with *res filled, or FERRY_E* after
 * events->error said why; on failure every worker that began is asked to
 * discard its session. */
int cluster_train_run(cluster *cl, const cluster_module *m, const char *module,
                      const cluster_train_opts *o, const cluster_train_events *events,
                      cluster_train_result *res);

/* Frees what a result owns. */
void cluster_train_result_fini(cluster_train_result *res);

#endif

/* runtime/train — training a module's model on one worker's device.
 *
 *   model_ctx.c  the ferry_model_ctx_t a model computes in: workspace and
 *                the seeded generator its init draws from
 *   trainer.c    a trainer's data, buffers and parameters, and the epoch
 *                every mode runs: the mode's batches, the shared step, the
 *                mode's update, the evaluation
 *   step.c       the one step path: the batch to the device, loss_grad (as
 *                a device graph where graph.c says so), the loss checked
 *   eval.c       the evaluation on the test set, and the model's metrics
 *   graph.c      when a step is captured as a device graph and replayed
 *   mode_single.c  one worker alone: the loader's epoch, the optimizer
 *   mode_sync.c  sync mode: single's epoch with the gradient all-reduced
 *   sync.c       the gradient's all-reduce in buckets (sync mode's)
 *   mode_async.c async mode: pull from and push to the parameter server's
 *                shards (DOWNPOUR, DynSGD) or exchange with its centre
 *                variable (EASGD)
 *   train_fn.c   the built-in functions a master calls on a worker to train
 *                the model of a loaded module ("ferry.train.*"), registered
 *                with the worker's Call as a set of built-ins
 *   session.c    the one training session a worker runs, and its owner
 *   hold.c       the master's hold on its session (TrainHold), parked for
 *                the run, whose caller's end frees the session at once
 *
 * The model never sees the network or the data files: the trainer owns the
 * device buffers, the loader and the optimizer. */
#ifndef FERRY_RUNTIME_TRAIN_H
#define FERRY_RUNTIME_TRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ferry/task.h>

#include "proto/train_spec.h"
#include "runtime/collective/collective.h"
#include "runtime/data/data.h"
#include "runtime/device/device.h"
#include "runtime/optim/optim.h"
#include "runtime/ps/ps.h"

/* ---- the model's context ---------------------------------------------------- */

typedef struct rt_model_ctx {
    ferry_model_ctx_t pub; /* first: models see this */
    struct rt_rng *rng;    /* runtime/data's generator, from the seed */
    /* Where the model's grad_ready calls go (the trainer's buckets); NULL:
     * nowhere. Called on the thread running loss_grad. */
    void (*grad_ready)(void *arg, int tensor);
    void *grad_ready_arg;
    /* The training set, whose known answer ops->answer gives; NULL: none. */
    const rt_dataset *set;
    bool guarded; /* pub.work from rt_guarded_alloc, not the device's */
    size_t blen;  /* floats of pub.buffers (ferry_model_buffers_layout); 0: none */
} rt_model_ctx;

/* The model's metrics function: NULL when it has none, or its descriptor
 * was built before the member (a smaller `size`). */
typedef int (*rt_metrics_fn)(ferry_model_ctx_t *mc, const float *params, double test_loss,
                             ferry_model_metric_t *out, int max);
rt_metrics_fn rt_model_metrics(const ferry_model_t *m);
/* The model's predict function, the same way. */
typedef int (*rt_predict_fn)(ferry_model_ctx_t *mc, const float *params,
                             const ferry_batch_t *b, float *out);
rt_predict_fn rt_model_predict(const ferry_model_t *m);
/* Whether the model may take its shape from the data: it has a reshape,
 * which each run calls with its training set's shape (what the model left
 * 0 takes it, the rest stays as declared). */
bool rt_model_from_data(const ferry_model_t *m);

/* Checks the model's descriptor (version, size, kind, input, outputs, a
 * non-empty params list with positive shapes, the four functions) and fills
 * `mc` for `dev` with a workspace for batches up to `batch_max`, seeded from
 * `seed`. Returns 0, FERRY_EINVAL with `err` saying what is wrong with the
 * model, or FERRY_ENOMEM. */
int rt_model_ctx_init(rt_model_ctx *mc, const ferry_model_t *m, ferry_device_t *dev,
                      int batch_max, uint64_t seed, char *err, size_t errlen);
void rt_model_ctx_free(rt_model_ctx *mc);
/* The model's buffers (mc->blen floats, their layout) out of and into the
 * device: every model's context has them, from its init_buffers, once
 * rt_model_ctx_init has returned. 0 or the device's FERRY_E*. */
int rt_model_ctx_get_buffers(rt_model_ctx *mc, float *host);
int rt_model_ctx_set_buffers(rt_model_ctx *mc, const float *host);

/* Parameters of a model that count (padding excluded). */
size_t rt_model_param_count(const ferry_model_t *m);

/* ---- synchronous data parallelism (sync.c) ------------------------------------- */

typedef struct rt_sync rt_sync;

/* Plans the gradient's all-reduce buckets for model `m` (at least
 * `bucket_bytes` each, 0: 25 MiB) over `comm`. Returns 0 or FERRY_ENOMEM. */
int rt_sync_create(const ferry_model_t *m, ferry_device_t *dev, rt_comm *comm,
                   size_t bucket_bytes, rt_sync **out, char *err, size_t errlen);
void rt_sync_destroy(rt_sync *s);
/* On the cpu, where the model must write its gradient (inside the
 * reduction buffer, which lives as long as `s`); NULL on other devices,
 * where the trainer's own device buffer is copied in and out. */
float *rt_sync_model_grad(rt_sync *s);
int rt_sync_buckets(const rt_sync *s);
/* Before loss_grad: `grad` is the model's gradient buffer, `weight` this
 * rank's samples over the global batch's (its gradient is a mean over its
 * own samples). */
void rt_sync_step_begin(rt_sync *s, float *grad, float weight);
/* The model's grad_ready (rt_model_ctx.grad_ready with `s` as its arg). */
void rt_sync_grad_ready(void *s, int tensor);
/* After loss_grad (computed) or instead of it (no samples here): starts
 * what is left, waits for every bucket and leaves the global batch's mean
 * gradient in `grad` and its mean loss in *global_loss. 0 or FERRY_E*
 * with `err` set. */
int rt_sync_step_end(rt_sync *s, float loss, bool computed, float *global_loss,
                     bool (*cancelled)(void *), void *arg, char *err, size_t errlen);
/* Instead of rt_sync_step_end, when the step cannot go on (the model or
 * the device failed; `why` says how): fails the session, so that the other
 * ranks stop at their next chunk instead of waiting out the timeout for
 * buckets this rank will not start, and returns once the buckets it did
 * start have let go of the reduction buffer. */
void rt_sync_step_abort(rt_sync *s, const char *why);
/* Replaces every rank's parameters (device) with rank 0's; cancelled(arg)
 * (NULL: never) is polled while it waits for the peers and fails it with
 * FERRY_ECANCELED. */
int rt_sync_broadcast(rt_sync *s, float *params, bool (*cancelled)(void *), void *arg,
                      char *err, size_t errlen);
/* Sums `n` host floats across the ranks, in place. */
int rt_sync_sum(rt_sync *s, float *host, size_t n, char *err, size_t errlen);
/* Where the waits for each bucket's sum are recorded (NULL: nowhere). */
struct rt_timeline;
void rt_sync_set_timeline(rt_sync *s, struct rt_timeline *tl);

/* ---- step graphs (graph.c): when a step is captured and replayed ------------------ */

/* Turns step graphs off with "0" (they are on otherwise), so that a GPU run
 * can be measured with and without. */
#define RT_GRAPHS_ENV "FERRY_CUDA_GRAPHS"

/* What a step's graph is keyed by: a graph bakes in its batch's size and
 * every buffer address it touches (the trainer's parameters, gradient and
 * the model's workspace are fixed for its life; the batch's buffers are not
 * when staged lanes alternate). */
typedef struct rt_graph_key {
    int n;
    const void *x, *labels, *targets;
} rt_graph_key;

/* Graphs kept at once: the staged path alternates two lanes, and an evicted
 * one costs a capture. */
#define RT_GRAPHS 4

typedef enum rt_graph_action {
    RT_GRAPH_PLAIN,   /* run the step's ops one by one */
    RT_GRAPH_CAPTURE, /* capture it into slot *slot, then run the graph */
    RT_GRAPH_REPLAY,  /* run the graph of slot *slot */
} rt_graph_action;

typedef struct rt_graph_plan {
    bool enabled;
    int prev_n; /* the previous step's batch (0: none yet) */
    uint64_t tick;
    struct {
        bool used;
        bool failed; /* the capture broke: that step runs plain */
        rt_graph_key key;
        void *graph; /* the device's; NULL when failed */
        uint64_t last;
    } slot[RT_GRAPHS];
} rt_graph_plan;

/* Whether the value of RT_GRAPHS_ENV (NULL: unset) leaves graphs on. */
bool rt_graphs_enabled(const char *env_value);
void rt_graph_plan_init(rt_graph_plan *p, bool enabled);
/* The rule, pure (the device's calls are the caller's):
 *   - off: plain;
 *   - a graph for this key exists: replay it (the shape need not be the
 *     previous step's: the first full batch of an epoch replays);
 *   - a capture of this key broke before: plain;
 *   - a batch size other than the previous step's: plain — the first step
 *     at a shape chooses its convolution algorithms and grows the device's
 *     workspaces, which a capture cannot do, and the last short batch of an
 *     epoch, seen once, is not worth a graph;
 *   - else capture, into a free slot or the least recently used one, whose
 *     graph (if any) comes back in *evict for the caller to destroy.
 * *slot is the slot to capture into or replay; *evict NULL when none. */
rt_graph_action rt_graph_decide(rt_graph_plan *p, const rt_graph_key *k, int *slot,
                                void **evict);
/* After a capture into `slot`: its graph, or NULL when it broke. */
void rt_graph_captured(rt_graph_plan *p, int slot, void *graph);
/* Forgets slot's graph (it went stale) and returns it for the caller to
 * destroy; the key may be captured again. */
void *rt_graph_forget(rt_graph_plan *p, int slot);
/* The graph in `slot`. */
void *rt_graph_at(const rt_graph_plan *p, int slot);

/* ---- the trainer -------------------------------------------------------------- */

/* The smallest all-reduce chunk a begin takes (`--chunk-bytes`, declared
 * with the other options in proto/train_spec.h; 0 is the default). */
#define RT_TRAIN_MIN_CHUNK_BYTES PROTO_TRAIN_MIN_CHUNK_BYTES

typedef struct rt_train_opts {
    int batch; /* global batch; 0: 128 */
    rt_optim_opts optim;
    uint64_t seed;   /* parameters and shuffling */
    int rank, world; /* 0 and 1 for one worker (0 world: 1) */
    /* Synchronous data parallelism over `world` ranks (NULL: alone). Not
     * owned; must outlive the trainer. */
    rt_comm *comm;
    size_t bucket_bytes;  /* 0: 25 MiB */
    const char *data_dir; /* NULL: RT_FMNIST_DIR */
    /* A user's own files (--data FILE and the options that go with it),
     * read instead of the model's data set; NULL: none. Not owned. */
    const rt_data_source *data;
    int eval_batch;       /* 0: 256 */
    /* With epochs > 0 and cosine, the learning rate follows
     * lr (1 + cos(pi s / S)) / 2 over the S steps of `epochs` epochs. */
    int epochs;
    bool cosine;
    /* Training and test sets to use instead of loading the model's dataset
     * (tests); both or neither. Not owned. */
    const rt_dataset *train_set, *test_set;
    /* The parameters to start from instead of the model's init, tensor by
     * tensor (--init-from): laid out once the model has its shape, refused
     * naming the tensor when they are not its own. Not owned; NULL: init. */
    const struct proto_tensors *init_tensors;
    /* Checkpoints (checkpoint.c, sync and single mode): rank 0 writes them
     * into `ckpt_dir` (NULL: none) every `ckpt_every` ("N" steps, "Ns"
     * seconds; NULL: each epoch's end), keeping the newest `ckpt_keep` (0:
     * 2), with `ckpt_model` (the task's name) in their header. `resume`: a
     * checkpoint file every rank continues from (NULL: none). Strings are
     * copied by rt_trainer_create. */
    const char *ckpt_dir, *ckpt_every, *ckpt_model, *resume;
    int ckpt_keep;
    /* What products and convolutions compute in (RT_PREC_FP32, the zero
     * value, by default); a device that cannot is an error saying why. */
    rt_precision precision;
    /* A GPU holds the sets in its memory when they fit (see rt_devset) and
     * gathers batches there; true keeps them on the host and uploads each
     * batch (benchmarks, tests). The cpu always reads them in place. */
    bool host_batches;
    /* Polled about every 20 ms while the start waits for its peers (the
     * initial parameters from rank 0): true gives the start up with
     * FERRY_ECANCELED, so that a caller who hung up or a run that failed
     * elsewhere frees this worker at once. NULL: never. Used by
     * rt_trainer_create only. */
    bool (*cancelled)(void *);
    void *cancel_arg;

    /* Asynchronous training (with a store and world > 1): this rank holds
     * its shards of the parameters in `ps_store` (not owned) and pulls from
     * and pushes to every shard over `peers`. An epoch ends when the shards
     * have taken a training set's worth of samples from all the ranks
     * together, so a slow rank does not hold the others back. */
    rt_ps_store *ps_store;
    uint64_t session;
    const char *const *peers; /* world addresses */
    const char *token;
    const uint8_t *secret; /* the run's (RT_PS_SECRET_BYTES): every push and pull's */
    int64_t timeout_ms;
    int ps_shards;  /* 0: world */
    int staleness;  /* < 0: unbounded */
    int push_every; /* 0: 1 */
    int pull_every; /* 0: 1 */
    rt_ps_algo algo;
    float alpha; /* easgd; 0: 0.9 / world */
    int tau;     /* easgd; 0: 4 */
    /* A restarted rank taking its place again in a session the others
     * went on with, after this many epochs (0: a new session). */
    int rejoin_epoch;
    /* Record a timeline of the steps (timeline.h), which each epoch's
     * caller reads through rt_trainer_timeline. */
    bool timeline;
} rt_train_opts;

/* An epoch's training loss through its steps in at most RT_CURVE_MAX
 * points: each the mean over `every` steps (the last over `last`, fewer or
 * as many), `every` doubling (pairs merged) whenever the points would
 * overflow, so that any number of steps fits and each point stands for
 * as many steps as the others. */
#define RT_CURVE_MAX 64
typedef struct rt_loss_curve {
    double loss[RT_CURVE_MAX];
    int n;
    uint32_t every, last; /* steps in each point, and in the last */
} rt_loss_curve;

/* Adds one step's loss. */
void rt_loss_curve_add(rt_loss_curve *c, double loss);

typedef struct rt_epoch_stats {
    int epoch;         /* 1-based: epochs done */
    double train_loss; /* mean over the epoch's samples on this rank */
    double test_loss;
    double test_accuracy; /* classifier: fraction right; regressor: 0 */
    /* The model's own figures (ferry_model_t.metrics) after the evaluation;
     * names copied, cut to fit. */
    int n_metrics;
    struct {
        char name[32];
        double value;
    } metrics[FERRY_MODEL_METRICS_MAX];
    size_t samples;       /* trained on by this rank this epoch */
    double train_s;       /* wall time of the steps (data waits included) */
    double eval_s;
    double samples_per_s; /* samples / train_s */
    /* With a comm, losses, accuracy and `samples` are over every rank;
     * these are this rank's own. */
    size_t local_samples;
    double compute_s;   /* in loss_grad */
    double allreduce_s; /* waiting for the gradient's all-reduce after loss_grad */
    /* Steps run as a replayed CUDA graph, and the captures made (a GPU with
     * step graphs on, alone or in async mode: sync's all-reduce starts from
     * the host during the step). */
    size_t graph_steps, graph_captures;
    /* Async mode: nothing is reduced; losses, accuracy and samples are this
     * rank's own (the master adds the ranks up). */
    size_t eval_samples;
    uint64_t steps, pushes;
    double ps_wait_s; /* in pulls and pushes, the staleness bound's wait included */
    rt_ps_shard_stats shard; /* what this rank's shards applied */
    rt_loss_curve curve;     /* the training loss step by step, thinned */
    rt_loss_curve lr_curve;  /* the learning rate of the same steps */
} rt_epoch_stats;

typedef struct rt_trainer rt_trainer;

/* Loads the model's data, allocates parameters, gradients and optimizer
 * state on `dev` and initialises the parameters from the seed. `m` and `dev`
 * must outlive the trainer. Returns 0 or FERRY_E* with `err` set. */
int rt_trainer_create(const ferry_model_t *m, ferry_device_t *dev, const rt_train_opts *o,
                      rt_trainer **out, char *err, size_t errlen);
/* Trains one epoch, then evaluates on the whole test set. `cancelled` (NULL:
 * never) is polled between steps: FERRY_ECANCELED. A loss that is NaN or
 * infinite stops with FERRY_ERANGE ("loss is nan at epoch E step S").
 * Returns 0 or FERRY_E* with `err` set. */
int rt_trainer_epoch(rt_trainer *t, rt_epoch_stats *st, bool (*cancelled)(void *),
                     void *arg, char *err, size_t errlen);
/* Async mode: returns once every shard of the parameter server answers,
 * that is once every rank has its data and has opened its shards (a
 * shard not open yet is retried, up to the session's timeout), polling
 * `cancelled` (FERRY_ECANCELED). 0 at once in the other modes. */
int rt_trainer_peers_ready(rt_trainer *t, bool (*cancelled)(void *), void *arg, char *err,
                           size_t errlen);
/* All-reduce buckets a step (0 alone). */
int rt_trainer_buckets(const rt_trainer *t);
/* Steps (global batches) in an epoch. */
size_t rt_trainer_steps(const rt_trainer *t);
/* Length of the flat parameter buffer, padding included (ferry_model_layout). */
size_t rt_trainer_params_len(const rt_trainer *t);
/* Copies the parameters into `host` (rt_trainer_params_len floats): the
 * trainer's own, or in async mode the shards' (read over the network,
 * polling cancelled(arg), NULL: never; FERRY_ECANCELED). */
int rt_trainer_params_polled(rt_trainer *t, float *host, bool (*cancelled)(void *),
                             void *arg);
/* rt_trainer_params_polled that is never cancelled. */
int rt_trainer_params(rt_trainer *t, float *host);

/* The model's outputs on every sample of a set, in its order, with the
 * set's labels when it has them (rt_predict). */
typedef struct rt_prediction {
    size_t n, outputs_per;
    float *outputs;  /* n x outputs_per: logits, or a regressor's outputs */
    int32_t *labels; /* n, or NULL */
} rt_prediction;

void rt_prediction_free(rt_prediction *p);

/* "ferry.train.predict" (predict_fn.c): PredictRequest in, PredictReply
 * out. */
int rt_train_predict_fn(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out);

struct proto_tensors;
struct proto_train_spec;
struct proto_predict_req;
struct proto_train_begin_reply;
/* Runs model `m` forward on `dev` with the parameters `params`, `batch`
 * samples at a time (0: 256), over the samples that the data options of
 * `spec` name, seen as `saved` (a PredictRequest's saved-data fields, from
 * the parameters' file) says the run saw its data (predict.c says how):
 * what `ferry predict` computes, on a worker or in the command's own
 * process. Refused with `err` saying why: parameters that are not the
 * model's (naming the tensor), samples of another shape than the model's,
 * data that is not the run's for a file that does not say how the run
 * normalised. */
int rt_predict(const ferry_model_t *m, ferry_device_t *dev, const struct proto_tensors *params,
               const struct proto_train_spec *spec, const struct proto_predict_req *saved,
               int batch, rt_prediction *out, char *err, size_t errlen);
/* Fills the saved-data fields of a TrainBeginReply (borrowing from `m`
 * and `train`) for a run of `m` on `train`, normalised as `how` names
 * (rt_data_norm_kind; NULL: a named set, which its own name says). */
void rt_predict_saved_data(const ferry_model_t *m, const rt_dataset *train, const char *how,
                           struct proto_train_begin_reply *r);
/* The seed the named synthetic sets are drawn from: training seeds change
 * the model's start and the shuffle, never the problem it solves. */
#define RT_TRAIN_DATA_SEED 20261123u

/* The sets it trains and evaluates on. */
const rt_dataset *rt_trainer_dataset(const rt_trainer *t, bool train);
/* The trainer's timeline (opts.timeline), holding the last epoch's events
 * until the next epoch begins; NULL without one. */
struct rt_timeline *rt_trainer_timeline(rt_trainer *t);
void rt_trainer_destroy(rt_trainer *t);

#endif

/* runtime/train — the trainer's insides, shared by trainer.c and the
 * modes that drive its steps differently (async.c). */
#ifndef FERRY_RUNTIME_TRAINER_INT_H
#define FERRY_RUNTIME_TRAINER_INT_H

#include "train.h"

struct rt_trainer {
    const ferry_model_t *m;
    ferry_device_t *dev;
    rt_train_opts o;
    rt_model_ctx mc;
    rt_dataset own[2]; /* loaded here: train, test */
    const rt_dataset *set[2];
    rt_loader *train, *test;
    size_t plen;
    float *params, *grad;
    /* Device copies of a batch (not used on the cpu). */
    float *x, *targets;
    int32_t *labels;
    /* The training and test sets held on a GPU (NULL: batches uploaded from
     * the host). */
    rt_devset *dset[2];
    /* The batches of a set too large for that, staged through pinned
     * buffers (NULL: none is). */
    rt_stager *stager;
    /* Step graphs (graph.c): on a GPU with them, alone (sync mode's
     * grad_ready must run on the host during loss_grad). */
    rt_graph_plan graphs;
    float step_loss; /* the one host pointer a captured loss is written to */
    bool graph_told; /* a broken capture was logged */
    bool graph_said; /* the first capture was logged */
    rt_optim *opt;
    rt_sync *sync;          /* with a comm of more than one rank */
    struct rt_async *async; /* with a parameter-server store and more than one rank */
    bool grad_borrowed;     /* t->grad lies in the sync's reduction buffer */
    int epoch;
    uint64_t steps_done; /* optimizer steps, for the schedule */
};

/* The batch as the model sees it: in place on the cpu, copied elsewhere. */
int rt_trainer_to_device(rt_trainer *t, const rt_batch_host *hb, ferry_batch_t *b);
/* Evaluates `params` (device) on this rank's slice of the test set, summed
 * over the ranks in sync mode: test_loss, test_accuracy, eval_samples. */
int rt_trainer_evaluate(rt_trainer *t, const float *params, rt_epoch_stats *st, char *err,
                        size_t errlen);
/* Samples in global batch `step` (0-based) of an epoch. */
size_t rt_trainer_global_batch(const rt_trainer *t, size_t step);
/* The cosine schedule's rate at `frac` of the run (the optimizer's own
 * rate when there is no schedule). */
float rt_trainer_lr_at(const rt_trainer *t, double frac);

/* ---- async mode (async.c) ---------------------------------------------------- */

/* Opens this rank's shards from `init` (host, the whole flat buffer) and
 * the client to every shard. */
int rt_async_create(rt_trainer *t, const float *init, char *err, size_t errlen);
int rt_async_epoch(rt_trainer *t, rt_epoch_stats *st, bool (*cancelled)(void *),
                   void *arg, char *err, size_t errlen);
/* rt_trainer_peers_ready in async mode. */
int rt_async_ready(rt_trainer *t, bool (*cancelled)(void *), void *arg, char *err,
                   size_t errlen);
/* The model as the shards hold it (every rank reads the same once all
 * have stopped pushing). */
int rt_async_params(rt_trainer *t, float *host);
void rt_async_destroy(rt_trainer *t);

#endif

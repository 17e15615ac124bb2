/* runtime/train — the trainer's insides: the state of a trainer, the
 * interface every training mode implements, and the step path they share.
 *
 * Who calls whom, one way only: trainer.c drives an epoch through its
 * mode's table (rt_mode); the modes (mode_single.c, mode_sync.c,
 * mode_async.c) call the shared step (step.c) and the evaluation (eval.c),
 * never trainer.c; sync mode reuses single mode's epoch and adds the
 * all-reduce (sync.c) around each step. */
#ifndef FERRY_RUNTIME_TRAINER_INT_H
#define FERRY_RUNTIME_TRAINER_INT_H

#include <uv.h>

#include "timeline.h"
#include "train.h"

typedef struct rt_mode rt_mode;
typedef struct rt_ckpt rt_ckpt;

struct rt_trainer {
    const ferry_model_t *m;
    ferry_device_t *dev;
    rt_train_opts o;
    const rt_mode *mode;
    void *ms; /* the mode's own state (NULL: none) */
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
    /* Step graphs (graph.c): on a GPU with them, in a mode whose steps run
     * nothing on the host during loss_grad. */
    rt_graph_plan graphs;
    float step_loss; /* the one host pointer a captured loss is written to */
    bool graph_told; /* a broken capture was logged */
    bool graph_said; /* the first capture was logged */
    rt_optim *opt;
    bool grad_borrowed; /* t->grad lies in the mode's reduction buffer */
    int buckets;        /* all-reduce buckets a step (sync mode) */
    int epoch;
    uint64_t steps_done; /* optimizer steps, for the schedule */
    rt_timeline *tl;     /* with --timeline (NULL: none) */
    rt_ckpt *ck;         /* rank 0 writing checkpoints (NULL: not) */
    uint64_t ckpt_skip;  /* steps of the next epoch a checkpoint had taken */
};

/* One epoch as it runs: what the driver, the mode and the shared step
 * share. */
typedef struct rt_epoch_run {
    int epoch;     /* 1-based: the one running */
    uint64_t step; /* the step the messages name, counted by the mode */
    rt_epoch_stats *st;
    double loss_sum; /* each step's loss times the samples it stands for */
    size_t samples;  /* the samples the losses stand for */
    bool (*cancelled)(void *);
    void *arg;
    char *err;
    size_t errlen;
} rt_epoch_run;

/* A training mode: single (alone), sync (data parallel, the gradient
 * all-reduced) or async (the parameter server's shards). Hooks marked
 * "NULL: nothing" may be left out. Every hook runs on the thread that
 * called the trainer; those that fail set the run's (or their) `err`. */
struct rt_mode {
    /* What messages call a step: "step" (the epoch's global batches) or
     * "local step" (async: this rank's own steps). */
    const char *step_word;
    /* Steps may be captured and replayed as device graphs: nothing runs on
     * the host during loss_grad (sync's grad_ready starts all-reduces). */
    bool graphs;
    /* Writes and resumes its checkpoints itself (async: each shard's
     * holder, ckpt_async.c) rather than through checkpoint.c's rank 0. */
    bool own_checkpoints;
    /* Before the gradient buffer is allocated (sync: plans its buckets and
     * lends the model their buffer). NULL: nothing. */
    int (*prepare)(rt_trainer *t, char *err, size_t errlen);
    /* Once the parameters are initialised, `init` their host copy (sync:
     * takes rank 0's; async: opens this rank's shards from them). Polls
     * t->o.cancelled. NULL: nothing. */
    int (*begin)(rt_trainer *t, const float *init, char *err, size_t errlen);
    /* rt_trainer_peers_ready. NULL: ready at once. */
    int (*ready)(rt_trainer *t, bool (*cancelled)(void *), void *arg, char *err,
                 size_t errlen);
    /* An epoch: its start; the next batch to step on (*hb NULL: the epoch
     * is over), polling the run's cancellation; the update after each
     * shared step (rt_trainer_step); what is left once the steps are done
     * (NULL: nothing); the evaluation of the model it trained. */
    int (*epoch_begin)(rt_trainer *t, rt_epoch_run *r);
    int (*next)(rt_trainer *t, rt_epoch_run *r, const rt_batch_host **hb);
    int (*apply)(rt_trainer *t, rt_epoch_run *r, const rt_batch_host *hb);
    int (*epoch_end)(rt_trainer *t, rt_epoch_run *r);
    int (*evaluate)(rt_trainer *t, rt_epoch_run *r);
    /* Around the step's loss_grad, NULL: nothing. step_begin sets the
     * samples the step's loss stands for (hb->n unless it says otherwise);
     * step_end turns this rank's loss into the one to step on (sync: the
     * all-reduce); step_failed replaces step_end when the model or the
     * device failed (`why`). */
    void (*step_begin)(rt_trainer *t, rt_epoch_run *r, const rt_batch_host *hb,
                       size_t *samples);
    int (*step_end)(rt_trainer *t, rt_epoch_run *r, const rt_batch_host *hb, float *loss);
    void (*step_failed)(rt_trainer *t, const char *why);
    /* Sums `n` host floats over the ranks (the evaluation). NULL: alone. */
    int (*sum)(rt_trainer *t, float *host, size_t n, char *err, size_t errlen);
    /* The model as the mode holds it, into `host` (rt_trainer_params). */
    int (*params)(rt_trainer *t, float *host, bool (*cancelled)(void *), void *arg);
    /* Frees t->ms. NULL: nothing. */
    void (*destroy)(rt_trainer *t);
};

extern const rt_mode rt_mode_single, rt_mode_sync, rt_mode_async;

static inline double rt_train_now(void)
{
    return (double)uv_hrtime() / 1e9;
}

/* ---- the shared step (step.c) ------------------------------------------------- */

/* One step on `hb`: the mode's step_begin, the batch to the device, the
 * model's loss_grad (run, captured or replayed as graph.c decides), the
 * mode's step_end, and the check that the loss is finite (FERRY_ERANGE,
 * "loss is nan at epoch E step S: training stopped"). A batch of no
 * samples computes nothing (sync: this rank still joins the all-reduce).
 * *loss: the loss to step on; *samples: the samples it stands for. */
int rt_trainer_step(rt_trainer *t, rt_epoch_run *r, const rt_batch_host *hb, float *loss,
                    size_t *samples);
/* FERRY_ECANCELED with "training cancelled at epoch E step S" when the
 * run's caller cancelled; 0 otherwise. */
int rt_trainer_check_cancel(const rt_trainer *t, rt_epoch_run *r);
/* The batch as the model sees it: in place on the cpu, copied elsewhere. */
int rt_trainer_to_device(rt_trainer *t, const rt_batch_host *hb, ferry_batch_t *b);
/* Samples in global batch `step` (0-based) of an epoch. */
size_t rt_trainer_global_batch(const rt_trainer *t, size_t step);
/* The cosine schedule's rate at `frac` of the run (the optimizer's own
 * rate when there is no schedule). */
float rt_trainer_lr_at(const rt_trainer *t, double frac);

/* ---- evaluation (eval.c) ------------------------------------------------------ */

/* Evaluates `params` (device) on this rank's slice of the test set, summed
 * over the ranks by the mode's sum: test_loss, test_accuracy,
 * eval_samples, and the model's own metrics. */
int rt_trainer_evaluate(rt_trainer *t, const float *params, rt_epoch_stats *st, char *err,
                        size_t errlen);

/* ---- single mode's epoch, which sync mode shares (mode_single.c) ------------- */

/* The loader's epoch; its batches (with empty ones when
 * `with_empty`); the optimizer's step on the parameters; their
 * evaluation; the parameters read back. */
int rt_single_epoch_begin(rt_trainer *t, rt_epoch_run *r);
int rt_single_next(rt_trainer *t, rt_epoch_run *r, const rt_batch_host **hb,
                   bool with_empty);
int rt_single_apply(rt_trainer *t, rt_epoch_run *r, const rt_batch_host *hb);
int rt_single_evaluate(rt_trainer *t, rt_epoch_run *r);
int rt_single_params(rt_trainer *t, float *host, bool (*cancelled)(void *), void *arg);

#endif

/* Sync mode: data parallelism over a collective session. Single mode's
 * epoch, with rank 0's parameters to start from, every step's gradient
 * all-reduced in buckets (sync.c) before the identical optimizer step on
 * every rank, rank 0's buffers given to every rank before the evaluation,
 * and the evaluation summed over the ranks. A rank with no
 * samples in a step (a last global batch smaller than the world) still
 * joins its all-reduce. */
#include <stdio.h>
#include <stdlib.h>

#include "trainer_int.h"

static int sync_prepare(rt_trainer *t, char *err, size_t errlen)
{
    rt_sync *s = NULL;
    int rc = rt_sync_create(t->m, t->dev, t->o.comm, t->o.bucket_bytes, &s, err, errlen);
    if (rc)
        return rc;
    t->ms = s;
    t->buckets = rt_sync_buckets(s);
    t->grad = rt_sync_model_grad(s);
    t->grad_borrowed = t->grad != NULL;
    rt_sync_set_timeline(s, t->tl);
    t->mc.grad_ready = rt_sync_grad_ready;
    t->mc.grad_ready_arg = s;
    return 0;
}

/* Every rank draws the same values from the seed, but the design says
 * rank 0's are the ones: a model whose init is not deterministic still
 * starts identical everywhere. */
static int sync_begin(rt_trainer *t, const float *init, char *err, size_t errlen)
{
    (void)init;
    char why[512] = "";
    int rc = rt_sync_broadcast(t->ms, t->params, t->o.cancelled, t->o.cancel_arg, why,
                               sizeof why);
    if (rc)
        snprintf(err, errlen, "cannot receive the initial parameters from rank 0: %s",
                 why);
    return rc;
}

static int sync_next(rt_trainer *t, rt_epoch_run *r, const rt_batch_host **hb)
{
    return rt_single_next(t, r, hb, true);
}

static void sync_step_begin(rt_trainer *t, rt_epoch_run *r, const rt_batch_host *hb,
                            size_t *samples)
{
    *samples = rt_trainer_global_batch(t, r->step - 1);
    rt_sync_step_begin(t->ms, t->grad, (float)hb->n / (float)*samples);
}

static int sync_step_end(rt_trainer *t, rt_epoch_run *r, const rt_batch_host *hb,
                         float *loss)
{
    double t1 = rt_train_now();
    char why[512] = "";
    float local = *loss;
    int rc = rt_sync_step_end(t->ms, local, hb->n > 0, loss, r->cancelled, r->arg, why,
                              sizeof why);
    r->st->allreduce_s += rt_train_now() - t1;
    if (rc)
        snprintf(r->err, r->errlen, "epoch %d step %llu: all-reduce of the gradient: %s",
                 r->epoch, (unsigned long long)r->step, why);
    return rc;
}

/* The buckets grad_ready started are still running. */
static void sync_step_failed(rt_trainer *t, const char *why)
{
    rt_sync_step_abort(t->ms, why);
}

/* Rank 0's buffers (batch normalisation's running statistics) replace the
 * others' before each evaluation: DDP's broadcast_buffers, once an epoch
 * rather than every step. Between two evaluations each rank's statistics
 * follow its own slices of the batches (DDP without SyncBatchNorm); every
 * rank then evaluates one model, and a run, which ends with an
 * evaluation, ends with the same buffers everywhere. */
static int sync_evaluate(rt_trainer *t, rt_epoch_run *r)
{
    size_t n = t->mc.blen;
    if (n) {
        char why[512] = "";
        float *host = malloc(n * sizeof *host);
        int rc = host ? rt_model_ctx_get_buffers(&t->mc, host) : FERRY_ENOMEM;
        if (rc == 0)
            rc = rt_comm_broadcast(t->o.comm, host, n, 0, r->cancelled, r->arg, why,
                                   sizeof why);
        if (rc == 0)
            rc = rt_model_ctx_set_buffers(&t->mc, host);
        free(host);
        if (rc) {
            snprintf(r->err, r->errlen, "epoch %d: the model's buffers from rank 0: %s",
                     r->epoch, why[0] ? why : ferry_strerror(rc));
            return rc;
        }
    }
    return rt_single_evaluate(t, r);
}

static int sync_sum(rt_trainer *t, float *host, size_t n, char *err, size_t errlen)
{
    return rt_sync_sum(t->ms, host, n, err, errlen);
}

static void sync_destroy(rt_trainer *t)
{
    rt_sync_destroy(t->ms);
    t->ms = NULL;
}

const rt_mode rt_mode_sync = {
    .step_word = "step",
    .graphs = false,
    .prepare = sync_prepare,
    .begin = sync_begin,
    .epoch_begin = rt_single_epoch_begin,
    .next = sync_next,
    .apply = rt_single_apply,
    .evaluate = sync_evaluate,
    .step_begin = sync_step_begin,
    .step_end = sync_step_end,
    .step_failed = sync_step_failed,
    .sum = sync_sum,
    .params = rt_single_params,
    .destroy = sync_destroy,
};

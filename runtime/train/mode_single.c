/* Single mode: one worker alone. Each epoch is one pass of the loader over
 * the training set; each step's gradient goes straight to the optimizer;
 * the model is the trainer's own parameters. Sync mode runs the same epoch
 * with an all-reduce around each step (mode_sync.c). */
#include <stdio.h>

#include "trainer_int.h"

int rt_single_epoch_begin(rt_trainer *t, rt_epoch_run *r)
{
    int rc = rt_loader_begin(t->train, t->epoch);
    if (rc)
        snprintf(r->err, r->errlen, "cannot start epoch %d: %s", r->epoch,
                 ferry_strerror(rc));
    return rc;
}

int rt_single_next(rt_trainer *t, rt_epoch_run *r, const rt_batch_host **hb,
                   bool with_empty)
{
    for (double t0 = rt_train_now(); (*hb = rt_loader_next(t->train));
         t0 = rt_train_now()) {
        rt_timeline_since(t->tl, PROTO_TL_DATA, 0, t0);
        r->step++;
        int rc = rt_trainer_check_cancel(t, r);
        if (rc)
            return rc;
        if ((*hb)->n > 0 || with_empty)
            return 0;
    }
    return 0;
}

static int single_next(rt_trainer *t, rt_epoch_run *r, const rt_batch_host **hb)
{
    return rt_single_next(t, r, hb, false);
}

int rt_single_apply(rt_trainer *t, rt_epoch_run *r, const rt_batch_host *hb)
{
    (void)r;
    (void)hb;
    if (t->o.cosine && t->o.epochs > 0) {
        double total = (double)rt_loader_steps(t->train) * t->o.epochs;
        rt_optim_set_lr(t->opt, rt_trainer_lr_at(t, (double)t->steps_done / total));
    }
    double t0 = rt_train_now();
    rt_optim_step(t->opt, t->params, t->grad);
    rt_timeline_since(t->tl, PROTO_TL_OPTIM, 0, t0);
    t->steps_done++;
    return 0;
}

int rt_single_evaluate(rt_trainer *t, rt_epoch_run *r)
{
    return rt_trainer_evaluate(t, t->params, r->st, r->err, r->errlen);
}

int rt_single_params(rt_trainer *t, float *host, bool (*cancelled)(void *), void *arg)
{
    (void)cancelled;
    (void)arg;
    return t->dev->ops->download(t->dev, host, t->params, t->plen * sizeof(float));
}

const rt_mode rt_mode_single = {
    .step_word = "step",
    .graphs = true,
    .epoch_begin = rt_single_epoch_begin,
    .next = single_next,
    .apply = rt_single_apply,
    .evaluate = rt_single_evaluate,
    .params = rt_single_params,
};

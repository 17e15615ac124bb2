/* The step every mode runs: the batch to the device, the model's forward
 * and backward (as a device graph where graph.c says so), the mode's work
 * around it, and the check of the loss.
 *
 * On the cpu device the model reads the loader's host buffers in place: the
 * device's memory is the host's, and a copy per step would be pure cost. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/where.h"
#include "trainer_int.h"

int rt_trainer_to_device(rt_trainer *t, const rt_batch_host *hb, ferry_batch_t *b)
{
    *b = (ferry_batch_t){
        .n = hb->n, .x = hb->x, .labels = hb->labels, .targets = hb->targets};
    if (t->dev->kind == FERRY_DEVICE_CPU)
        return 0;
    for (int i = 0; i < 2; i++)
        if (rt_devset_serves(t->dset[i], hb)) {
            bool labels = hb->set->labels != NULL;
            b->x = t->x;
            b->labels = labels ? t->labels : NULL;
            b->targets = labels ? NULL : t->targets;
            return rt_devset_batch(t->dset[i], hb, t->x, t->labels, t->targets);
        }
    if (t->stager)
        return rt_stager_batch(t->stager, hb, b);
    const ferry_device_ops_t *ops = t->dev->ops;
    size_t n = (size_t)hb->n;
    int rc =
        ops->upload(t->dev, t->x, hb->x, n * (size_t)t->set[0]->features * sizeof(float));
    if (rc == 0 && hb->labels)
        rc = ops->upload(t->dev, t->labels, hb->labels, n * sizeof(int32_t));
    if (rc == 0 && hb->targets)
        rc = ops->upload(t->dev, t->targets, hb->targets,
                         n * (size_t)t->m->outputs * sizeof(float));
    b->x = t->x;
    b->labels = hb->labels ? t->labels : NULL;
    b->targets = hb->targets ? t->targets : NULL;
    return rc;
}

float rt_trainer_lr_at(const rt_trainer *t, double frac)
{
    if (!t->o.cosine || t->o.epochs <= 0)
        return t->o.optim.lr;
    frac = fmin(fmax(frac, 0.0), 1.0);
    return (float)(t->o.optim.lr * 0.5 * (1.0 + cos(M_PI * frac)));
}

size_t rt_trainer_global_batch(const rt_trainer *t, size_t step)
{
    size_t n = t->set[0]->n, b = (size_t)t->o.batch, at = step * b;
    return n - at < b ? n - at : b;
}

/* "epoch E step S", or "epoch E local step S", as the messages name a step. */
static void where(const rt_trainer *t, const rt_epoch_run *r, char *buf, size_t len)
{
    snprintf(buf, len, "epoch %d %s %llu", r->epoch, t->mode->step_word,
             (unsigned long long)r->step);
}

int rt_trainer_check_cancel(const rt_trainer *t, rt_epoch_run *r)
{
    if (!r->cancelled || !r->cancelled(r->arg))
        return 0;
    char at[96];
    where(t, r, at, sizeof at);
    snprintf(r->err, r->errlen, "training cancelled at %s", at);
    return FERRY_ECANCELED;
}

/* Runs a step's graph; its loss, written by the graph, into *loss. */
static int run_graph(rt_trainer *t, void *g, float *loss, rt_epoch_stats *st)
{
    int rc = rt_device_ext(t->dev)->graph_run(t->dev, g);
    *loss = t->step_loss;
    st->graph_steps += rc == 0;
    return rc;
}

/* Captures the step into `slot` and runs the graph; 1 (and nothing run)
 * when the step cannot be captured, after logging why once. */
static int capture(rt_trainer *t, const ferry_batch_t *b, int slot, float *loss,
                   rt_epoch_stats *st)
{
    const rt_device_ext_t *e = rt_device_ext(t->dev);
    void *g = NULL;
    char why[320] = "";
    int mrc = FERRY_EAGAIN;
    int rc = e->capture_begin(t->dev, &t->step_loss);
    if (rc == 0) {
        mrc = t->m->loss_grad(&t->mc.pub, t->params, b, t->grad, &t->step_loss);
        rc = e->capture_end(t->dev, mrc == 0, &g, why, sizeof why);
    }
    rt_graph_captured(&t->graphs, slot, g);
    if (g) {
        if (!t->graph_said) {
            t->graph_said = true;
            fprintf(stderr,
                    "train: steps of %d samples run as a device graph (%s=0 turns "
                    "graphs off)\n",
                    b->n, RT_GRAPHS_ENV);
        }
        st->graph_captures++;
        return run_graph(t, g, loss, st);
    }
    if (!t->graph_told) {
        t->graph_told = true;
        fprintf(stderr, "train: a step of %d samples runs uncaptured: %s\n", b->n,
                why[0] ? why : ferry_strerror(rc ? rc : mrc));
    }
    return 1;
}

/* The model's loss_grad on `b`, as the graphs' rule says (graph.c): run op
 * by op, captured and then run as a graph, or a graph replayed. The
 * optimizer's step stays outside the graph: its learning rate (a cosine
 * schedule) and Adam's step count change every step, and it is one kernel
 * over the flat buffer already. A step that cannot be captured runs
 * uncaptured, and the reason is logged once. */
static int run_loss_grad(rt_trainer *t, const ferry_batch_t *b, float *loss,
                         rt_epoch_stats *st)
{
    const ferry_model_t *m = t->m;
    if (!t->graphs.enabled)
        return m->loss_grad(&t->mc.pub, t->params, b, t->grad, loss);
    const rt_device_ext_t *e = rt_device_ext(t->dev);
    rt_graph_key k = {.n = b->n, .x = b->x, .labels = b->labels, .targets = b->targets};
    int slot = -1;
    void *evict = NULL;
    rt_graph_action a = rt_graph_decide(&t->graphs, &k, &slot, &evict);
    e->graph_destroy(t->dev, evict);
    if (a == RT_GRAPH_REPLAY) {
        int rc = run_graph(t, rt_graph_at(&t->graphs, slot), loss, st);
        if (rc != FERRY_EAGAIN)
            return rc;
        /* A workspace moved (an evaluation batch grew it): capture again
         * at the next step of this shape. */
        e->graph_destroy(t->dev, rt_graph_forget(&t->graphs, slot));
    } else if (a == RT_GRAPH_CAPTURE) {
        int rc = capture(t, b, slot, loss, st);
        if (rc != 1)
            return rc;
    }
    return m->loss_grad(&t->mc.pub, t->params, b, t->grad, loss);
}

int rt_trainer_step(rt_trainer *t, rt_epoch_run *r, const rt_batch_host *hb, float *loss,
                    size_t *samples)
{
    const rt_mode *md = t->mode;
    char at[96];
    where(t, r, at, sizeof at);
    *loss = 0;
    *samples = (size_t)hb->n;
    rt_where_step(r->epoch, r->step, "forward and backward");
    if (md->step_begin)
        md->step_begin(t, r, hb, samples);
    double t0 = rt_train_now();
    int rc = 0;
    if (hb->n > 0) {
        ferry_batch_t b;
        if ((rc = rt_trainer_to_device(t, hb, &b)))
            snprintf(r->err, r->errlen, "%s: cannot copy the batch to %s: %s", at,
                     t->dev->name, ferry_strerror(rc));
        else if ((rc = run_loss_grad(t, &b, loss, r->st)))
            snprintf(r->err, r->errlen, "the model's loss_grad failed at %s: %s", at,
                     ferry_strerror(rc));
        if (rc) {
            if (md->step_failed) /* what the step started is still running */
                md->step_failed(t, r->err);
            return rc;
        }
    }
    r->st->compute_s += rt_train_now() - t0;
    rt_timeline_since(t->tl, PROTO_TL_COMPUTE, 0, t0);
    rt_where_phase("gradient exchange", -1);
    if (md->step_end && (rc = md->step_end(t, r, hb, loss)))
        return rc;
    rt_where_phase("optimizer step", -1);
    if (!isfinite(*loss)) {
        snprintf(r->err, r->errlen, "loss is %s at %s: training stopped",
                 isnan(*loss) ? "nan" : "infinite", at);
        return FERRY_ERANGE;
    }
    return 0;
}

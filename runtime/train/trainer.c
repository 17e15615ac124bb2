/* One worker's training loop: batches from the loader's prefetch thread,
 * the model's forward and backward on the device, the optimizer step, and an
 * evaluation on the test set after every epoch.
 *
 * On the cpu device the model reads the loader's host buffers in place: the
 * device's memory is the host's, and a copy per step would be pure cost. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "trainer_int.h"

#define DEFAULT_BATCH      128
#define DEFAULT_EVAL_BATCH 256
/* The synthetic sets' own seed: training seeds change the model's start and
 * the shuffle, never the problem it solves. */
#define DATA_SEED 20261123u

static double now_s(void)
{
    return (double)uv_hrtime() / 1e9;
}

static int check_set(const ferry_model_t *m, const rt_dataset *ds, const char *which,
                     char *err, size_t errlen)
{
    int features = m->input[0] * m->input[1] * m->input[2];
    if (ds->features != features) {
        snprintf(err, errlen, "the %s set has %d features a sample, the model takes %d",
                 which, ds->features, features);
        return FERRY_EINVAL;
    }
    if (m->kind == FERRY_MODEL_CLASSIFIER && (!ds->labels || ds->classes > m->outputs)) {
        snprintf(err, errlen, "the %s set has %d classes, the model has %d outputs",
                 which, ds->classes, m->outputs);
        return FERRY_EINVAL;
    }
    if (m->kind == FERRY_MODEL_REGRESSOR && (!ds->targets || ds->outputs != m->outputs)) {
        snprintf(err, errlen,
                 "the %s set has %d targets a sample, the model has %d outputs", which,
                 ds->outputs, m->outputs);
        return FERRY_EINVAL;
    }
    if (ds->n == 0) {
        snprintf(err, errlen, "the %s set is empty", which);
        return FERRY_EINVAL;
    }
    return 0;
}

static int load_sets(rt_trainer *t, char *err, size_t errlen)
{
    const ferry_model_t *m = t->m;
    if (t->o.train_set && t->o.test_set) {
        t->set[0] = t->o.train_set;
        t->set[1] = t->o.test_set;
    } else {
        int features = m->input[0] * m->input[1] * m->input[2];
        /* Loading takes seconds: a start given up meanwhile stops. */
        rt_data_cancel cancel = {t->o.cancelled, t->o.cancel_arg};
        for (int i = 0; i < 2; i++) {
            int rc = rt_dataset_load_polled(m->dataset, t->o.data_dir, i == 0, features,
                                            DATA_SEED, &cancel, &t->own[i], err, errlen);
            if (rc)
                return rc;
            t->set[i] = &t->own[i];
        }
    }
    int rc = check_set(m, t->set[0], "training", err, errlen);
    return rc ? rc : check_set(m, t->set[1], "test", err, errlen);
}

static int alloc_buffers(rt_trainer *t, int batch_max, char *err, size_t errlen)
{
    ferry_device_t *dev = t->dev;
    const ferry_device_ops_t *ops = dev->ops;
    t->plen = ferry_model_layout(t->m, NULL);
    t->params = ops->alloc(dev, t->plen * sizeof(float));
    if (t->o.comm && t->o.world > 1) {
        int rc = rt_sync_create(t->m, dev, t->o.comm, t->o.bucket_bytes, &t->sync, err,
                                errlen);
        if (rc)
            return rc;
        t->grad = rt_sync_model_grad(t->sync);
        t->grad_borrowed = t->grad != NULL;
        t->mc.grad_ready = rt_sync_grad_ready;
        t->mc.grad_ready_arg = t->sync;
    }
    if (!t->grad)
        t->grad = ops->alloc(dev, t->plen * sizeof(float));
    bool ok = t->params && t->grad;
    if (ok && dev->kind != FERRY_DEVICE_CPU) {
        size_t feats = (size_t)t->set[0]->features;
        t->x = ops->alloc(dev, (size_t)batch_max * feats * sizeof(float));
        if (t->m->kind == FERRY_MODEL_CLASSIFIER)
            t->labels = ops->alloc(dev, (size_t)batch_max * sizeof(int32_t));
        else
            t->targets = ops->alloc(dev, (size_t)batch_max * (size_t)t->m->outputs *
                                             sizeof(float));
        ok = t->x && (t->labels || t->targets);
    }
    if (!ok) {
        snprintf(err, errlen, "cannot allocate %zu parameters and a batch of %d on %s",
                 t->plen, batch_max, dev->name);
        return FERRY_ENOMEM;
    }
    /* Padding between tensors is never written by the model: zero keeps the
     * optimizer's pass over it harmless. */
    ops->fill(dev, t->grad, 0.0f, t->plen);
    return 0;
}

static int init_params(rt_trainer *t, char *err, size_t errlen)
{
    float *host = calloc(t->plen, sizeof *host);
    if (!host)
        return FERRY_ENOMEM;
    int rc = t->m->init(&t->mc.pub, host);
    if (rc)
        snprintf(err, errlen, "the model's init failed: %s", ferry_strerror(rc));
    else
        rc = t->dev->ops->upload(t->dev, t->params, host, t->plen * sizeof(float));
    /* Async: this rank's shards start from these values, and every rank
     * pulls them before its first step. */
    if (rc == 0 && t->o.ps_store && t->o.world > 1)
        rc = rt_async_create(t, host, err, errlen);
    free(host);
    /* Every rank draws the same values from the seed, but the design says
     * rank 0's are the ones: a model whose init is not deterministic still
     * starts identical everywhere. */
    if (rc == 0 && t->sync) {
        char why[512] = "";
        if ((rc = rt_sync_broadcast(t->sync, t->params, t->o.cancelled, t->o.cancel_arg,
                                    why, sizeof why)))
            snprintf(err, errlen, "cannot receive the initial parameters from rank 0: %s",
                     why);
    }
    return rc;
}

/* Whether steps may run as device graphs: a device with them, alone (in
 * sync mode the model's grad_ready starts all-reduces from the host during
 * loss_grad; async mode has its own loop), unless RT_GRAPHS_ENV says 0. */
static bool graphs_possible(const rt_trainer *t)
{
    const rt_device_ext_t *e = rt_device_ext(t->dev);
    return t->dev->kind != FERRY_DEVICE_CPU && !t->sync && !t->o.ps_store &&
           e->size >= sizeof(rt_device_ext_t) && e->capture_begin && e->capture_end &&
           e->graph_run && e->graph_destroy && rt_graphs_enabled(getenv(RT_GRAPHS_ENV));
}

/* Where each set's batches come from on a GPU (rt_data_place_for): held in
 * its memory when the set fits the budget (rt_devset: the steps gather
 * their batches there instead of waiting on a copy from the host), staged
 * through pinned buffers on a second queue when it does not (rt_stager),
 * uploaded batch by batch when host_batches asks. A set whose device copy
 * fails after all is staged. */
static int place_sets(rt_trainer *t, int batch_max, char *err, size_t errlen)
{
    for (int i = 0; i < 2; i++) {
        const char *which = i ? "test" : "training";
        char why[256] = "";
        rt_data_place place = RT_DATA_IN_PLACE;
        int rc = rt_data_place_for(t->dev, t->set[i], t->o.host_batches, &place, why,
                                   sizeof why);
        if (rc) {
            snprintf(err, errlen, "the %s set: %s", which, why);
            return rc;
        }
        if (place == RT_DATA_IN_PLACE)
            continue;
        if (place == RT_DATA_ON_DEVICE &&
            rt_devset_create(t->dev, t->set[i], &t->dset[i], why, sizeof why) != 0)
            place = RT_DATA_STAGED;
        if (place == RT_DATA_STAGED && !t->stager &&
            (rc =
                 rt_stager_create(t->dev, t->set[i], batch_max, &t->stager, err, errlen)))
            return rc;
        fprintf(
            stderr, "train: the %s set is %s%s: %s\n", which, rt_data_place_name(place),
            place == RT_DATA_STAGED && !rt_stager_async(t->stager) ? " (uploads)" : "",
            why);
    }
    return 0;
}

int rt_trainer_create(const ferry_model_t *m, ferry_device_t *dev, const rt_train_opts *o,
                      rt_trainer **out, char *err, size_t errlen)
{
    *out = NULL;
    rt_trainer *t = calloc(1, sizeof *t);
    if (!t)
        return FERRY_ENOMEM;
    t->m = m;
    t->dev = dev;
    t->o = *o;
    if (t->o.batch <= 0)
        t->o.batch = DEFAULT_BATCH;
    if (t->o.world <= 0)
        t->o.world = 1;
    if (t->o.eval_batch <= 0)
        t->o.eval_batch = DEFAULT_EVAL_BATCH;
    rt_optim_defaults(&t->o.optim);
    int local = (t->o.batch + t->o.world - 1) / t->o.world;
    int batch_max = local > t->o.eval_batch ? local : t->o.eval_batch;
    int rc = rt_device_ext(dev)->set_precision(dev, o->precision, err, errlen);
    if (rc == 0)
        rc = rt_model_ctx_init(&t->mc, m, dev, batch_max, o->seed, err, errlen);
    if (rc == 0)
        rc = load_sets(t, err, errlen);
    if (rc == 0)
        t->mc.set = t->set[0];
    if (rc == 0)
        rc = alloc_buffers(t, batch_max, err, errlen);
    if (rc == 0)
        rc = init_params(t, err, errlen);
    if (rc == 0 && (rc = rt_optim_create(dev, &t->o.optim, t->plen, &t->opt)))
        snprintf(err, errlen, "cannot create the %s optimizer: %s",
                 rt_optim_name(t->o.optim.kind), ferry_strerror(rc));
    if (rc == 0)
        rc = place_sets(t, batch_max, err, errlen);
    rt_graph_plan_init(&t->graphs, rc == 0 && graphs_possible(t));
    rt_loader_opts lo = {.batch = t->o.batch,
                         .rank = t->o.rank,
                         .world = t->o.world,
                         .seed = o->seed,
                         .shuffle = true,
                         .index_only = t->dset[0] != NULL};
    if (t->stager && !t->dset[0])
        rt_stager_loader_opts(t->stager, &lo);
    if (rc == 0 && (rc = rt_loader_create(t->set[0], &lo, &t->train)))
        snprintf(err, errlen, "cannot create the training loader: %s",
                 ferry_strerror(rc));
    /* In sync mode each rank evaluates its slice of every global test
     * batch, and the sums are reduced: the whole test set, counted once. */
    lo = (rt_loader_opts){.batch = t->o.eval_batch * t->o.world,
                          .rank = t->o.rank,
                          .world = t->o.world,
                          .seed = o->seed,
                          .index_only = t->dset[1] != NULL};
    if (t->stager && !t->dset[1])
        rt_stager_loader_opts(t->stager, &lo);
    if (rc == 0 && (rc = rt_loader_create(t->set[1], &lo, &t->test)))
        snprintf(err, errlen, "cannot create the test loader: %s", ferry_strerror(rc));
    /* The start's caller, polled above, is gone once this returns. */
    t->o.cancelled = NULL;
    t->o.cancel_arg = NULL;
    if (rc) {
        if (!err[0])
            snprintf(err, errlen, "%s", ferry_strerror(rc));
        rt_trainer_destroy(t);
        return rc;
    }
    *out = t;
    return 0;
}

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

/* The model's own figures on the parameters just evaluated. A name that is
 * not a plain identifier is the module's mistake, refused rather than
 * passed on to logs and JSON. */
static int model_metrics(rt_trainer *t, const float *params, rt_epoch_stats *st, char *err,
                         size_t errlen)
{
    st->n_metrics = 0;
    rt_metrics_fn fn = rt_model_metrics(t->m);
    if (!fn)
        return 0;
    ferry_model_metric_t got[FERRY_MODEL_METRICS_MAX];
    memset(got, 0, sizeof got);
    int n = fn(&t->mc.pub, params, st->test_loss, got, FERRY_MODEL_METRICS_MAX);
    if (n < 0) {
        snprintf(err, errlen, "the model's metrics failed: %s", ferry_strerror(n));
        return n;
    }
    if (n > FERRY_MODEL_METRICS_MAX)
        n = FERRY_MODEL_METRICS_MAX;
    for (int i = 0; i < n; i++) {
        const char *name = got[i].name;
        size_t len = name ? strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") : 0;
        if (!name || len == 0 || name[len] || len >= sizeof st->metrics[i].name) {
            snprintf(err, errlen,
                     "the model's metric %d has no name of 1 to %zu lowercase letters, "
                     "digits or '_'",
                     i, sizeof st->metrics[i].name - 1);
            return FERRY_EINVAL;
        }
        memcpy(st->metrics[i].name, name, len + 1);
        st->metrics[i].value = got[i].value;
    }
    st->n_metrics = n;
    return 0;
}

int rt_trainer_evaluate(rt_trainer *t, const float *params, rt_epoch_stats *st, char *err,
                        size_t errlen)
{
    double loss_sum = 0;
    size_t right = 0, seen = 0;
    int rc = rt_loader_begin(t->test, 0);
    const rt_batch_host *hb;
    while (rc == 0 && (hb = rt_loader_next(t->test))) {
        ferry_batch_t b;
        float loss = 0;
        int correct = 0;
        if ((rc = rt_trainer_to_device(t, hb, &b)))
            break;
        if ((rc = t->m->evaluate(&t->mc.pub, params, &b, &loss, &correct))) {
            snprintf(err, errlen, "the model's evaluate failed: %s", ferry_strerror(rc));
            return rc;
        }
        loss_sum += (double)loss * hb->n;
        right += (size_t)correct;
        seen += (size_t)hb->n;
    }
    if (rc) {
        snprintf(err, errlen, "evaluation: %s", ferry_strerror(rc));
        return rc;
    }
    if (t->sync) {
        /* Counts below 2^24 are exact in float32; the test sets are far
         * smaller. */
        float sums[3] = {(float)loss_sum, (float)right, (float)seen};
        char why[512] = "";
        if ((rc = rt_sync_sum(t->sync, sums, 3, why, sizeof why))) {
            snprintf(err, errlen, "evaluation: summing over the ranks: %s", why);
            return rc;
        }
        loss_sum = sums[0];
        right = (size_t)sums[1];
        seen = (size_t)sums[2];
    }
    st->eval_samples = seen;
    st->test_loss = seen ? loss_sum / (double)seen : 0;
    st->test_accuracy =
        t->m->kind == FERRY_MODEL_CLASSIFIER && seen ? (double)right / (double)seen : 0;
    return model_metrics(t, params, st, err, errlen);
}

float rt_trainer_lr_at(const rt_trainer *t, double frac)
{
    if (!t->o.cosine || t->o.epochs <= 0)
        return t->o.optim.lr;
    frac = fmin(fmax(frac, 0.0), 1.0);
    return (float)(t->o.optim.lr * 0.5 * (1.0 + cos(M_PI * frac)));
}

static void set_schedule(rt_trainer *t)
{
    if (t->o.cosine && t->o.epochs > 0) {
        double total = (double)rt_trainer_steps(t) * t->o.epochs;
        rt_optim_set_lr(t->opt, rt_trainer_lr_at(t, (double)t->steps_done / total));
    }
}

size_t rt_trainer_global_batch(const rt_trainer *t, size_t step)
{
    size_t n = t->set[0]->n, b = (size_t)t->o.batch, at = step * b;
    return n - at < b ? n - at : b;
}

/* Runs a step's graph; its loss, written by the graph, into *loss. */
static int run_graph(rt_trainer *t, void *g, float *loss, rt_epoch_stats *st)
{
    int rc = rt_device_ext(t->dev)->graph_run(t->dev, g);
    *loss = t->step_loss;
    st->graph_steps += rc == 0;
    return rc;
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
    int rc = 0;
    if (a == RT_GRAPH_REPLAY) {
        rc = run_graph(t, rt_graph_at(&t->graphs, slot), loss, st);
        if (rc != FERRY_EAGAIN)
            return rc;
        /* A workspace moved (an evaluation batch grew it): capture again
         * at the next step of this shape. */
        e->graph_destroy(t->dev, rt_graph_forget(&t->graphs, slot));
    } else if (a == RT_GRAPH_CAPTURE) {
        void *g = NULL;
        char why[320] = "";
        int mrc = FERRY_EAGAIN;
        if ((rc = e->capture_begin(t->dev, &t->step_loss)) == 0) {
            mrc = m->loss_grad(&t->mc.pub, t->params, b, t->grad, &t->step_loss);
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
    }
    return m->loss_grad(&t->mc.pub, t->params, b, t->grad, loss);
}

/* One step's forward, backward and (sync) gradient sum: the loss to step
 * on in *loss (in sync mode the global batch's), the step's global samples
 * in *samples. */
static int compute(rt_trainer *t, const rt_batch_host *hb, size_t step, int epoch,
                   float *loss, size_t *samples, rt_epoch_stats *st,
                   bool (*cancelled)(void *), void *arg, char *err, size_t errlen)
{
    *loss = 0;
    *samples = t->sync ? rt_trainer_global_batch(t, step - 1) : (size_t)hb->n;
    if (t->sync)
        rt_sync_step_begin(t->sync, t->grad, (float)hb->n / (float)*samples);
    double t0 = now_s();
    int rc = 0;
    if (hb->n > 0) {
        ferry_batch_t b;
        if ((rc = rt_trainer_to_device(t, hb, &b)))
            snprintf(err, errlen, "epoch %d step %zu: cannot copy the batch to %s: %s",
                     epoch, step, t->dev->name, ferry_strerror(rc));
        else if ((rc = run_loss_grad(t, &b, loss, st)))
            snprintf(err, errlen, "the model's loss_grad failed at epoch %d step %zu: %s",
                     epoch, step, ferry_strerror(rc));
        if (rc) {
            if (t->sync) /* buckets grad_ready started are still running */
                rt_sync_step_abort(t->sync, err);
            return rc;
        }
    }
    double t1 = now_s();
    st->compute_s += t1 - t0;
    if (!t->sync)
        return 0;
    char why[512] = "";
    float local = *loss;
    rc = rt_sync_step_end(t->sync, local, hb->n > 0, loss, cancelled, arg, why,
                          sizeof why);
    st->allreduce_s += now_s() - t1;
    if (rc)
        snprintf(err, errlen, "epoch %d step %zu: all-reduce of the gradient: %s", epoch,
                 step, why);
    return rc;
}

int rt_trainer_peers_ready(rt_trainer *t, bool (*cancelled)(void *), void *arg, char *err,
                           size_t errlen)
{
    return t->async ? rt_async_ready(t, cancelled, arg, err, errlen) : 0;
}

int rt_trainer_epoch(rt_trainer *t, rt_epoch_stats *st, bool (*cancelled)(void *),
                     void *arg, char *err, size_t errlen)
{
    memset(st, 0, sizeof *st);
    if (t->async)
        return rt_async_epoch(t, st, cancelled, arg, err, errlen);
    int epoch = t->epoch + 1;
    double loss_sum = 0, t0 = now_s();
    size_t step = 0;
    int rc = rt_loader_begin(t->train, t->epoch);
    if (rc) {
        snprintf(err, errlen, "cannot start epoch %d: %s", epoch, ferry_strerror(rc));
        return rc;
    }
    const rt_batch_host *hb;
    while ((hb = rt_loader_next(t->train))) {
        step++;
        if (cancelled && cancelled(arg)) {
            snprintf(err, errlen, "training cancelled at epoch %d step %zu", epoch, step);
            return FERRY_ECANCELED;
        }
        if (hb->n == 0 && !t->sync)
            continue;
        float loss = 0;
        size_t samples = 0;
        if ((rc = compute(t, hb, step, epoch, &loss, &samples, st, cancelled, arg, err,
                          errlen)))
            return rc;
        if (!isfinite(loss)) {
            snprintf(err, errlen, "loss is %s at epoch %d step %zu: training stopped",
                     isnan(loss) ? "nan" : "infinite", epoch, step);
            return FERRY_ERANGE;
        }
        set_schedule(t);
        rt_optim_step(t->opt, t->params, t->grad);
        t->steps_done++;
        loss_sum += (double)loss * (double)samples;
        st->samples += samples;
        st->local_samples += (size_t)hb->n;
    }
    if ((rc = t->dev->ops->sync(t->dev))) {
        snprintf(err, errlen, "epoch %d: %s failed: %s", epoch, t->dev->name,
                 ferry_strerror(rc));
        return rc;
    }
    double t1 = now_s();
    t->epoch = epoch;
    st->epoch = epoch;
    st->train_s = t1 - t0;
    st->train_loss = st->samples ? loss_sum / (double)st->samples : 0;
    st->samples_per_s = st->train_s > 0 ? (double)st->samples / st->train_s : 0;
    if ((rc = rt_trainer_evaluate(t, t->params, st, err, errlen)))
        return rc;
    st->eval_s = now_s() - t1;
    return 0;
}

int rt_trainer_buckets(const rt_trainer *t)
{
    return t->sync ? rt_sync_buckets(t->sync) : 0;
}

size_t rt_trainer_steps(const rt_trainer *t)
{
    return rt_loader_steps(t->train);
}

size_t rt_trainer_params_len(const rt_trainer *t)
{
    return t->plen;
}

int rt_trainer_params(rt_trainer *t, float *host)
{
    if (t->async)
        return rt_async_params(t, host);
    return t->dev->ops->download(t->dev, host, t->params, t->plen * sizeof(float));
}

const rt_dataset *rt_trainer_dataset(const rt_trainer *t, bool train)
{
    return t->set[train ? 0 : 1];
}

void rt_trainer_destroy(rt_trainer *t)
{
    if (!t)
        return;
    rt_loader_destroy(t->train);
    rt_loader_destroy(t->test);
    rt_devset_destroy(t->dset[0]);
    rt_devset_destroy(t->dset[1]);
    for (int i = 0; t->dev && i < RT_GRAPHS; i++)
        if (t->graphs.slot[i].graph)
            rt_device_ext(t->dev)->graph_destroy(t->dev, rt_graph_forget(&t->graphs, i));
    rt_stager_destroy(t->stager);
    rt_optim_destroy(t->opt);
    rt_sync_destroy(t->sync);
    rt_async_destroy(t);
    if (t->dev) {
        const ferry_device_ops_t *ops = t->dev->ops;
        ops->free(t->dev, t->params);
        if (!t->grad_borrowed)
            ops->free(t->dev, t->grad);
        ops->free(t->dev, t->x);
        ops->free(t->dev, t->labels);
        ops->free(t->dev, t->targets);
    }
    rt_model_ctx_free(&t->mc);
    rt_dataset_free(&t->own[0]);
    rt_dataset_free(&t->own[1]);
    free(t);
}

/* One worker's trainer: its data, device buffers, parameters and
 * optimizer, and the epoch every mode runs — the mode's batches, the
 * shared step (step.c), the mode's update after it, and an evaluation on
 * the test set after every epoch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "tensors.h"
#include "trainer_int.h"

#define DEFAULT_BATCH      PROTO_TRAIN_WORKER_BATCH
#define DEFAULT_EVAL_BATCH 256
#define DATA_SEED RT_TRAIN_DATA_SEED

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
    } else if (t->o.data) {
        rt_data_cancel cancel = {t->o.cancelled, t->o.cancel_arg};
        /* The shards its loaders will read (below), so that a set read in
         * place is checked there only. */
        rt_data_source src = *t->o.data;
        src.rank = t->o.rank;
        src.world = t->o.world;
        src.batch = t->o.batch;
        src.test_batch = t->o.eval_batch * t->o.world;
        int rc = rt_data_source_load(&src, &cancel, &t->own[0], &t->own[1], err, errlen);
        if (rc)
            return rc;
        t->set[0] = &t->own[0];
        t->set[1] = &t->own[1];
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
    return 0;
}

static int check_sets(const rt_trainer *t, char *err, size_t errlen)
{
    int rc = check_set(t->m, t->set[0], "training", err, errlen);
    return rc ? rc : check_set(t->m, t->set[1], "test", err, errlen);
}

/* A model that takes its shape from the data, given the training set's. */
static int reshape(const rt_trainer *t, char *err, size_t errlen)
{
    const rt_dataset *ds = t->set[0];
    const int in[3] = {ds->c, ds->h, ds->w};
    int outputs = ds->labels ? ds->classes : ds->outputs;
    int rc = t->m->reshape(in, outputs);
    if (rc)
        snprintf(err, errlen,
                 "the model cannot take the data's shape (%dx%dx%d samples, %d %s): %s",
                 in[0], in[1], in[2], outputs, ds->labels ? "classes" : "outputs",
                 ferry_strerror(rc));
    return rc;
}

static int alloc_buffers(rt_trainer *t, int batch_max, char *err, size_t errlen)
{
    ferry_device_t *dev = t->dev;
    const ferry_device_ops_t *ops = dev->ops;
    t->plen = ferry_model_layout(t->m, NULL);
    t->params = ops->alloc(dev, t->plen * sizeof(float));
    int rc = t->mode->prepare ? t->mode->prepare(t, err, errlen) : 0;
    if (rc)
        return rc;
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
    int rc = 0;
    float *given = NULL;
    char why[512];
    if (t->o.init_tensors) { /* --init-from: only the model's own tensors */
        rc = rt_tensors_to_flat(t->m, t->o.init_tensors, &given, why, sizeof why);
        if (rc == 0) { /* the parameters, then the buffers */
            memcpy(host, given, t->plen * sizeof *host);
            rc = rt_model_ctx_set_buffers(&t->mc, given + t->plen);
        } else if (rc == FERRY_EINVAL)
            snprintf(err, errlen, "the parameters to start from are not this model's: %s",
                     why);
        free(given);
    } else if ((rc = t->m->init(&t->mc.pub, host))) {
        snprintf(err, errlen, "the model's init failed: %s", ferry_strerror(rc));
    }
    if (rc == 0)
        rc = t->dev->ops->upload(t->dev, t->params, host, t->plen * sizeof(float));
    /* Sync: rank 0's values replace these; async: this rank's shards start
     * from them, and every rank pulls them before its first step. */
    if (rc == 0 && t->mode->begin)
        rc = t->mode->begin(t, host, err, errlen);
    free(host);
    return rc;
}

/* Whether steps may run as device graphs: a device with them, in a mode
 * that allows them (in sync mode the model's grad_ready starts all-reduces
 * from the host during loss_grad), unless RT_GRAPHS_ENV says 0. */
static bool graphs_possible(const rt_trainer *t)
{
    const rt_device_ext_t *e = rt_device_ext(t->dev);
    return t->dev->kind != FERRY_DEVICE_CPU && t->mode->graphs &&
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
    t->mode = t->o.world > 1 && t->o.comm       ? &rt_mode_sync
              : t->o.world > 1 && t->o.ps_store ? &rt_mode_async
                                                : &rt_mode_single;
    rt_optim_defaults(&t->o.optim);
    t->tl = o->timeline ? rt_timeline_create(0) : NULL;
    int local = (t->o.batch + t->o.world - 1) / t->o.world;
    int batch_max = local > t->o.eval_batch ? local : t->o.eval_batch;
    int rc = o->timeline && !t->tl
                 ? FERRY_ENOMEM
                 : rt_device_ext(dev)->set_precision(dev, o->precision, err, errlen);
    /* A model that takes its shape from the data is given it first. */
    bool from_data = rt_model_from_data(m);
    if (rc == 0 && from_data && (rc = load_sets(t, err, errlen)) == 0)
        rc = reshape(t, err, errlen);
    if (rc == 0)
        rc = rt_model_ctx_init(&t->mc, m, dev, batch_max, o->seed, err, errlen);
    if (rc == 0 && !from_data)
        rc = load_sets(t, err, errlen);
    if (rc == 0)
        rc = check_sets(t, err, errlen);
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
        rc = rt_ckpt_setup(t, err, errlen);
    if (rc == 0)
        rc = place_sets(t, batch_max, err, errlen);
    rt_graph_plan_init(&t->graphs, rc == 0 && graphs_possible(t));
    /* A set read in place from its file: each rank reads its shard only,
     * so that its pages (and a shared file system's reads) are its own. */
    rt_loader_opts lo = {.batch = t->o.batch,
                         .rank = t->o.rank,
                         .world = t->o.world,
                         .seed = o->seed,
                         .shuffle = true,
                         .index_only = t->dset[0] != NULL,
                         .shard = rc == 0 && t->set[0]->mapped};
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
                          .index_only = t->dset[1] != NULL,
                          .shard = rc == 0 && t->set[1]->mapped};
    if (t->stager && !t->dset[1])
        rt_stager_loader_opts(t->stager, &lo);
    if (rc == 0 && (rc = rt_loader_create(t->set[1], &lo, &t->test)))
        snprintf(err, errlen, "cannot create the test loader: %s", ferry_strerror(rc));
    /* The start's caller, polled above, is gone once this returns, and
     * so is what it described the data with. */
    t->o.cancelled = NULL;
    t->o.cancel_arg = NULL;
    t->o.data = NULL;
    t->o.ckpt_dir = t->o.ckpt_every = t->o.ckpt_model = t->o.resume = NULL;
    if (rc) {
        if (!err[0])
            snprintf(err, errlen, "%s", ferry_strerror(rc));
        rt_trainer_destroy(t);
        return rc;
    }
    *out = t;
    return 0;
}

int rt_trainer_peers_ready(rt_trainer *t, bool (*cancelled)(void *), void *arg, char *err,
                           size_t errlen)
{
    return t->mode->ready ? t->mode->ready(t, cancelled, arg, err, errlen) : 0;
}

int rt_trainer_epoch(rt_trainer *t, rt_epoch_stats *st, bool (*cancelled)(void *),
                     void *arg, char *err, size_t errlen)
{
    memset(st, 0, sizeof *st);
    const rt_mode *md = t->mode;
    rt_epoch_run r = {.epoch = t->epoch + 1,
                      .st = st,
                      .cancelled = cancelled,
                      .arg = arg,
                      .err = err,
                      .errlen = errlen};
    rt_timeline_reset(t->tl);
    double t0 = rt_train_now();
    int rc = md->epoch_begin(t, &r);
    const rt_batch_host *hb = NULL;
    /* A run continued from a checkpoint written mid-epoch: its steps. */
    for (uint64_t skip = rt_ckpt_take_skip(t);
         rc == 0 && r.step < skip && (rc = md->next(t, &r, &hb)) == 0 && hb;)
        ;
    while (rc == 0 && (rc = md->next(t, &r, &hb)) == 0 && hb) {
        float loss = 0;
        size_t samples = 0;
        if ((rc = rt_trainer_step(t, &r, hb, &loss, &samples)) ||
            (rc = md->apply(t, &r, hb)) || (rc = rt_ckpt_after_step(t, &r)))
            break;
        r.loss_sum += (double)loss * (double)samples;
        r.samples += samples;
        rt_loss_curve_add(&st->curve, loss);
        rt_loss_curve_add(&st->lr_curve, t->opt ? rt_optim_lr(t->opt) : 0);
        st->local_samples += (size_t)hb->n;
    }
    if (rc == 0 && md->epoch_end)
        rc = md->epoch_end(t, &r);
    if (rc)
        return rc;
    if ((rc = t->dev->ops->sync(t->dev))) {
        snprintf(err, errlen, "epoch %d: %s failed: %s", r.epoch, t->dev->name,
                 ferry_strerror(rc));
        return rc;
    }
    double t1 = rt_train_now();
    t->epoch = r.epoch;
    st->epoch = r.epoch;
    st->samples = r.samples;
    st->train_s = t1 - t0;
    st->train_loss = st->samples ? r.loss_sum / (double)st->samples : 0;
    st->samples_per_s = st->train_s > 0 ? (double)st->samples / st->train_s : 0;
    if ((rc = md->evaluate(t, &r)))
        return rc;
    st->eval_s = rt_train_now() - t1;
    rt_timeline_since(t->tl, PROTO_TL_EVAL, 0, t1);
    return rt_ckpt_after_epoch(t, err, errlen);
}

int rt_trainer_buckets(const rt_trainer *t)
{
    return t->buckets;
}

size_t rt_trainer_steps(const rt_trainer *t)
{
    return rt_loader_steps(t->train);
}

size_t rt_trainer_params_len(const rt_trainer *t)
{
    return t->plen;
}

int rt_trainer_params_polled(rt_trainer *t, float *host, bool (*cancelled)(void *),
                             void *arg)
{
    return t->mode->params(t, host, cancelled, arg);
}

int rt_trainer_params(rt_trainer *t, float *host)
{
    return rt_trainer_params_polled(t, host, NULL, NULL);
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
    rt_ckpt_free(t);
    if (t->mode && t->mode->destroy)
        t->mode->destroy(t);
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
    rt_timeline_destroy(t->tl);
    rt_dataset_free(&t->own[0]);
    rt_dataset_free(&t->own[1]);
    free(t);
}

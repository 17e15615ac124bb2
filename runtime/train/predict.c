/* The model's outputs over a set of samples, in the set's order: what
 * `ferry predict` writes, a line a sample. Nothing trains: the model, its
 * context, the parameters and a loader over the samples, no training set
 * (unless the samples are a held-out part of it) and no optimizer.
 *
 * Which samples, and normalised how, follows what the parameters' file
 * says of the run's data (PROTO_SAVED_DATA_FIELDS): a file that has it
 * predicts any file of samples, labelled or not, normalised with the run's
 * statistics; a file saved without it (an earlier ferry) predicts only on
 * the run's own test set, read as the run read it, and says so otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"
#include "proto/train_spec.h"
#include "tensors.h"
#include "train.h"

/* The samples and what the model is shaped for. */
typedef struct pset {
    rt_dataset own[2]; /* the samples; a split's training set beside them */
    const rt_dataset *set;
    bool labelled;
    int input[3], outputs; /* a model that takes its shape from the data */
} pset;

static bool known(const proto_predict_req *saved)
{
    return saved && saved->normalize && saved->normalize[0];
}

/* Whether a training set read again normalises as the run's did. */
static bool same_norm(const rt_dataset *ds, const proto_predict_req *saved)
{
    if ((size_t)ds->norm_n != saved->n_norm_shift ||
        saved->n_norm_scale != saved->n_norm_shift)
        return false;
    for (int g = 0; g < ds->norm_n; g++)
        if (fabsf(ds->norm_shift[g] - saved->norm_shift[g]) >
                1e-5f * (1 + fabsf(saved->norm_shift[g])) ||
            fabsf(ds->norm_scale[g] - saved->norm_scale[g]) >
                1e-5f * (1 + fabsf(saved->norm_scale[g])))
            return false;
    return true;
}

/* The run's own training and test sets, read again as the run read them:
 * a held-out split, or any data for a file that says nothing of it. */
static int runs_sets(const rt_data_source *src, const proto_predict_req *saved, pset *p,
                     char *err, size_t errlen)
{
    int rc = rt_data_source_load(src, NULL, &p->own[1], &p->own[0], err, errlen);
    if (rc)
        return rc;
    if (known(saved) && !same_norm(&p->own[1], saved))
        return base_errf(err, errlen, FERRY_EINVAL,
                         "%s is not the data the parameters were trained on: its "
                         "training part (what --test-split and --seed leave of it) "
                         "normalises otherwise than the run's training set did",
                         src->path);
    if (!known(saved) && saved && saved->data && saved->data[0] &&
        strcmp(saved->data, p->own[1].about ? p->own[1].about : "") != 0)
        return base_errf(err, errlen, FERRY_EINVAL,
                         "the parameters' file says nothing of the run's normalisation "
                         "(an earlier ferry saved it), so it predicts only on the run's "
                         "own data, and %s is not it (the run read: %s)",
                         src->path, saved->data);
    p->set = &p->own[0];
    p->labelled = true;
    return 0;
}

/* The model's own named set's test split. */
static int named_set(const ferry_model_t *m, const proto_train_spec *spec,
                     const proto_predict_req *saved, pset *p, char *err, size_t errlen)
{
    const char *kind = known(saved) ? saved->normalize : "";
    if (strcmp(kind, "standard") == 0 || strcmp(kind, "minmax") == 0)
        return base_errf(err, errlen, FERRY_EINVAL,
                         "the run trained on a file of its own (%s): name the samples "
                         "to predict with --data PATH",
                         saved->data && saved->data[0] ? saved->data : "its data");
    int features = p->input[0] * p->input[1] * p->input[2];
    int rc = rt_dataset_load(
        m->dataset, spec->data_dir && spec->data_dir[0] ? spec->data_dir : NULL, false,
        features, RT_TRAIN_DATA_SEED, &p->own[0], err, errlen);
    p->set = &p->own[0];
    p->labelled = rc == 0 && p->own[0].labels;
    return rc;
}

static int load(const ferry_model_t *m, const proto_train_spec *spec,
                const proto_predict_req *saved, pset *p, char *err, size_t errlen)
{
    /* The shape the run gave the model, else a fixed model's own (a model
     * that takes it from the data still holds its last run's: the data's
     * is taken instead). */
    bool shaped = known(saved) && saved->n_input == 3, from_data = rt_model_from_data(m);
    for (int i = 0; i < 3; i++)
        p->input[i] = shaped ? (int)saved->input[i] : from_data ? 0 : m->input[i];
    p->outputs = known(saved) && saved->outputs ? (int)saved->outputs : 0;
    rt_data_source src;
    if (!rt_data_source_from_spec(spec, &src))
        return named_set(m, spec, saved, p, err, errlen);
    if (!known(saved) || spec->test_split > 0)
        return runs_sets(&src, saved, p, err, errlen);
    rt_data_seen seen = {
        .input = {p->input[0], p->input[1], p->input[2]},
        .shift = saved->norm_shift,
        .scale = saved->norm_scale,
        .norm_n =
            saved->n_norm_shift == saved->n_norm_scale ? (int)saved->n_norm_shift : -1,
        .class_names = (const char *const *)saved->class_names,
        .n_class_names = (int)saved->n_class_names,
    };
    p->set = &p->own[0];
    return rt_data_samples_load(&src, &seen, &p->own[0], &p->labelled, err, errlen);
}

/* A model that takes its shape from the data: the run's, or else the
 * samples' (and the training set's classes, when it was read). */
static int reshape(const ferry_model_t *m, pset *p, char *err, size_t errlen)
{
    const rt_dataset *ds = p->set, *train = p->own[1].n ? &p->own[1] : ds;
    int in[3] = {p->input[0], p->input[1], p->input[2]};
    if (in[0] * in[1] * in[2] == 0) {
        in[0] = ds->c;
        in[1] = ds->h;
        in[2] = ds->w;
    }
    int outputs = p->outputs                          ? p->outputs
                  : m->kind == FERRY_MODEL_CLASSIFIER ? train->classes
                                                      : train->outputs;
    int rc = m->reshape(in, outputs);
    if (rc)
        snprintf(
            err, errlen,
            "the model cannot take the data's shape (%dx%dx%d samples, %d outputs): %s",
            in[0], in[1], in[2], outputs, ferry_strerror(rc));
    return rc;
}

/* The model ready to run forward on `dev`: its context (one place, for
 * what a context holds) and the parameters on the device. */
static int open_model(const ferry_model_t *m, ferry_device_t *dev,
                      const rt_tensors *params, int batch, rt_model_ctx *mc,
                      float **dparams, char *err, size_t errlen)
{
    int rc = rt_model_ctx_init(mc, m, dev, batch, 0, err, errlen);
    if (rc)
        return rc;
    size_t plen = ferry_model_layout(m, NULL);
    float *flat = NULL;
    char why[512];
    rc = rt_tensors_to_flat(m, params, &flat, why, sizeof why);
    if (rc == FERRY_EINVAL)
        return base_errf(err, errlen, rc, "the parameters are not this model's: %s", why);
    if (rc == 0 && !(*dparams = dev->ops->alloc(dev, plen * sizeof(float))))
        rc = FERRY_ENOMEM;
    if (rc == 0)
        rc = dev->ops->upload(dev, *dparams, flat, plen * sizeof(float));
    /* the state after the parameters: the model's buffers (running
     * statistics), which evaluation reads */
    if (rc == 0 && rt_tensors_state_len(m) > plen)
        rc = rt_model_ctx_set_buffers(mc, flat + plen);
    free(flat);
    if (rc)
        snprintf(err, errlen, "cannot put %zu parameters on %s: %s", plen, dev->name,
                 ferry_strerror(rc));
    return rc;
}

/* Every batch of `set` forward, into out (n x k floats) and labels. */
static int forward(const ferry_model_t *m, ferry_device_t *dev, rt_model_ctx *mc,
                   const float *dparams, rt_loader *l, const rt_dataset *set, int batch,
                   rt_prediction *out, char *err, size_t errlen)
{
    rt_predict_fn predict = rt_model_predict(m);
    size_t n = set->n, k = (size_t)m->outputs, f = (size_t)set->features;
    bool cpu = dev->kind == FERRY_DEVICE_CPU;
    float *y = dev->ops->alloc(dev, (size_t)batch * k * sizeof(float));
    float *x = cpu ? NULL : dev->ops->alloc(dev, (size_t)batch * f * sizeof(float));
    int rc = y && (cpu || x) ? rt_loader_begin(l, 0) : FERRY_ENOMEM;
    const rt_batch_host *hb;
    size_t at = 0;
    while (rc == 0 && (hb = rt_loader_next(l))) {
        if ((size_t)hb->n > n - at) {
            rc = FERRY_EINTERNAL; /* a loader that gives more than the set */
            break;
        }
        ferry_batch_t b = {.n = hb->n, .x = cpu ? hb->x : x};
        if (!cpu &&
            (rc = dev->ops->upload(dev, x, hb->x, (size_t)hb->n * f * sizeof(float))))
            break;
        if ((rc = predict(&mc->pub, dparams, &b, y))) {
            snprintf(err, errlen, "the model's predict failed: %s", ferry_strerror(rc));
            break;
        }
        rc = dev->ops->download(dev, out->outputs + at * k, y,
                                (size_t)hb->n * k * sizeof(float));
        if (out->labels && hb->labels)
            memcpy(out->labels + at, hb->labels, (size_t)hb->n * sizeof(int32_t));
        at += (size_t)hb->n;
    }
    dev->ops->free(dev, y);
    if (x)
        dev->ops->free(dev, x);
    return rc == 0 && at != n ? FERRY_EINTERNAL : rc;
}

void rt_prediction_free(rt_prediction *p)
{
    free(p->outputs);
    free(p->labels);
    memset(p, 0, sizeof *p);
}

int rt_predict(const ferry_model_t *m, ferry_device_t *dev, const rt_tensors *params,
               const proto_train_spec *spec, const proto_predict_req *saved, int batch,
               rt_prediction *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!rt_model_predict(m))
        return base_errf(err, errlen, FERRY_EINVAL,
                         "the model has no predict function (ferry_model_t.predict, "
                         "which the layer library gives every model)");
    batch = batch > 0 ? batch : 256;
    pset p = {0};
    rt_model_ctx mc = {0};
    float *dparams = NULL;
    rt_loader *l = NULL;
    int rc = load(m, spec, saved, &p, err, errlen);
    p.labelled = rc == 0 && p.labelled && p.set->labels; /* a regressor's: targets */
    if (rc == 0 && rt_model_from_data(m))
        rc = reshape(m, &p, err, errlen);
    if (rc == 0 && p.set->features != m->input[0] * m->input[1] * m->input[2])
        rc = base_errf(err, errlen, FERRY_EINVAL,
                       "the samples are %dx%dx%d (%d numbers), the model takes %dx%dx%d",
                       p.set->c, p.set->h, p.set->w, p.set->features, m->input[0],
                       m->input[1], m->input[2]);
    if (rc == 0)
        rc = open_model(m, dev, params, batch, &mc, &dparams, err, errlen);
    size_t n = rc ? 0 : p.set->n, k = (size_t)m->outputs;
    if (rc == 0 && (!(out->outputs = malloc((n * k + 1) * sizeof(float))) ||
                    (p.labelled && !(out->labels = malloc((n + 1) * sizeof(int32_t))))))
        rc = FERRY_ENOMEM;
    rt_loader_opts lo = {.batch = batch, .world = 1};
    if (rc == 0 && (rc = rt_loader_create(p.set, &lo, &l)))
        snprintf(err, errlen, "cannot read the samples: %s", ferry_strerror(rc));
    if (rc == 0)
        rc = forward(m, dev, &mc, dparams, l, p.set, batch, out, err, errlen);
    rt_loader_destroy(l);
    if (dparams)
        dev->ops->free(dev, dparams);
    rt_model_ctx_free(&mc);
    rt_dataset_free(&p.own[0]);
    rt_dataset_free(&p.own[1]);
    if (rc) {
        if (!err[0])
            snprintf(err, errlen, "prediction: %s", ferry_strerror(rc));
        rt_prediction_free(out);
        return rc;
    }
    out->n = n;
    out->outputs_per = k;
    return 0;
}

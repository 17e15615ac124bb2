/* The model's outputs over the whole test set, in the set's order: what
 * `ferry predict` writes, a line a sample. The same batches as evaluation,
 * through the model's predict instead of its evaluate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/train_spec.h"
#include "tensors.h"
#include "trainer_int.h"

int rt_trainer_predict(rt_trainer *t, rt_prediction *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    rt_predict_fn predict = rt_model_predict(t->m);
    if (!predict) {
        snprintf(err, errlen, "the model has no predict function (ferry_model_t.predict, "
                              "which the layer library gives every model)");
        return FERRY_EINVAL;
    }
    const rt_dataset *set = rt_trainer_dataset(t, false);
    size_t n = set->n, k = (size_t)t->m->outputs;
    int rows = t->mc.pub.batch_max;
    ferry_device_t *dev = t->dev;
    float *y = dev->ops->alloc(dev, (size_t)rows * k * sizeof(float));
    out->outputs = malloc((n * k + 1) * sizeof(float));
    out->labels = set->labels ? malloc((n + 1) * sizeof(int32_t)) : NULL;
    int rc = y && out->outputs && (out->labels || !set->labels) ? 0 : FERRY_ENOMEM;
    if (rc == 0)
        rc = rt_loader_begin(t->test, 0);
    const rt_batch_host *hb;
    size_t at = 0;
    while (rc == 0 && (hb = rt_loader_next(t->test))) {
        ferry_batch_t b;
        if ((size_t)hb->n > n - at) {
            rc = FERRY_EINTERNAL; /* a loader that gives more than the set */
            break;
        }
        if ((rc = rt_trainer_to_device(t, hb, &b)))
            break;
        if ((rc = predict(&t->mc.pub, t->params, &b, y))) {
            snprintf(err, errlen, "the model's predict failed: %s", ferry_strerror(rc));
            break;
        }
        rc = dev->ops->download(dev, out->outputs + at * k, y,
                                (size_t)hb->n * k * sizeof(float));
        if (rc == 0 && out->labels) /* one rank's test batches come in order */
            memcpy(out->labels + at, set->labels + at, (size_t)hb->n * sizeof(int32_t));
        at += (size_t)hb->n;
    }
    dev->ops->free(dev, y);
    if (rc == 0 && at != n)
        rc = FERRY_EINTERNAL;
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

void rt_prediction_free(rt_prediction *p)
{
    free(p->outputs);
    free(p->labels);
    memset(p, 0, sizeof *p);
}

int rt_predict(const ferry_model_t *m, ferry_device_t *dev, const rt_tensors *params,
               const proto_train_spec *spec, int batch, rt_prediction *out, char *err,
               size_t errlen)
{
    memset(out, 0, sizeof *out);
    /* A trainer of one rank, for its data (read as the run read it: the
     * same files, split and normalisation), its device batches and the
     * model's context: nothing of it trains. */
    rt_data_source src;
    bool own_files = rt_data_source_from_spec(spec, &src);
    rt_train_opts o = {.batch = batch > 0 ? batch : 256,
                       .optim = {.kind = RT_OPT_SGD, .lr = 0.01f},
                       .eval_batch = batch > 0 ? batch : 256,
                       .seed = spec->seed,
                       .world = 1,
                       .data_dir = spec->data_dir && spec->data_dir[0] ? spec->data_dir : NULL,
                       .data = own_files ? &src : NULL,
                       .init_tensors = params};
    rt_trainer *t = NULL;
    int rc = rt_trainer_create(m, dev, &o, &t, err, errlen);
    if (rc == 0)
        rc = rt_trainer_predict(t, out, err, errlen);
    rt_trainer_destroy(t);
    return rc;
}

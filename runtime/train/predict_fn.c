/* "ferry.train.predict": the built-in function `ferry predict` calls on a
 * worker. It takes no training session: a prediction is one call, on the
 * worker's device, with its own copy of the parameters. And what a run's
 * begin says of its data, so that a prediction can see new samples the
 * same way. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"
#include "proto/train_spec.h"
#include "runtime/runtime_int.h"
#include "session.h"
#include "tensors.h"
#include "train.h"

int rt_train_predict_fn(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    proto_predict_req *a;
    if (proto_predict_req_unpack(in->data, in->len, &a))
        return ctx->ops->fail(ctx, FERRY_EINVAL,
                              "the argument is not a PredictRequest message");
    const rt_module *mod = rt_call_module(ctx);
    const ferry_model_t *m = mod->task->model;
    /* A model that takes its shape from the data holds one shape at a
     * time: not another while a session of the same module trains. */
    rt_worker *w = rt_call_worker(ctx);
    pthread_mutex_lock(&w->train_lock);
    bool training = w->session && w->session->m->task == mod->task;
    pthread_mutex_unlock(&w->train_lock);
    if (training && rt_model_from_data(m)) {
        proto_free(a);
        return ctx->ops->fail(ctx, FERRY_EBUSY,
                              "this worker is training %s: predict between runs, or "
                              "with --local",
                              mod->name);
    }
    rt_tensors params = {.n = a->n_param_names,
                         .names = (const char *const *)a->param_names,
                         .shapes = a->param_shapes,
                         .values = (const float *)(void *)a->param_values.data,
                         .floats = a->param_values.len / sizeof(float)};
    char err[1024] = "";
    int rc = 0;
    if (a->n_param_shapes != 4 * a->n_param_names || a->param_values.len % sizeof(float))
        rc = ctx->ops->fail(ctx, FERRY_EINVAL,
                            "%zu parameter names with %zu dimensions and %zu bytes of "
                            "values",
                            a->n_param_names, a->n_param_shapes, a->param_values.len);
    proto_train_begin *spec = NULL;
    if (rc == 0 && proto_train_begin_unpack(a->spec.data, a->spec.len, &spec))
        rc = ctx->ops->fail(ctx, FERRY_EINVAL, "the data options are not a TrainBegin");
    rt_prediction p = {0};
    if (rc == 0 && (rc = rt_predict(m, ctx->device, &params, &spec->spec, a, (int)a->batch,
                                    &p, err, sizeof err)))
        rc = ctx->ops->fail(ctx, rc, "%s", err);
    proto_train_begin_free(spec);
    proto_free(a);
    if (rc)
        return rc;
    proto_predict_reply r = {
        .samples = p.n,
        .outputs = (uint32_t)p.outputs_per,
        .values = {(uint8_t *)p.outputs, p.n * p.outputs_per * sizeof(float)},
        .n_labels = p.labels ? p.n : 0,
        .labels = p.labels,
        .device = (char *)ctx->device->description,
        .classifier = m->kind == FERRY_MODEL_CLASSIFIER,
    };
    proto_bytes b;
    rc = proto_predict_reply_pack(&r, &b);
    rt_prediction_free(&p);
    void *buf = rc ? NULL : ctx->ops->result(ctx, out, b.len);
    if (buf)
        memcpy(buf, b.data, b.len);
    proto_bytes_fini(&b);
    return buf ? 0 : ctx->ops->fail(ctx, FERRY_ENOMEM, "no memory for the prediction");
}

void rt_predict_saved_data(const ferry_model_t *m, const rt_dataset *train, const char *how,
                           proto_train_begin_reply *r)
{
    r->normalize = (char *)(how                ? how
                            : !train->norm_n   ? "none"
                            : m->dataset       ? m->dataset
                                               : "fashion-mnist");
    r->n_norm_shift = r->n_norm_scale = (size_t)train->norm_n;
    r->norm_shift = train->norm_shift;
    r->norm_scale = train->norm_scale;
    r->n_class_names = (size_t)train->n_class_names;
    r->class_names = train->class_names;
    /* int and uint32_t share their representation for these positive
     * sizes: the view reads them as they lie. */
    r->input = (uint32_t *)(uintptr_t)m->input;
    r->n_input = 3;
    r->outputs = (uint32_t)m->outputs;
}

/* tests/models — shared fixture: a bundled model module loaded the way a
 * worker loads it (rt_module_open on build/tasks/<name>.so), the cpu device,
 * the model's context, and device buffers for its parameters, gradient and
 * one batch. Parameters and gradients cross as host arrays of the flat
 * layout (ferry_model_layout), so the checks read as plain C. */
#ifndef FERRY_TESTS_MODELS_H
#define FERRY_TESTS_MODELS_H

#include <stdint.h>

#include "runtime/device/device.h"
#include "runtime/runtime.h"
#include "runtime/train/train.h"

#define TM_MAX_PARAMS 16

typedef struct tmodel {
    rt_module mod;
    const ferry_model_t *m;
    ferry_device_t *dev;
    rt_model_ctx mc;
    int nparams;
    size_t off[TM_MAX_PARAMS]; /* where each tensor starts, in floats */
    size_t len;                /* the flat buffer's floats, padding included */
    int features;              /* floats of input a sample */
    float *params, *grad;      /* device, len floats each */
    float *x, *targets;        /* device, batch_max samples */
    int32_t *labels;
} tmodel;

/* Opens the module `name` and the cpu device and makes the model's context
 * for batches up to `batch_max`, seeded with `seed`. Fails the test when any
 * of them cannot be had. */
void tm_open(tmodel *t, const char *name, int batch_max, uint64_t seed);
void tm_close(tmodel *t);

/* The parameters the model's init draws from the context's generator: a
 * calloc'ed host array of t->len floats (free it). */
float *tm_init(tmodel *t);

/* Uploads n samples (labels for a classifier, targets for a regressor) into
 * the device batch buffers and describes them in `b`. */
void tm_batch(tmodel *t, int n, const float *x, const int32_t *labels,
              const float *targets, ferry_batch_t *b);

/* The model's loss_grad on host parameters `p`: the loss, and the gradient
 * downloaded into `grad` (t->len floats; NULL: not wanted). The device
 * gradient is filled with NaN first, so that an element the model fails to
 * write shows. Returns what loss_grad returns. */
int tm_loss_grad(tmodel *t, const float *p, const ferry_batch_t *b, float *grad,
                 float *loss);
/* The model's evaluate on host parameters `p`. */
int tm_evaluate(tmodel *t, const float *p, const ferry_batch_t *b, float *loss,
                int *correct);

/* Test data from a seeded generator: n standard normal floats, n labels in
 * [0, classes). */
void tm_normal(float *out, size_t n, uint64_t *state);
void tm_labels(int32_t *out, size_t n, int classes, uint64_t *state);
uint64_t tm_next(uint64_t *state);

/* n random samples from `seed` (standard normal inputs, and labels or
 * standard normal targets), uploaded into the batch buffers. */
void tm_random_batch(tmodel *t, int n, uint64_t seed, ferry_batch_t *b);

/* Elements of tensor i of the open model. */
size_t tm_count(const tmodel *t, int i);

#endif

/* runtime/nn — the layer-list models of <ferry/nn.h>, linked into the
 * module that declares one (a static archive: see the header for why):
 *
 *   nn_build.c   the plan: shapes, tensors and their names, buffers
 *   nn_pass.c    one layer's forward and backward on the device
 *   nn_model.c   what the runtime calls: workspace, init, loss_grad,
 *                evaluate
 *   nn_batchnorm.c  batch normalisation, the one layer with buffers
 *
 * Nothing here calls ferry but through the device and model ops tables. */
#ifndef FERRY_RUNTIME_NN_INT_H
#define FERRY_RUNTIME_NN_INT_H

#include <ferry/nn.h>

/* A batch's activation buffers and the two gradient buffers the backward
 * pass moves between, carved from the workspace. */
typedef struct nn_bufs {
    float *act[FERRY_NN_MAX_LAYERS];
    float *grad[2];
} nn_bufs;

/* The layer's spec, step and the tensors it reads and writes for a batch
 * of n. */
typedef struct nn_ctx {
    const ferry_nn_t *nn;
    ferry_model_ctx_t *mc;
    const float *params; /* device */
    float *grad;         /* device; NULL in evaluation */
    int n;
    float *const *act; /* the activation buffers (nn_bufs.act) */
    const float *x;    /* the batch's samples */
    uint64_t seed;     /* dropout's, drawn for each training batch */
} nn_ctx;

/* Layer i's forward from x into y (which may be x for the layers that
 * work in place). 0 or FERRY_E*. */
int nn_forward(const nn_ctx *c, int i, const float *x, float *y);
/* Layer i's backward: the tensors' gradients, and dx (NULL: not wanted)
 * from dy, x its input and y its output. dx may be dy for the layers that
 * work in place. */
int nn_backward(const nn_ctx *c, int i, const float *x, const float *y, const float *dy,
                float *dx);
/* Whether layer i's output lies in its input's buffer. */
bool nn_in_place(const ferry_nn_t *nn, int i);
/* Layer i's output (i == -1: the batch's samples). */
float *nn_output(const nn_ctx *c, int i);
/* After layer i's backward wrote dx: adds the gradient of every skip
 * connection that starts at its input. */
void nn_add_skips(const nn_ctx *c, int i, float *dx);

/* nn_batchnorm.c: a batch normalisation's channels and values a channel
 * for its input shape (a vector {1, 1, n} is n channels of one value). */
void nn_bn_shape(const ferry_nn_step_t *st, int *channels, int *hw);
/* Floats of its aux buffer a sample: each channel's mean and rstd, and a
 * one (the step counter's increment). */
size_t nn_bn_aux(const ferry_nn_step_t *st);
/* Its forward (training: the batch's statistics, the running ones moved;
 * evaluation: the running ones) and backward. */
int nn_bn_forward(const nn_ctx *c, int i, const float *x, float *y);
int nn_bn_backward(const nn_ctx *c, int i, const float *x, const float *dy, float *dx);

#endif

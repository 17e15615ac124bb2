/* ferry — a trainable model: included by <ferry/task.h>.
 *
 * A module makes itself trainable by pointing its descriptor's .model at a
 * ferry_model_t. The runtime owns everything around the model: the device,
 * the flat parameter and gradient buffers, the activations' workspace, the
 * data, the optimizer and the network. The model only says how many
 * parameters it has and in which tensors, initialises them, and computes the
 * loss and its gradient (or the accuracy) for one batch with the device's
 * operations:
 *
 *     static const ferry_param_t params[] = {
 *         {"fc.w", {784, 10}}, {"fc.b", {10}}, {NULL}};
 *     static size_t work(int batch) { return (size_t)batch * 10; }
 *     static int init(ferry_model_ctx_t *mc, float *p) { ... }
 *     static int step(ferry_model_ctx_t *mc, const float *p, const ferry_batch_t *b,
 *                     float *grad, float *loss) { ... }
 *     static int eval(...) { ... }
 *     static const ferry_model_t model = {
 *         FERRY_MODEL_HEADER, .kind = FERRY_MODEL_CLASSIFIER,
 *         .input = {1, 28, 28}, .outputs = 10, .params = params,
 *         .workspace = work, .init = init, .loss_grad = step, .evaluate = eval};
 *     FERRY_TASK(.name = "softmax", .model = &model);
 *
 * `ferry submit module.so --epochs 5` then trains it. */
#ifndef FERRY_MODEL_H
#define FERRY_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <ferry/device.h>
#include <ferry/error.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FERRY_MODEL_ABI_VERSION 1u

enum {
    FERRY_MODEL_CLASSIFIER = 1, /* int32 labels in [0, outputs); softmax_xent */
    FERRY_MODEL_REGRESSOR = 2,  /* float targets, `outputs` a sample; mse */
};

/* One parameter tensor: its name and shape (unused dimensions 0). The
 * tensors lie one after another, in this order, in the flat parameter
 * buffer, each starting on a 16-float boundary (ferry_model_layout()). */
typedef struct ferry_param_t {
    const char *name;
    int shape[4];
} ferry_param_t;

/* A batch, on the device: n samples of the model's input, and either labels
 * (classifier) or targets (regressor, n x outputs).
 *
 * An empty batch (n == 0): the runtime never passes one to loss_grad (a
 * rank whose slice of a synchronous step's global batch is empty takes part
 * in the step with a zero gradient, without calling the model), but it does
 * pass one to evaluate, for a rank whose slice of a test batch is empty
 * (fewer samples left at the end of the test set than ranks). evaluate then
 * returns 0 with *loss and *correct 0 and reads neither x nor the labels or
 * targets, which may be NULL. A model may take an empty batch in loss_grad
 * too, as the bundled ones do: 0, a zero gradient and a zero loss
 * (ferry_empty_grad in <ferry/layers.h>). */
typedef struct ferry_batch_t {
    int n;
    const float *x;
    const int32_t *labels;
    const float *targets;
} ferry_batch_t;

typedef struct ferry_model_ctx_t ferry_model_ctx_t;

/* Host-side help the runtime offers a model. */
typedef struct ferry_model_ops_t {
    uint32_t version, size;
    /* n values from the run's seeded generator: normal(0, std), or uniform
     * in [-bound, bound]. Deterministic for a seed and call sequence. */
    void (*normal)(ferry_model_ctx_t *mc, float *out, size_t n, float std);
    void (*uniform)(ferry_model_ctx_t *mc, float *out, size_t n, float bound);
    void (*log)(ferry_model_ctx_t *mc, int level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
    /* Added in ferry 0.2 (check `size`, or call ferry_model_grad_ready()):
     * during loss_grad, says that the gradient of params[tensor] is final,
     * so that synchronous training can start summing it across the workers
     * while the model still computes the others (what DDP's autograd hooks
     * do). Optional: a model that never calls it trains the same, with no
     * overlap. On a GPU, "final" is in the device's stream order. */
    void (*grad_ready)(ferry_model_ctx_t *mc, int tensor);
    /* Added in ferry 0.3 (check `size`, or call ferry_model_answer()): the
     * parameters the run's data set was drawn from, when it has them: n
     * floats into host memory `out` (the "linear" set: its weights, one a
     * feature, then its bias). 0; FERRY_ENOENT for a set with no known
     * answer (Fashion-MNIST); FERRY_EINVAL when n is not its size. */
    int (*answer)(ferry_model_ctx_t *mc, float *out, size_t n);
} ferry_model_ops_t;

struct ferry_model_ctx_t {
    uint32_t version, size;
    ferry_device_t *dev;
    /* Device memory of workspace(batch_max) floats, the model's to use for
     * activations during loss_grad and evaluate; contents not kept between
     * calls. */
    float *work;
    int batch_max;
    const ferry_model_ops_t *ops;
    void *impl; /* the runtime's; do not touch */
    /* Added in ferry 0.5 (check `size`, or call ferry_model_buffers()):
     * the model's buffers (ferry_model_t.buffers), device memory of
     * ferry_model_buffers_layout() floats that the runtime allocates for
     * each rank and keeps between calls; NULL for a model without. The
     * call says the mode: loss_grad trains (a batch normalisation uses the
     * batch's statistics and updates its running ones here), evaluate and
     * predict evaluate (they read the buffers and leave them alone). */
    float *buffers;
};

/* A figure of its own a model reports after each evaluation (see
 * ferry_model_t.metrics): `name` a string of the module's own data, short,
 * in snake_case ("test_mse", "weight_error"). */
typedef struct ferry_model_metric_t {
    const char *name;
    double value;
} ferry_model_metric_t;

/* The most figures one model reports. */
#define FERRY_MODEL_METRICS_MAX 4

typedef struct ferry_model_t {
    uint32_t version, size; /* FERRY_MODEL_HEADER fills them */
    int kind;               /* FERRY_MODEL_CLASSIFIER or FERRY_MODEL_REGRESSOR */
    /* Data it trains on: NULL or "fashion-mnist", or "linear" (a synthetic
     * regression set with a known answer, see runtime/data). */
    const char *dataset;
    int input[3]; /* one sample: channels, height, width (a vector: {1, 1, n}) */
    int outputs;  /* classes, or regression outputs */
    const ferry_param_t *params; /* ends with {NULL} */
    /* Floats of workspace for a batch of `batch`. */
    size_t (*workspace)(int batch);
    /* Writes the initial parameters into `params` (host memory, laid out as
     * above, zeroed), drawing from mc->ops. 0 or FERRY_E*. */
    int (*init)(ferry_model_ctx_t *mc, float *params);
    /* Forward and backward on a batch: the mean loss into *loss (host) and
     * its gradient into `grad` (device, the layout of params, every element
     * overwritten; padding between tensors may be left alone). 0 or FERRY_E*.
     * Never called with an empty batch (see ferry_batch_t). */
    int (*loss_grad)(ferry_model_ctx_t *mc, const float *params, const ferry_batch_t *b,
                     float *grad, float *loss);
    /* Forward only: the mean loss and, for a classifier, how many samples
     * it gets right (a regressor sets 0). Must take an empty batch: 0, with
     * *loss and *correct 0 (see ferry_batch_t). */
    int (*evaluate)(ferry_model_ctx_t *mc, const float *params, const ferry_batch_t *b,
                    float *loss, int *correct);
    /* Added in ferry 0.3; optional (NULL, or a descriptor of
     * FERRY_MODEL_SIZE_V1 bytes built before it: none). After each
     * evaluation, figures of the model's own that the run reports beside
     * the test loss (and, for a classifier, the accuracy): at most `max`
     * into `out`; returns how many, or FERRY_E*. `params` as for evaluate
     * (device memory: copy what it needs with dev->ops->download);
     * `test_loss` the mean loss over the whole test set. A regressor is
     * judged by these: linreg reports the test MSE and how far its weights
     * are from the data set's known answer (mc->ops->answer). In sync mode
     * every rank computes them on the same parameters; in async mode each
     * rank on its own copy, and the run reports their mean. */
    int (*metrics)(ferry_model_ctx_t *mc, const float *params, double test_loss,
                   ferry_model_metric_t *out, int max);
    /* Added in ferry 0.4; optional (`ferry predict` needs it). Forward
     * only: the model's outputs for the batch into `out` (device memory,
     * b->n x outputs floats): a classifier's logits (the runtime turns them
     * into probabilities), a regressor's predictions. Labels and targets
     * may be NULL. 0 or FERRY_E*. */
    int (*predict)(ferry_model_ctx_t *mc, const float *params, const ferry_batch_t *b,
                   float *out);
    /* Added in ferry 0.4; optional. A model that leaves its `input` (or
     * `outputs`) 0 takes it from the data: before anything else the runtime
     * calls reshape with the training set's sample shape (channels, height,
     * width; a table's row is {1, 1, columns}) and its classes, or a
     * regressor's outputs a sample, and the model fills in its descriptor
     * (input, outputs, params) for them. 0, or FERRY_EINVAL when it cannot
     * take that data. Every layer-list model has one. */
    int (*reshape)(const int input[3], int outputs);
    /* Added in ferry 0.5; optional (NULL, or a descriptor of
     * FERRY_MODEL_SIZE_V3 bytes built before it: none). State the model
     * keeps but does not learn, PyTorch's buffers (a batch normalisation's
     * running mean and variance): tensors laid out as params are (each on a
     * 16-float boundary, ferry_model_buffers_layout()), ending with {NULL};
     * a tensor of no dimensions is a scalar. The runtime allocates them on
     * the device for each rank (ferry_model_ctx_t.buffers), never sums them
     * across the workers nor sends them to the parameter server, and saves
     * and loads them beside the parameters by name (--save, --init-from).
     * In sync mode rank 0's replace the other ranks' before each
     * evaluation (DDP's broadcast_buffers, once an epoch); in async mode
     * each rank keeps its own, and a run saves rank 0's. */
    const ferry_param_t *buffers;
    /* Optional: writes the buffers' initial values into `buffers` (host
     * memory, laid out as above, zeroed), as init does the parameters.
     * NULL: zeros. 0 or FERRY_E*. */
    int (*init_buffers)(ferry_model_ctx_t *mc, float *buffers);
} ferry_model_t;

/* The size of a descriptor built before `metrics` was added: the runtime
 * takes any size from this one up, and reads only what `size` covers. */
#define FERRY_MODEL_SIZE_V1 offsetof(ferry_model_t, metrics)
/* Before `predict` was added. */
#define FERRY_MODEL_SIZE_V2 offsetof(ferry_model_t, predict)
/* Before `buffers` was added. */
#define FERRY_MODEL_SIZE_V3 offsetof(ferry_model_t, buffers)

#define FERRY_MODEL_HEADER                                                               \
    .version = FERRY_MODEL_ABI_VERSION, .size = sizeof(ferry_model_t)

/* The data set's known answer through mc->ops->answer, when the runtime has
 * it (an older one has a smaller ops table: FERRY_ENOENT). */
static inline int ferry_model_answer(ferry_model_ctx_t *mc, float *out, size_t n)
{
    const ferry_model_ops_t *o = mc->ops;
    if (o->size < offsetof(ferry_model_ops_t, answer) + sizeof o->answer || !o->answer)
        return FERRY_ENOENT;
    return o->answer(mc, out, n);
}

/* Calls mc->ops->grad_ready when the runtime has it (a runtime older than
 * the member has a smaller ops table). */
static inline void ferry_model_grad_ready(ferry_model_ctx_t *mc, int tensor)
{
    const ferry_model_ops_t *o = mc->ops;
    if (o->size >= offsetof(ferry_model_ops_t, grad_ready) + sizeof o->grad_ready &&
        o->grad_ready)
        o->grad_ready(mc, tensor);
}

/* Elements of one parameter tensor. */
static inline size_t ferry_param_count(const ferry_param_t *p)
{
    size_t n = 1;
    for (int i = 0; i < 4 && p->shape[i] > 0; i++)
        n *= (size_t)p->shape[i];
    return n;
}

/* Where tensor i of `list` (ending with {NULL}) starts in its flat
 * buffer, in floats: offsets[i] for each tensor, and the whole buffer's
 * length as the return value. `offsets` may be NULL. Every tensor starts
 * on a 16-float (64-byte) boundary. */
static inline size_t ferry_tensors_layout(const ferry_param_t *list, size_t *offsets)
{
    size_t at = 0;
    for (int i = 0; list && list[i].name; i++) {
        if (offsets)
            offsets[i] = at;
        at += (ferry_param_count(&list[i]) + 15) / 16 * 16;
    }
    return at;
}

/* The flat parameter buffer's layout (see ferry_tensors_layout). */
static inline size_t ferry_model_layout(const ferry_model_t *m, size_t *offsets)
{
    return ferry_tensors_layout(m->params, offsets);
}

/* The model's buffers, or NULL when it has none (or its descriptor was
 * built before the member). */
static inline const ferry_param_t *ferry_model_buffer_list(const ferry_model_t *m)
{
    if (m->size < offsetof(ferry_model_t, buffers) + sizeof m->buffers || !m->buffers ||
        !m->buffers[0].name)
        return NULL;
    return m->buffers;
}

/* The flat buffers' layout: 0 floats for a model without. */
static inline size_t ferry_model_buffers_layout(const ferry_model_t *m, size_t *offsets)
{
    return ferry_tensors_layout(ferry_model_buffer_list(m), offsets);
}

/* mc->buffers, or NULL from a runtime older than the member. */
static inline float *ferry_model_buffers(const ferry_model_ctx_t *mc)
{
    if (mc->size < offsetof(ferry_model_ctx_t, buffers) + sizeof mc->buffers)
        return NULL;
    return mc->buffers;
}

#ifdef __cplusplus
}
#endif

#endif

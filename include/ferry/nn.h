/* ferry — a model as a list of layers: the runtime's ferry_model_t derived
 * from it, backward pass included.
 *
 *     #include <ferry/nn.h>
 *
 *     static const ferry_nn_layer_t layers[] = {
 *         FERRY_NN_DENSE("fc1", 256), FERRY_NN_RELU(),
 *         FERRY_NN_DENSE("fc2", 0), FERRY_NN_END()};
 *     FERRY_NN_MODEL(model, .dataset = "fashion-mnist", .input = {1, 28, 28},
 *                    .outputs = 10, .layers = layers);
 *     FERRY_TASK(.name = "mlp", .model = &model);
 *
 * From the list, the library derives the parameter tensors and their names
 * (`<layer>.weight`, `<layer>.bias`; a layer without a name is called by
 * its index in the list, as nn.Sequential names them), every layer's
 * shape, the workspace, PyTorch's default initialisation, the forward pass,
 * the backward pass in reverse order with grad_ready for each layer as soon
 * as its gradient is final, and evaluation.
 *
 * Shapes: `.input` is one sample (channels, height, width; a vector is
 * {1, 1, n}); a dense layer flattens what it is given. A last dense or
 * convolution layer of width 0 takes the model's `.outputs`; `.outputs` 0
 * takes the last layer's width.
 *
 * The library is a static archive linked into the module (`pkg-config
 * --libs ferry` names it), for the same reason <ferry/layers.h> is static
 * inline: a module reaches ferry only through the tables it is handed, so
 * that whichever process loads it (worker, `ferry check`, a benchmark) is
 * the ferry it runs on. It calls nothing but the device and model ops. */
#ifndef FERRY_NN_H
#define FERRY_NN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ferry/task.h>

#ifdef __cplusplus
extern "C" {
#endif

enum ferry_nn_kind {
    FERRY_NN_LAYER_END = 0,
    FERRY_NN_LAYER_DENSE,   /* units outputs, weight [in][units], bias [units] */
    FERRY_NN_LAYER_CONV2D,  /* units filters of size x size, stride, pad */
    FERRY_NN_LAYER_MAXPOOL, /* size x size windows moved by stride */
    FERRY_NN_LAYER_FLATTEN, /* c x h x w -> 1 x 1 x chw, no copy */
    FERRY_NN_LAYER_RELU,
    FERRY_NN_LAYER_CUSTOM, /* .custom: the author's forward and backward */
    FERRY_NN_LAYER_TANH,
    FERRY_NN_LAYER_SIGMOID,
    FERRY_NN_LAYER_LEAKY_RELU,     /* .alpha: the slope below 0 */
    FERRY_NN_LAYER_GELU,           /* the exact one (erf), PyTorch's default */
    FERRY_NN_LAYER_AVGPOOL,        /* size x size windows moved by stride */
    FERRY_NN_LAYER_GLOBAL_AVGPOOL, /* c x h x w -> c x 1 x 1 (a square map) */
    FERRY_NN_LAYER_DROPOUT,        /* .alpha: p; seeded, the identity in evaluation */
    /* Adds the input of the .size layers before it to their output: a
     * ResNet skip connection around them (same shapes). */
    FERRY_NN_LAYER_RESIDUAL,
    /* Normalises each sample (all of c x h x w) to mean 0 and variance 1,
     * then weight and bias elementwise: PyTorch's LayerNorm over the
     * sample's shape, eps 1e-5. */
    FERRY_NN_LAYER_LAYERNORM,
    /* PyTorch's BatchNorm1d on a vector ({1, 1, n}: n features) or
     * BatchNorm2d on c x h x w (per channel), eps 1e-5, momentum 0.1:
     * training normalises with the batch's statistics and moves the
     * running ones towards them (the variance unbiased), evaluation and
     * prediction use the running ones. Tensors weight (1) and bias (0);
     * buffers running_mean (0), running_var (1) and num_batches_tracked
     * (float32, where PyTorch's is int64: ferry keeps every tensor in
     * float32). In synchronous training each worker normalises with its
     * own slice's statistics (DDP without SyncBatchNorm), and rank 0's
     * running statistics replace the others' before each evaluation (DDP's
     * broadcast_buffers, once an epoch rather than every step), so that
     * every rank evaluates, and the run saves, one model; in asynchronous
     * training each rank keeps its own, and the run saves rank 0's. */
    FERRY_NN_LAYER_BATCHNORM,
};

enum ferry_nn_loss {
    FERRY_NN_SOFTMAX_XENT = 0, /* a classifier: int32 labels */
    FERRY_NN_MSE = 1,          /* a regressor: float targets */
    FERRY_NN_BCE_LOGITS = 2,   /* float targets in [0, 1], a logit each */
};

/* The most parameter tensors a custom layer has. */
#define FERRY_NN_CUSTOM_PARAMS 4

/* What a custom layer's forward and backward work on: n samples, each of
 * shape `in` going in and `out` coming out; device memory throughout. */
typedef struct ferry_nn_io_t {
    ferry_device_t *dev;
    int n;
    int in[3], out[3];
    const float *x; /* [n][in] */
    const float *y; /* [n][out]: forward writes it (through `out_y`) */
    float *out_y;
    const float *dy; /* backward: the loss's gradient by y */
    float *dx;       /* backward: by x, overwritten; NULL when nobody needs it */
    const float *p[FERRY_NN_CUSTOM_PARAMS]; /* the layer's tensors */
    float *dp[FERRY_NN_CUSTOM_PARAMS];      /* backward: their gradients, overwritten */
} ferry_nn_io_t;

/* A layer kind of the author's: its tensors (name suffixes, "weight"), its
 * output shape and its two passes, written on device operations. */
typedef struct ferry_nn_custom_t {
    /* From one sample's input shape: the output's into `out`, and the
     * parameter tensors into `params` (name a suffix, shape; at most
     * FERRY_NN_CUSTOM_PARAMS). Returns how many tensors, or FERRY_EINVAL
     * for an input it cannot take. */
    int (*shape)(const int in[3], int out[3], ferry_param_t *params);
    /* Initial values of the tensors (host memory, zeroed); NULL: zeros. */
    int (*init)(ferry_model_ctx_t *mc, const int in[3], float *const *p);
    int (*forward)(const ferry_nn_io_t *io);
    int (*backward)(const ferry_nn_io_t *io);
} ferry_nn_custom_t;

typedef struct ferry_nn_layer_t {
    int kind;         /* enum ferry_nn_kind */
    const char *name; /* its tensors' prefix; NULL: its index */
    int units;        /* dense: outputs; conv2d: filters (0: the model's outputs) */
    int size, stride, pad;
    float alpha; /* leaky ReLU's slope; dropout's p */
    const ferry_nn_custom_t *custom;
} ferry_nn_layer_t;

/* One layer each; a row each reads better than clang-format's blocks. */
/* clang-format off */
#define FERRY_NN_DENSE(nm, n) {.kind = FERRY_NN_LAYER_DENSE, .name = (nm), .units = (n)}
#define FERRY_NN_CONV2D(nm, filters, side, strd, padding)                                \
    {.kind = FERRY_NN_LAYER_CONV2D, .name = (nm), .units = (filters), .size = (side),     \
     .stride = (strd), .pad = (padding)}
#define FERRY_NN_MAXPOOL(side, strd)                                                     \
    {.kind = FERRY_NN_LAYER_MAXPOOL, .size = (side), .stride = (strd)}
#define FERRY_NN_AVGPOOL(side, strd)                                                     \
    {.kind = FERRY_NN_LAYER_AVGPOOL, .size = (side), .stride = (strd)}
#define FERRY_NN_GLOBAL_AVGPOOL()  {.kind = FERRY_NN_LAYER_GLOBAL_AVGPOOL}
#define FERRY_NN_FLATTEN()         {.kind = FERRY_NN_LAYER_FLATTEN}
#define FERRY_NN_RELU()            {.kind = FERRY_NN_LAYER_RELU}
#define FERRY_NN_TANH()            {.kind = FERRY_NN_LAYER_TANH}
#define FERRY_NN_SIGMOID()         {.kind = FERRY_NN_LAYER_SIGMOID}
#define FERRY_NN_GELU()            {.kind = FERRY_NN_LAYER_GELU}
#define FERRY_NN_LEAKY_RELU(slope) {.kind = FERRY_NN_LAYER_LEAKY_RELU, .alpha = (slope)}
#define FERRY_NN_DROPOUT(p)        {.kind = FERRY_NN_LAYER_DROPOUT, .alpha = (p)}
#define FERRY_NN_RESIDUAL(n)       {.kind = FERRY_NN_LAYER_RESIDUAL, .size = (n)}
#define FERRY_NN_LAYERNORM(nm)     {.kind = FERRY_NN_LAYER_LAYERNORM, .name = (nm)}
#define FERRY_NN_BATCHNORM(nm)     {.kind = FERRY_NN_LAYER_BATCHNORM, .name = (nm)}
#define FERRY_NN_CUSTOM(nm, c)     {.kind = FERRY_NN_LAYER_CUSTOM, .name = (nm), .custom = (c)}
#define FERRY_NN_END()             {.kind = FERRY_NN_LAYER_END}
/* clang-format on */

#define FERRY_NN_MAX_LAYERS 64
#define FERRY_NN_MAX_PARAMS 128
#define FERRY_NN_NAME_MAX   48
#define FERRY_NN_MAX_BUFFERS 96

/* What the library derives for one layer (its own; read, never written, by
 * the author). Sizes are one sample's, in floats. */
typedef struct ferry_nn_step_t {
    int in[3], out[3];
    size_t in_n, out_n;
    int param0, nparams; /* its tensors in the model's params */
    int buf;             /* the activation buffer its output lies in */
    /* dropout: its mask's buffer; residual: its skip's gradient; layer
     * norm: each sample's mean and 1/std; batch norm: each channel's (else
     * -1) */
    int aux;
    int buffer0, nbuffers; /* its buffers in the model's buffers */
    int skip;     /* residual: the layer whose output it adds (-1: the batch) */
    bool fused;   /* a dense layer whose ReLU it applies itself */
    bool need_dx; /* a layer before it has parameters */
} ferry_nn_step_t;

/* The derived model: static storage in the module, since the runtime
 * checks that a descriptor's tables lie inside it. */
typedef struct ferry_nn_plan_t {
    int nlayers, nparams, nbufs;
    ferry_nn_step_t step[FERRY_NN_MAX_LAYERS];
    size_t buf_n[FERRY_NN_MAX_LAYERS]; /* each activation buffer, a sample */
    size_t grad_n;                     /* the largest activation, a sample */
    ferry_param_t params[FERRY_NN_MAX_PARAMS + 1];
    size_t offset[FERRY_NN_MAX_PARAMS];
    char names[FERRY_NN_MAX_PARAMS][FERRY_NN_NAME_MAX];
    /* The model's buffers (ferry_model_t.buffers), likewise. */
    int nbuffers;
    ferry_param_t buffers[FERRY_NN_MAX_BUFFERS + 1];
    size_t buffer_offset[FERRY_NN_MAX_BUFFERS];
    char buffer_names[FERRY_NN_MAX_BUFFERS][FERRY_NN_NAME_MAX];
    char err[256]; /* why ferry_nn_build failed */
    /* What the runtime then reads as the one tensor's name, so that its
     * refusal says why ("parameter of the layer list (layer 0 ...) has an
     * empty shape"). */
    char refusal[320];
} ferry_nn_plan_t;

typedef struct ferry_nn_t {
    const char *dataset; /* as ferry_model_t's */
    int input[3];        /* {0, 0, 0}: the data's sample shape */
    int outputs;         /* 0 with a last layer of width 0: the data's classes */
    int loss;                       /* enum ferry_nn_loss */
    const ferry_nn_layer_t *layers; /* ends with FERRY_NN_END() */
    ferry_nn_plan_t plan;           /* the library's */
    /* The library's: what the data decides, as first declared. */
    bool declared, input_from_data, outputs_from_data;
} ferry_nn_t;

/* Derives the plan and fills the descriptor `m` (kind, dataset, input,
 * outputs, params): 0, or FERRY_EINVAL with nn->plan.err saying which layer
 * is wrong, and m->params left NULL, which the runtime refuses.
 * FERRY_NN_MODEL calls it when the module is loaded. */
int ferry_nn_build(ferry_nn_t *nn, ferry_model_t *m);
size_t ferry_nn_workspace(const ferry_nn_t *nn, int batch);
int ferry_nn_init(const ferry_nn_t *nn, ferry_model_ctx_t *mc, float *params);
int ferry_nn_init_buffers(const ferry_nn_t *nn, ferry_model_ctx_t *mc, float *buffers);
int ferry_nn_loss_grad(const ferry_nn_t *nn, ferry_model_ctx_t *mc, const float *params,
                       const ferry_batch_t *b, float *grad, float *loss);
int ferry_nn_evaluate(const ferry_nn_t *nn, ferry_model_ctx_t *mc, const float *params,
                      const ferry_batch_t *b, float *loss, int *correct);
int ferry_nn_predict(const ferry_nn_t *nn, ferry_model_ctx_t *mc, const float *params,
                     const ferry_batch_t *b, float *out);
/* Builds the plan again for the data's sample shape and classes (what the
 * model left 0 takes them; the rest stays as declared). */
int ferry_nn_reshape(ferry_nn_t *nn, ferry_model_t *m, const int input[3], int outputs);

/* Defines `var`, a ferry_model_t built from the ferry_nn_t fields given
 * (.layers, .input, .outputs, .dataset, .loss) when the module is loaded. */
#define FERRY_NN_MODEL(var, ...)                                                         \
    static ferry_nn_t var##_nn = {__VA_ARGS__};                                          \
    static size_t var##_workspace(int batch)                                             \
    {                                                                                    \
        return ferry_nn_workspace(&var##_nn, batch);                                     \
    }                                                                                    \
    static int var##_init(ferry_model_ctx_t *mc, float *p)                               \
    {                                                                                    \
        return ferry_nn_init(&var##_nn, mc, p);                                          \
    }                                                                                    \
    static int var##_init_buffers(ferry_model_ctx_t *mc, float *b)                       \
    {                                                                                    \
        return ferry_nn_init_buffers(&var##_nn, mc, b);                                  \
    }                                                                                    \
    static int var##_loss_grad(ferry_model_ctx_t *mc, const float *p,                    \
                               const ferry_batch_t *b, float *grad, float *loss)         \
    {                                                                                    \
        return ferry_nn_loss_grad(&var##_nn, mc, p, b, grad, loss);                      \
    }                                                                                    \
    static int var##_evaluate(ferry_model_ctx_t *mc, const float *p,                     \
                              const ferry_batch_t *b, float *loss, int *correct)         \
    {                                                                                    \
        return ferry_nn_evaluate(&var##_nn, mc, p, b, loss, correct);                    \
    }                                                                                    \
    static int var##_predict(ferry_model_ctx_t *mc, const float *p,                      \
                             const ferry_batch_t *b, float *out)                         \
    {                                                                                    \
        return ferry_nn_predict(&var##_nn, mc, p, b, out);                               \
    }                                                                                    \
    static ferry_model_t var;                                                            \
    static int var##_reshape(const int in[3], int outputs)                               \
    {                                                                                    \
        return ferry_nn_reshape(&var##_nn, &var, in, outputs);                           \
    }                                                                                    \
    static ferry_model_t var = {FERRY_MODEL_HEADER,         .workspace = var##_workspace, \
                                .init = var##_init,         .loss_grad = var##_loss_grad, \
                                .evaluate = var##_evaluate, .predict = var##_predict,     \
                                .reshape = var##_reshape,                                 \
                                .init_buffers = var##_init_buffers};                     \
    __attribute__((constructor)) static void var##_build(void)                           \
    {                                                                                    \
        ferry_nn_build(&var##_nn, &var);                                                 \
    }

#ifdef __cplusplus
}
#endif

#endif

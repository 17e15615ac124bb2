/* oldmodel.so: a model descriptor as a module built before
 * ferry_model_t.metrics was added carries it: FERRY_MODEL_SIZE_V1 bytes,
 * and nothing of the module's after them (its own, shorter type). */
#include <ferry/task.h>

static const ferry_param_t params[] = {{"w", {1}}, {NULL, {0}}};

static size_t workspace(int batch)
{
    (void)batch;
    return 0;
}

static int init(ferry_model_ctx_t *mc, float *p)
{
    (void)mc, (void)p;
    return 0;
}

static int loss_grad(ferry_model_ctx_t *mc, const float *p, const ferry_batch_t *b,
                     float *grad, float *loss)
{
    (void)mc, (void)p, (void)b, (void)grad;
    *loss = 0;
    return 0;
}

static int evaluate(ferry_model_ctx_t *mc, const float *p, const ferry_batch_t *b,
                    float *loss, int *correct)
{
    (void)mc, (void)p, (void)b;
    *loss = 0;
    *correct = 0;
    return 0;
}

/* ferry_model_t up to evaluate, as it was. */
typedef struct model_v1 {
    uint32_t version, size;
    int kind;
    const char *dataset;
    int input[3];
    int outputs;
    const ferry_param_t *params;
    size_t (*workspace)(int batch);
    int (*init)(ferry_model_ctx_t *mc, float *params);
    int (*loss_grad)(ferry_model_ctx_t *mc, const float *params, const ferry_batch_t *b,
                     float *grad, float *loss);
    int (*evaluate)(ferry_model_ctx_t *mc, const float *params, const ferry_batch_t *b,
                    float *loss, int *correct);
} model_v1;

_Static_assert(sizeof(model_v1) == FERRY_MODEL_SIZE_V1, "the first layout");

static const model_v1 model = {
    .version = FERRY_MODEL_ABI_VERSION, .size = sizeof(model_v1),
    .kind = FERRY_MODEL_REGRESSOR,      .dataset = "linear",
    .input = {1, 1, 1},                 .outputs = 1,
    .params = params,                   .workspace = workspace,
    .init = init,                       .loss_grad = loss_grad,
    .evaluate = evaluate,
};

FERRY_TASK(.name = "oldmodel", .model = (const ferry_model_t *)&model);

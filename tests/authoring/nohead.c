/* nohead.so: a complete model whose descriptor forgot FERRY_MODEL_HEADER:
 * its version and size are 0. */
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

static const ferry_model_t model = {
    .kind = FERRY_MODEL_REGRESSOR, .dataset = "linear",   .input = {1, 1, 1},
    .outputs = 1,                  .params = params,      .workspace = workspace,
    .init = init,                  .loss_grad = loss_grad, .evaluate = evaluate,
};

FERRY_TASK(.name = "nohead", .model = &model);

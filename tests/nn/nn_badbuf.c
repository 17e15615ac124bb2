/* A hand-written model whose buffer table names a tensor with a pointer
 * outside the module: refused when the module is opened, naming the
 * buffer, before anything reads it. Its functions never run. */
#include <stdint.h>

#include <ferry/task.h>

static size_t work(int batch)
{
    return (size_t)batch;
}

static int init(ferry_model_ctx_t *mc, float *p)
{
    (void)mc, (void)p;
    return FERRY_ENOTSUP;
}

static int step(ferry_model_ctx_t *mc, const float *p, const ferry_batch_t *b, float *g,
                float *loss)
{
    (void)mc, (void)p, (void)b, (void)g, (void)loss;
    return FERRY_ENOTSUP;
}

static int eval(ferry_model_ctx_t *mc, const float *p, const ferry_batch_t *b,
                float *loss, int *correct)
{
    (void)mc, (void)p, (void)b, (void)loss, (void)correct;
    return FERRY_ENOTSUP;
}

static const ferry_param_t params[] = {{"fc.weight", {4, 2}}, {NULL, {0}}};
static const ferry_param_t buffers[] = {{(const char *)(uintptr_t)0x10, {2}},
                                        {NULL, {0}}};

static const ferry_model_t model = {FERRY_MODEL_HEADER, .kind = FERRY_MODEL_CLASSIFIER,
                                    .input = {1, 1, 4}, .outputs = 2,
                                    .params = params,   .workspace = work,
                                    .init = init,       .loss_grad = step,
                                    .evaluate = eval,   .buffers = buffers};

FERRY_TASK(.name = "badbuf", .model = &model);

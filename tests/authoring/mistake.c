/* A small regression model on the "linear" set that makes one mistake,
 * chosen when it is built (-DMISTAKE=...), as an author might:
 *   chattymodel.so  logs a line in every loss_grad (mc->ops->log)
 *   nullgrad.so     loss_grad stores through a NULL struct pointer (to its
 *                   member at offset 16), in a helper of its own
 *   overrun.so      loss_grad writes 8 floats past the end of its workspace
 *   nohead.so       its descriptor leaves out FERRY_MODEL_HEADER (version
 *                   and size 0)
 * Otherwise it trains, to nothing: a zero gradient. */
#include <stdint.h>

#include <ferry/layers.h>
#include <ferry/task.h>

#define CHATTY   1
#define NULLGRAD 2
#define OVERRUN  3
#define NOHEAD   4

static const ferry_param_t params[] = {{"weight", {8, 1}}, {"bias", {1}}, {NULL, {0}}};
static const ferry_model_t model;

static size_t workspace(int batch)
{
    return (size_t)batch;
}

static int init(ferry_model_ctx_t *mc, float *p)
{
    (void)mc, (void)p;
    return 0;
}

struct sample_stats {
    int64_t seen, pad;
    float sum;
};

/* Never set: what the author forgot to allocate. */
static struct sample_stats *volatile stats_of_run;

/* A sanitizer build would report the NULL member access and exit: the
 * crash is what this module is for. */
__attribute__((noinline, unused, no_sanitize("undefined"))) static void
count_into(struct sample_stats *s, int n)
{
    s->sum += (float)n; /* s is NULL for nullgrad.so */
}

static int loss_grad(ferry_model_ctx_t *mc, const float *p, const ferry_batch_t *b,
                     float *grad, float *loss)
{
    (void)p, (void)b;
    static int steps;
    ferry_empty_grad(mc, &model, grad, loss);
#if MISTAKE == CHATTY
    mc->ops->log(mc, FERRY_LOG_INFO, "step %d of a batch of %d", steps, b->n);
#elif MISTAKE == NULLGRAD
    count_into(stats_of_run, b->n);
#elif MISTAKE == OVERRUN
    /* The workspace holds batch_max floats: 8 more are written. */
    mc->dev->ops->fill(mc->dev, mc->work, 1.0f, (size_t)mc->batch_max + 8);
#endif
    steps++;
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
#if MISTAKE != NOHEAD
    FERRY_MODEL_HEADER,
#endif
    .kind = FERRY_MODEL_REGRESSOR,
    .dataset = "linear",
    .input = {1, 1, 8},
    .outputs = 1,
    .params = params,
    .workspace = workspace,
    .init = init,
    .loss_grad = loss_grad,
    .evaluate = evaluate,
};

FERRY_TASK(.name = "mistake", .model = &model);

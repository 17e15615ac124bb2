/* badabi.so: a descriptor from a future ABI (version 99), written by hand
 * because FERRY_TASK always stamps the current version. */
#include <ferry/task.h>

static int noop(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    (void)ctx, (void)in, (void)out;
    return 0;
}

__attribute__((visibility("default"))) const ferry_task_t ferry_task = {
    .version = 99,
    .size = sizeof(ferry_task_t),
    .name = "badabi",
    .functions = FERRY_FUNCTIONS({"noop", noop}),
};

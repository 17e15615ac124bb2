/* chatty.so: a task that logs in a loop. Its driver calls "chat" on every
 * worker with the number of lines to log (its argument, default 5000), or,
 * given "evil", has worker 0 log a line that holds a terminal escape, a
 * newline, a byte that is no UTF-8 and a character that is, or, given
 * "fail", has worker 0 log why it is about to fail, then fail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ferry/task.h>

static int chat(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    (void)out;
    char arg[16] = "";
    if (in && in->len < sizeof arg)
        memcpy(arg, in->data, in->len);
    int n = arg[0] ? atoi(arg) : 5000;
    for (int i = 0; i < n; i++)
        ctx->ops->log(ctx, FERRY_LOG_INFO, "chat line %d of rank %d", i, ctx->rank);
    return 0;
}

static int evil(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    (void)in, (void)out;
    ctx->ops->log(ctx, FERRY_LOG_WARN, "red\x1b[31mtext\nsecond \xff caf\xc3\xa9");
    return 0;
}

static int fail(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    (void)in, (void)out;
    for (int i = 0; i < 300; i++) /* more than a failure carries */
        ctx->ops->log(ctx, FERRY_LOG_DEBUG, "reading line %d of settings.ini", i);
    ctx->ops->log(ctx, FERRY_LOG_ERROR, "settings.ini: no key 'lr' in [train]");
    return FERRY_EINVAL;
}

static int drive(ferry_driver_t *drv)
{
    char *arg = drv->argc > 1 ? drv->argv[1] : "5000";
    if (strcmp(arg, "evil") == 0 || strcmp(arg, "fail") == 0) {
        ferry_bytes_t out = {0};
        int rc = drv->ops->call(drv, 0, arg, NULL, &out);
        drv->ops->free_bytes(drv, &out);
        return rc;
    }
    int n = drv->world_size;
    ferry_bytes_t *in = calloc((size_t)n, sizeof *in),
                  *out = calloc((size_t)n, sizeof *out);
    int rc = in && out ? 0 : FERRY_ENOMEM;
    for (int i = 0; !rc && i < n; i++)
        in[i] = (ferry_bytes_t){arg, strlen(arg)};
    if (!rc)
        rc = drv->ops->call_all(drv, "chat", in, out);
    for (int i = 0; out && i < n; i++)
        drv->ops->free_bytes(drv, &out[i]);
    free(in);
    free(out);
    if (!rc)
        drv->ops->print(drv, "chatted");
    return rc;
}

FERRY_TASK(.name = "chatty",
           .functions = FERRY_FUNCTIONS({"chat", chat}, {"evil", evil}, {"fail", fail}),
           .driver = drive);

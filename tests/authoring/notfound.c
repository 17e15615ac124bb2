/* notfound.so: a driver that calls a function its module lacks and returns
 * what the call returned (a worker's NOT_FOUND), or, with the argument
 * "own", returns FERRY_EINVAL of its own after that call failed. */
#include <string.h>

#include <ferry/task.h>

static int echo(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    (void)ctx, (void)in, (void)out;
    return 0;
}

static int drive(ferry_driver_t *drv)
{
    ferry_bytes_t out = {0};
    int rc = drv->ops->call(drv, 0, "nosuch", NULL, &out);
    drv->ops->free_bytes(drv, &out);
    if (drv->argc > 1 && strcmp(drv->argv[1], "own") == 0)
        return FERRY_EINVAL;
    return rc;
}

FERRY_TASK(.name = "notfound", .functions = FERRY_FUNCTIONS({"echo", echo}),
           .driver = drive);

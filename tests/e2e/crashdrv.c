/* A task whose driver calls one of its failing functions on worker 0, prints
 * the error it got, then calls "echo" on the same worker to show the cluster
 * still serves: `ferry submit crashdrv.so -- segv`. The driver returns the
 * first call's error. Functions: echo, segv, abort, exit (the worker
 * exits with status 3), exit0 (the worker exits with status 0), shout
 * (writes 400 numbered lines of 100 bytes to stderr), fail (returns an
 * error with a text). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ferry/task.h>

static int echo(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    void *p = ctx->ops->result(ctx, out, in->len);
    if (!p && in->len)
        return FERRY_ENOMEM;
    if (in->len)
        memcpy(p, in->data, in->len);
    return 0;
}

static int segv(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    (void)ctx, (void)in, (void)out;
    /* Not NULL itself: sanitizer builds report a NULL store and exit rather
     * than crash, and a crash is what this module is for. */
    volatile int *volatile nowhere = (volatile int *)(uintptr_t)16;
    *nowhere = 1;
    return 0;
}

static int die(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    (void)ctx, (void)in, (void)out;
    abort();
}

static int quit(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    (void)ctx, (void)in, (void)out;
    exit(3);
}

static int quit0(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    (void)ctx, (void)in, (void)out;
    exit(0);
}

static int shout(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    (void)ctx, (void)in, (void)out;
    char line[101];
    for (int i = 0; i < 400; i++) {
        snprintf(line, sizeof line, "shout %04d %-88s\n", i, "");
        fputs(line, stderr);
    }
    return 0;
}

static int fail(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    (void)in, (void)out;
    return ctx->ops->fail(ctx, FERRY_EINVAL, "refused on purpose by rank %d", ctx->rank);
}

static int drive(ferry_driver_t *drv)
{
    const char *fn = drv->argc > 1 ? drv->argv[1] : "segv";
    ferry_bytes_t out = {0};
    int first = drv->ops->call(drv, 0, fn, NULL, &out);
    if (first)
        drv->ops->print(drv, "%s failed: %s", fn, drv->ops->error(drv));
    drv->ops->free_bytes(drv, &out);

    ferry_bytes_t in = {.data = "still here", .len = 10};
    int rc = drv->ops->call(drv, 0, "echo", &in, &out);
    if (rc == 0 && out.len == 10 && memcmp(out.data, "still here", 10) == 0)
        drv->ops->print(drv, "echo after %s: ok", fn);
    else
        drv->ops->print(drv, "echo after %s: FAILED: %s", fn, drv->ops->error(drv));
    drv->ops->free_bytes(drv, &out);
    return first ? first : rc;
}

FERRY_TASK(.name = "crashdrv",
           .functions = FERRY_FUNCTIONS({"echo", echo}, {"segv", segv}, {"abort", die},
                                        {"exit", quit}, {"exit0", quit0},
                                        {"shout", shout}, {"fail", fail}),
           .driver = drive);

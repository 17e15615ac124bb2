/* faulty.so: a task whose functions misbehave on request, for the worker's
 * bad-input tests. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ferry/task.h>

/* Fails with FERRY_EINVAL and a text that quotes the argument. */
static int fail(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    (void)out;
    return ctx->ops->fail(ctx, FERRY_EINVAL, "bad input: %.*s", (int)in->len,
                          in->len ? (const char *)in->data : "");
}

static int segv(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    (void)ctx, (void)in, (void)out;
    /* A member of a NULL struct pointer: a real fault, which sanitizer
     * builds leave to the signal (they would report a plain NULL store and
     * exit instead of crashing). */
    volatile int *volatile p = (volatile int *)(uintptr_t)16;
    *p = 42;
    return 0;
}

/* Never set: the recursion below has no end that the compiler can see, and
 * no warning about an endless one. */
static volatile unsigned overflow_depth_limit;

/* Each level keeps a small frame alive (the callee reads it, so no tail
 * call can reuse it) and touches both ends of it, so the stack grows one
 * frame at a time into its guard page rather than past it. */
static unsigned deeper(unsigned depth, volatile unsigned char *up)
{
    volatile unsigned char frame[256];
    frame[0] = (unsigned char)(up[0] + 1);
    frame[sizeof frame - 1] = (unsigned char)depth;
    if (depth == overflow_depth_limit)
        return frame[0];
    return deeper(depth + 1, frame) + frame[sizeof frame - 1];
}

/* Recurses until the stack runs out: a SIGSEGV on the guard page. */
static int overflow(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    (void)in, (void)out;
    volatile unsigned char top[1] = {0};
    unsigned r = deeper(1, top);
    return ctx->ops->fail(ctx, FERRY_EINVAL, "the stack did not run out (%u)", r);
}

static int abort_(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    (void)ctx, (void)in, (void)out;
    abort();
}

/* Returns its input, by way of scratch memory, and logs its size. */
static int echo(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    unsigned char *tmp = ctx->ops->scratch(ctx, in->len);
    if (!tmp || ((uintptr_t)tmp & 63))
        return ctx->ops->fail(ctx, FERRY_ENOMEM, "scratch of %zu bytes: %p", in->len,
                              (void *)tmp);
    if (in->len)
        memcpy(tmp, in->data, in->len);
    if (!ctx->ops->result(ctx, out, in->len))
        return ctx->ops->fail(ctx, FERRY_ENOMEM, "no result buffer");
    if (in->len)
        memcpy(out->data, tmp, in->len);
    ctx->ops->log(ctx, FERRY_LOG_INFO, "echoed %zu bytes", in->len);
    return 0;
}

/* Sleeps the number of milliseconds its argument spells, 10 at a time,
 * giving up when cancelled. */
static int sleep_(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    (void)out;
    char digits[32] = "";
    if (in->len >= sizeof digits)
        return ctx->ops->fail(ctx, FERRY_EINVAL, "expected milliseconds, got %zu bytes",
                              in->len);
    if (in->len)
        memcpy(digits, in->data, in->len);
    char *end;
    long ms = strtol(digits, &end, 10);
    if (end == digits || *end || ms < 0)
        return ctx->ops->fail(ctx, FERRY_EINVAL, "expected milliseconds, got '%s'",
                              digits);
    for (long slept = 0; slept < ms; slept += 10) {
        if (ctx->ops->cancelled(ctx))
            return ctx->ops->fail(ctx, FERRY_ECANCELED, "cancelled after %ld of %ld ms",
                                  slept, ms);
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* Says what the context told it: "rank R of W task T function F". */
static int info(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    (void)in;
    char text[256];
    int n = snprintf(text, sizeof text, "rank %d of %d task %s function %s", ctx->rank,
                     ctx->world_size, ctx->task, ctx->function);
    if (!ctx->ops->result(ctx, out, (size_t)n))
        return ctx->ops->fail(ctx, FERRY_ENOMEM, "no result buffer");
    memcpy(out->data, text, (size_t)n);
    return 0;
}

/* Sleeps as sleep does, then says where it ran: "rank R". */
static int nap(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    int rc = sleep_(ctx, in, out);
    if (rc)
        return rc;
    char text[32];
    int n = snprintf(text, sizeof text, "rank %d", ctx->rank);
    if (!ctx->ops->result(ctx, out, (size_t)n))
        return ctx->ops->fail(ctx, FERRY_ENOMEM, "no result buffer");
    memcpy(out->data, text, (size_t)n);
    return 0;
}

FERRY_TASK(.name = "faulty",
           .functions = FERRY_FUNCTIONS({"fail", fail}, {"segv", segv}, {"abort", abort_},
                                        {"echo", echo}, {"sleep", sleep_}, {"info", info},
                                        {"overflow", overflow}, {"nap", nap}));

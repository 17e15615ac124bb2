/* sleep — a call that takes as long as asked: for cancellation, deadlines
 * and concurrency.
 *
 *     ferry submit build/tasks/sleep.so [--json] -- [ms] [rounds]
 *
 * The function "sleep" takes the milliseconds as decimal text, sleeps in
 * 10 ms steps and checks for cancellation between them: a cancelled call
 * (caller gone, deadline passed, worker shutting down) fails with
 * FERRY_ECANCELED, "cancelled after N ms". Otherwise it returns
 * "slept N ms". The driver runs it on every worker at once (call_all),
 * `rounds` times over (ms defaults to 100, rounds to 1), and prints the
 * wall time; with --json:
 *
 *     {"task":"sleep","ms":100,"rounds":1,"workers":4,"seconds":0.104} */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ferry/task.h>

#define STEP_MS    10
#define DEFAULT_MS 100
#define MAX_MS     (24L * 3600 * 1000)
#define MAX_ROUNDS 100000
#define ARG_LEN    32

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* A whole number from 0 to max, all of `text`; -1 otherwise. */
static long parse_ms(const char *text, size_t len, long max)
{
    char buf[ARG_LEN];
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, text, len);
    buf[len] = '\0';
    if (strspn(buf, "0123456789") != len)
        return -1;
    errno = 0;
    long v = strtol(buf, NULL, 10);
    return errno || v > max ? -1 : v;
}

/* ---- worker side ---------------------------------------------------------- */

static int sleep_fn(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    long ms = in && in->data ? parse_ms(in->data, in->len, MAX_MS) : -1;
    if (ms < 0)
        return ctx->ops->fail(
            ctx, FERRY_EINVAL,
            "sleep: expected a whole number of milliseconds from 0 to %ld, "
            "got '%.*s'",
            MAX_MS, (int)(in && in->len < ARG_LEN ? in->len : 0),
            in && in->data ? (const char *)in->data : "");
    /* Steps end at deadlines on the monotonic clock, so the total does not
     * drift with the time spent checking. */
    double start = now_ms();
    for (;;) {
        double elapsed = now_ms() - start;
        if (elapsed >= (double)ms)
            break;
        if (ctx->ops->cancelled(ctx))
            return ctx->ops->fail(ctx, FERRY_ECANCELED, "cancelled after %ld ms",
                                  (long)elapsed);
        double left = (double)ms - elapsed;
        double step = left < STEP_MS ? left : STEP_MS;
        struct timespec ts = {0, (long)(step * 1e6)}; /* step < 1 s */
        nanosleep(&ts, NULL);
    }
    char text[64];
    int len = snprintf(text, sizeof text, "slept %ld ms", ms);
    char *r = ctx->ops->result(ctx, out, (size_t)len);
    if (!r)
        return ctx->ops->fail(ctx, FERRY_ENOMEM, "sleep: no memory for the reply");
    memcpy(r, text, (size_t)len);
    return 0;
}

/* ---- master side ---------------------------------------------------------- */

static int sleep_main(ferry_driver_t *drv)
{
    long ms = DEFAULT_MS, rounds = 1;
    int n = drv->world_size;
    /* argv[0] is the module; the user's arguments follow. */
    if (drv->argc > 3) {
        drv->ops->log(drv, FERRY_LOG_ERROR, "sleep: usage: -- [ms] [rounds]");
        return FERRY_EINVAL;
    }
    if (drv->argc > 1 &&
        (ms = parse_ms(drv->argv[1], strlen(drv->argv[1]), MAX_MS)) < 0) {
        drv->ops->log(drv, FERRY_LOG_ERROR,
                      "sleep: ms: expected a whole number from 0 to %ld, got '%s'",
                      MAX_MS, drv->argv[1]);
        return FERRY_EINVAL;
    }
    if (drv->argc > 2 &&
        (rounds = parse_ms(drv->argv[2], strlen(drv->argv[2]), MAX_ROUNDS)) < 1) {
        drv->ops->log(drv, FERRY_LOG_ERROR,
                      "sleep: rounds: expected a number from 1 to %d, got '%s'",
                      MAX_ROUNDS, drv->argv[2]);
        return FERRY_EINVAL;
    }
    if (n <= 0) {
        drv->ops->log(drv, FERRY_LOG_ERROR, "sleep: the cluster has no workers");
        return FERRY_EINVAL;
    }

    char arg[ARG_LEN];
    int len = snprintf(arg, sizeof arg, "%ld", ms);
    ferry_bytes_t *in = calloc((size_t)n, sizeof *in);
    ferry_bytes_t *out = calloc((size_t)n, sizeof *out);
    int rc = FERRY_ENOMEM;
    if (!in || !out) {
        drv->ops->log(drv, FERRY_LOG_ERROR, "sleep: out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++)
        in[i] = (ferry_bytes_t){arg, (size_t)len};
    double t0 = now_ms();
    for (long r = 0; r < rounds; r++) {
        rc = drv->ops->call_all(drv, "sleep", in, out);
        for (int i = 0; i < n; i++)
            if (out[i].data)
                drv->ops->free_bytes(drv, &out[i]);
        if (rc) {
            drv->ops->log(drv, FERRY_LOG_ERROR, "%s", drv->ops->error(drv));
            goto done;
        }
    }
    double seconds = (now_ms() - t0) / 1e3;
    if (drv->json)
        drv->ops->print(drv,
                        "{\"task\":\"sleep\",\"ms\":%ld,\"rounds\":%ld,\"workers\":%d,"
                        "\"seconds\":%.6f}",
                        ms, rounds, n, seconds);
    else
        drv->ops->print(drv,
                        "slept %ld ms on %d workers at once, %ld round%s: %.3f s elapsed",
                        ms, n, rounds, rounds == 1 ? "" : "s", seconds);
done:
    free(in);
    free(out);
    return rc;
}

FERRY_TASK(.name = "sleep", .functions = FERRY_FUNCTIONS({"sleep", sleep_fn}),
           .driver = sleep_main);

/* matmul — every call multiplies two n x n matrices it generates from a
 * seed and returns a checksum of the product; the driver checks each one.
 *
 *     ferry submit build/tasks/matmul.so [--json] -- [n] [calls]
 *
 * n defaults to 256, calls to 4 x the number of workers. Each call gets its
 * own seed and goes to whichever worker is free (call_any). The driver then
 * computes every product itself, with the same code, and compares: the
 * matrices hold small integers, so every float sum is exact and any
 * difference is a real fault, not rounding. It prints how many calls were
 * verified and the cluster's rate in GFLOP/s (2 n^3 per call over the wall
 * time of all calls), or with --json one object:
 *
 *     {"task":"matmul","n":256,"calls":16,"verified":16,"failed":0,
 *      "seconds":0.41,"gflops":1.3}
 *
 * and fails if any checksum differs. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ferry/task.h>

#define DEFAULT_N 256
/* 3 matrices of 4096^2 floats are 192 MiB: a worker's bound, not a goal. */
#define MAX_N     4096
#define MAX_CALLS 1000000
#define ARG_LEN   64
#define SUM_LEN   128

typedef struct checksum {
    int64_t sum;   /* of every element of C; exact (see fill) */
    uint64_t hash; /* FNV-1a over C's elements as little-endian int32 */
} checksum;

/* splitmix64: a tiny generator with a full-period state, the same
 * everywhere. */
static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Integers in [-4, 4]: a product of two is at most 16 in magnitude, so a
 * dot product of MAX_N terms stays below 2^17, well inside the 2^24 a float
 * holds exactly, in any order of summation. */
static void fill(float *m, size_t count, uint64_t *state)
{
    for (size_t i = 0; i < count; i++)
        m[i] = (float)((int)(next(state) % 9) - 4);
}

/* C = A B in i-k-j order: the inner loop walks B and C row-wise. Returns
 * false when cancelled (checked once a row). */
static bool multiply(ferry_ctx_t *ctx, const float *a, const float *b, float *c, size_t n)
{
    memset(c, 0, n * n * sizeof *c);
    for (size_t i = 0; i < n; i++) {
        if (ctx && ctx->ops->cancelled(ctx))
            return false;
        float *ci = c + i * n;
        for (size_t k = 0; k < n; k++) {
            const float aik = a[i * n + k];
            const float *bk = b + k * n;
            for (size_t j = 0; j < n; j++)
                ci[j] += aik * bk[j];
        }
    }
    return true;
}

static checksum summarise(const float *c, size_t count)
{
    checksum s = {0, 0xcbf29ce484222325ull};
    for (size_t i = 0; i < count; i++) {
        int32_t v = (int32_t)c[i];
        uint32_t u = (uint32_t)v;
        s.sum += v;
        for (int byte = 0; byte < 4; byte++) {
            s.hash ^= (u >> (8 * byte)) & 0xff;
            s.hash *= 0x100000001b3ull;
        }
    }
    return s;
}

/* The one computation both sides run. `abc` holds 3 n^2 floats. Returns
 * false when cancelled. */
static bool compute(ferry_ctx_t *ctx, size_t n, uint64_t seed, float *abc, checksum *out)
{
    float *a = abc, *b = abc + n * n, *c = abc + 2 * n * n;
    uint64_t state = seed;
    fill(a, n * n, &state);
    fill(b, n * n, &state);
    if (!multiply(ctx, a, b, c, n))
        return false;
    *out = summarise(c, n * n);
    return true;
}

/* "n seed", or "" for the defaults. */
static int parse_arg(const ferry_bytes_t *in, size_t *n, uint64_t *seed)
{
    char text[ARG_LEN];
    unsigned long long nn = DEFAULT_N, ss = 0;
    char extra;
    *n = DEFAULT_N;
    *seed = 0;
    if (!in || !in->data || in->len == 0)
        return 0;
    if (in->len >= sizeof text)
        return -1;
    memcpy(text, in->data, in->len);
    text[in->len] = '\0';
    int got = sscanf(text, "%llu %llu %c", &nn, &ss, &extra);
    if (got < 1 || got > 2 || nn < 1 || nn > MAX_N || text[0] == '-')
        return -1;
    *n = (size_t)nn;
    *seed = ss;
    return 0;
}

/* ---- worker side ---------------------------------------------------------- */

static int matmul(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    size_t n;
    uint64_t seed;
    checksum s;
    char text[SUM_LEN];
    if (parse_arg(in, &n, &seed) != 0)
        return ctx->ops->fail(ctx, FERRY_EINVAL,
                              "matmul: expected \"n seed\" with n from 1 to %d", MAX_N);
    float *abc = ctx->ops->scratch(ctx, 3 * n * n * sizeof(float));
    if (!abc)
        return ctx->ops->fail(ctx, FERRY_ENOMEM, "matmul: no memory for 3 x %zu^2 floats",
                              n);
    if (!compute(ctx, n, seed, abc, &s))
        return ctx->ops->fail(ctx, FERRY_ECANCELED, "matmul: cancelled");
    int len = snprintf(text, sizeof text, "%zu %" PRIu64 " %" PRId64 " %016" PRIx64, n,
                       seed, s.sum, s.hash);
    char *r = ctx->ops->result(ctx, out, (size_t)len);
    if (!r)
        return ctx->ops->fail(ctx, FERRY_ENOMEM, "matmul: no memory for the reply");
    memcpy(r, text, (size_t)len);
    return 0;
}

/* ---- master side ---------------------------------------------------------- */

static int parse_reply(const ferry_bytes_t *b, size_t n, uint64_t seed, checksum *s)
{
    char text[SUM_LEN];
    unsigned long long rn, rseed, hash;
    long long sum;
    if (!b->data || b->len == 0 || b->len >= sizeof text)
        return -1;
    memcpy(text, b->data, b->len);
    text[b->len] = '\0';
    if (sscanf(text, "%llu %llu %lld %llx", &rn, &rseed, &sum, &hash) != 4)
        return -1;
    if (rn != n || rseed != seed)
        return -1;
    s->sum = sum;
    s->hash = hash;
    return 0;
}

static int positive_arg(ferry_driver_t *drv, const char *what, const char *text, long max,
                        long *out)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (*text < '0' || *text > '9' || *end || v < 1 || v > max) {
        drv->ops->log(drv, FERRY_LOG_ERROR,
                      "matmul: %s: expected a number from 1 to %ld, got '%s'", what, max,
                      text);
        return FERRY_EINVAL;
    }
    *out = v;
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int matmul_main(ferry_driver_t *drv)
{
    long n = DEFAULT_N, calls = 4L * (drv->world_size > 0 ? drv->world_size : 1);
    /* argv[0] is the module; the user's arguments follow. */
    if (drv->argc > 3) {
        drv->ops->log(drv, FERRY_LOG_ERROR, "matmul: usage: -- [n] [calls]");
        return FERRY_EINVAL;
    }
    if (drv->argc > 1 && positive_arg(drv, "n", drv->argv[1], MAX_N, &n))
        return FERRY_EINVAL;
    if (drv->argc > 2 && positive_arg(drv, "calls", drv->argv[2], MAX_CALLS, &calls))
        return FERRY_EINVAL;

    size_t count = (size_t)calls;
    ferry_bytes_t *in = calloc(count, sizeof *in);
    ferry_bytes_t *out = calloc(count, sizeof *out);
    char(*args)[ARG_LEN] = calloc(count, sizeof *args);
    float *abc = malloc(3 * (size_t)n * (size_t)n * sizeof *abc);
    size_t verified = 0, failed = 0;
    int rc = FERRY_ENOMEM;
    if (!in || !out || !args || !abc) {
        drv->ops->log(drv, FERRY_LOG_ERROR, "matmul: out of memory");
        goto done;
    }
    /* A seed per call, so that a reply sent to the wrong call shows. */
    for (size_t i = 0; i < count; i++) {
        int len = snprintf(args[i], ARG_LEN, "%ld %zu", n, 1000 + i);
        in[i].data = args[i];
        in[i].len = (size_t)len;
    }
    double t0 = now_s();
    rc = drv->ops->call_any(drv, "matmul", count, in, out);
    double seconds = now_s() - t0;
    if (rc) {
        drv->ops->log(drv, FERRY_LOG_ERROR, "%s", drv->ops->error(drv));
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        checksum want, got;
        compute(NULL, (size_t)n, 1000 + i, abc, &want);
        if (parse_reply(&out[i], (size_t)n, 1000 + i, &got) == 0 && got.sum == want.sum &&
            got.hash == want.hash) {
            verified++;
            continue;
        }
        failed++;
        drv->ops->log(drv, FERRY_LOG_ERROR,
                      "matmul: call %zu (seed %zu): expected \"%ld %zu %" PRId64
                      " %016" PRIx64 "\", got \"%.*s\"",
                      i, 1000 + i, n, 1000 + i, want.sum, want.hash,
                      (int)(out[i].len < SUM_LEN ? out[i].len : SUM_LEN),
                      out[i].data ? (const char *)out[i].data : "");
    }
    double gflops = seconds > 0 ? 2.0 * (double)n * (double)n * (double)n *
                                      (double)count / seconds / 1e9
                                : 0;
    if (drv->json)
        drv->ops->print(drv,
                        "{\"task\":\"matmul\",\"n\":%ld,\"calls\":%zu,\"verified\":%zu,"
                        "\"failed\":%zu,\"workers\":%d,\"seconds\":%.6f,\"gflops\":%.3f}",
                        n, count, verified, failed, drv->world_size, seconds, gflops);
    else
        drv->ops->print(
            drv,
            "matmul n=%ld: %zu calls on %d workers, %zu verified, %zu failed, "
            "%.3f s, %.2f GFLOP/s",
            n, count, drv->world_size, verified, failed, seconds, gflops);
    rc = failed ? FERRY_ECORRUPT : 0;
done:
    for (size_t i = 0; out && i < count; i++)
        if (out[i].data)
            drv->ops->free_bytes(drv, &out[i]);
    free(in);
    free(out);
    free(args);
    free(abc);
    return rc;
}

FERRY_TASK(.name = "matmul", .functions = FERRY_FUNCTIONS({"matmul", matmul}),
           .driver = matmul_main);

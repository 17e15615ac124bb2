/* bench/allreduce — plans, and the lines of one buffer size. */
#include "allreduce_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

int ar_plan_parse(const char *s, ar_plan *p)
{
    memset(p, 0, sizeof *p);
    while (*s) {
        if (p->n == AR_MAX_SIZES)
            return -1;
        char *end;
        unsigned long long bytes = strtoull(s, &end, 10);
        if (end == s || *end != ':')
            return -1;
        long reps = strtol(end + 1, &end, 10);
        if (*end != ':')
            return -1;
        long iters = strtol(end + 1, &end, 10);
        if (*end != ',' && *end != '\0')
            return -1;
        if (bytes < 4 || bytes % 4 || reps < 1 || reps > AR_MAX_REPS || iters < 1 ||
            iters > 1000)
            return -1;
        p->step[p->n++] = (ar_step){(size_t)bytes, (int)reps, (int)iters};
        s = *end ? end + 1 : end;
    }
    return p->n > 0 ? 0 : -1;
}

void ar_plan_format(const ar_plan *p, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < p->n && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%zu:%d:%d", i ? "," : "",
                               p->step[i].bytes, p->step[i].reps, p->step[i].iters);
}

size_t ar_plan_max_bytes(const ar_plan *p)
{
    size_t m = 0;
    for (int i = 0; i < p->n; i++)
        if (p->step[i].bytes > m)
            m = p->step[i].bytes;
    return m;
}

double ar_bus_factor(int ranks)
{
    return 2.0 * (ranks - 1) / ranks;
}

double ar_report(const char *impl, int ranks, const ar_step *st, double *secs,
                 const char *extra)
{
    bench_summary t = bench_summarize(secs, (size_t)st->reps);
    double b = (double)st->bytes / 1e9, bus = ar_bus_factor(ranks);
    /* Bandwidth falls as time rises: min/max swap. */
    bench_summary alg = {b / t.median, b / t.max, b / t.min, t.reps};
    bench_summary busbw = {alg.median * bus, alg.min * bus, alg.max * bus, t.reps};
    bench_summary us = {t.median * 1e6, t.min * 1e6, t.max * 1e6, t.reps};
    char p[512];
    snprintf(p, sizeof p, "\"impl\":\"%s\",\"ranks\":%d,\"bytes\":%zu,\"iters\":%d%s%s",
             impl, ranks, st->bytes, st->iters, extra && *extra ? "," : "",
             extra ? extra : "");
    bench_emit("time_us", us.median, "us", &us, "%s", p);
    bench_emit("algbw", alg.median, "GB/s", &alg, "%s", p);
    bench_emit("busbw", busbw.median, "GB/s", &busbw, "%s", p);
    bench_log(
        "%-8s %d ranks %9zu B: %10.1f us (%.1f..%.1f)  algbw %6.3f  busbw %6.3f GB/s",
        impl, ranks, st->bytes, us.median, us.min, us.max, alg.median, busbw.median);
    return busbw.median;
}

float ar_fill_value(int rank, size_t i)
{
    return (float)(rank + 1 + (int)(i % 7));
}

double ar_expected(int world, size_t i, int k)
{
    double once = world * (world + 1) / 2.0 + (double)world * (double)(i % 7);
    return once * pow(world, k - 1);
}

size_t ar_check(const float *buf, size_t n, int world, int k)
{
    for (size_t i = 0; i < n; i += 4099)
        if ((double)buf[i] != ar_expected(world, i, k))
            return i;
    return n && (double)buf[n - 1] != ar_expected(world, n - 1, k) ? n - 1 : n;
}

static void run_check(const ar_runner *r, size_t n, int times)
{
    size_t i = ar_check(r->buf, n, r->world, times);
    if (i == n)
        return;
    char why[160];
    snprintf(why, sizeof why, "wrong sum: element %zu of %zu is %g, expected %g", i, n,
             (double)r->buf[i], ar_expected(r->world, i, times));
    if (r->abort)
        r->abort(r->arg, why);
    fprintf(stderr, "%s: rank %d: %s\n", r->impl, r->rank, why);
    exit(1);
}

static void run_fill(const ar_runner *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        r->buf[i] = ar_fill_value(r->rank, i);
}

void ar_run_plan(const ar_plan *plan, const ar_runner *r)
{
    for (int s = 0; s < plan->n; s++) {
        const ar_step *st = &plan->step[s];
        size_t n = st->bytes / sizeof(float);
        run_fill(r, n);
        for (int w = 0; w < AR_WARMUP; w++)
            r->allreduce(r->arg, n, "warm-up");
        run_check(r, n, AR_WARMUP);
        double secs[AR_MAX_REPS];
        for (int rep = 0; rep < st->reps; rep++) {
            run_fill(r, n);
            r->max(r->arg, 0);
            double t0 = (double)bench_now_ns() * 1e-9;
            for (int i = 0; i < st->iters; i++)
                r->allreduce(r->arg, n, "all-reduce");
            secs[rep] = r->max(r->arg, ((double)bench_now_ns() * 1e-9 - t0) / st->iters);
            run_check(r, n, st->iters);
        }
        if (r->times)
            r->times(r->arg, s, secs, st->reps);
        else if (r->rank == 0)
            ar_report(r->impl, r->world, st, secs, r->extra);
        fflush(stdout);
    }
}

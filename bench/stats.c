/* bench — medians, percentiles and JSON lines. */
#include "stats.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void bench_sort(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
}

double bench_percentile(const double *sorted, size_t n, double p)
{
    if (n == 0)
        return NAN;
    /* Nearest rank: the smallest value with at least p% of samples <= it. */
    double rank = ceil(p / 100.0 * (double)n);
    size_t i = rank < 1 ? 0 : (size_t)rank - 1;
    return sorted[i < n ? i : n - 1];
}

bench_summary bench_summarize(double *v, size_t n)
{
    bench_summary s = {NAN, NAN, NAN, (int)n};
    if (n == 0)
        return s;
    bench_sort(v, n);
    s.min = v[0];
    s.max = v[n - 1];
    s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return s;
}

/* JSON has no NaN or infinity: those print as null. */
static void put_number(double x)
{
    if (!isfinite(x))
        fputs("null", stdout);
    else if (fabs(x) >= 100)
        printf("%.1f", x);
    else
        printf("%.4g", x);
}

static const char *bench_name = "rpc";

void bench_set_name(const char *name)
{
    bench_name = name;
}

void bench_emit(const char *metric, double value, const char *unit,
                const bench_summary *s, const char *params_fmt, ...)
{
    printf("{\"bench\":\"%s\",\"metric\":\"%s\",\"value\":", bench_name, metric);
    put_number(value);
    printf(",\"unit\":\"%s\"", unit);
    if (params_fmt && *params_fmt) {
        va_list ap;
        va_start(ap, params_fmt);
        putchar(',');
        vprintf(params_fmt, ap);
        va_end(ap);
    }
    if (s) {
        fputs(",\"min\":", stdout);
        put_number(s->min);
        fputs(",\"max\":", stdout);
        put_number(s->max);
        printf(",\"reps\":%d", s->reps);
    }
    fputs("}\n", stdout);
    fflush(stdout);
}

void bench_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void bench_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bench/%s: ", bench_name);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stdout);
    exit(1);
}

bool bench_quick_option(int argc, char **argv, void (*usage)(FILE *))
{
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = true;
        } else if (strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            exit(0);
        } else {
            usage(stderr);
            exit(2);
        }
    }
    return quick;
}

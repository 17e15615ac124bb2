/* bench — timing, summaries of repeated measurements, and the JSON lines
 * every benchmark prints (DESIGN.md, "Benchmarks print JSON lines").
 *
 * Measurements go to stdout, one JSON object per line; human text goes to
 * stderr through bench_log(). */
#ifndef FERRY_BENCH_STATS_H
#define FERRY_BENCH_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Monotonic clock in nanoseconds. */
uint64_t bench_now_ns(void);

/* The median of several repetitions and their spread. */
typedef struct bench_summary {
    double median, min, max;
    int reps;
} bench_summary;

/* Sorts v[0..n) in place and summarises it. n == 0 gives NaNs. */
bench_summary bench_summarize(double *v, size_t n);

/* The p-th percentile (0..100) of sorted v[0..n), nearest rank. */
double bench_percentile(const double *sorted, size_t n, double p);

/* Sorts v[0..n) in place (ascending). */
void bench_sort(double *v, size_t n);

/* Names the benchmark in every line bench_emit() prints ("rpc" unless set). */
void bench_set_name(const char *name);

/* Prints one line {"bench":"rpc","metric":M,"value":V,"unit":U, <params>}
 * and, when `s` is not NULL, "min", "max" and "reps" from it. `params_fmt`
 * is a printf format for further JSON members without braces or leading
 * comma ("\"bytes\":%zu"), or NULL. Flushes stdout. */
void bench_emit(const char *metric, double value, const char *unit,
                const bench_summary *s, const char *params_fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* The options of a benchmark that takes only --quick and --help: returns
 * whether --quick was given; --help prints usage(stdout) and exits 0,
 * anything else usage(stderr) and exits 2. */
bool bench_quick_option(int argc, char **argv, void (*usage)(FILE *));

/* printf to stderr, with a newline. */
void bench_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints to stderr and exits 1. */
_Noreturn void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

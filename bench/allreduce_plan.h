/* bench/allreduce — what every implementation measures (the plan) and the
 * lines it prints for one buffer size. Shared by bench/allreduce's ferry
 * ranks and bench/mpi_allreduce, and mirrored by bench/allreduce_gloo.py,
 * so that all three print the same fields computed the same way.
 *
 * A plan travels on the command line as "BYTES:REPS:ITERS,...": for each
 * buffer size, REPS timed repetitions of ITERS back-to-back all-reduces
 * each, every repetition after a barrier. A repetition's time is the
 * slowest rank's, divided by ITERS. */
#ifndef FERRY_BENCH_ALLREDUCE_PLAN_H
#define FERRY_BENCH_ALLREDUCE_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#define AR_MAX_SIZES 8
#define AR_MAX_REPS  64
/* Untimed all-reduces of each size first: connections, pools, page faults. */
#define AR_WARMUP 2

typedef struct ar_step {
    size_t bytes; /* a multiple of 4 (float32) */
    int reps, iters;
} ar_step;

typedef struct ar_plan {
    ar_step step[AR_MAX_SIZES];
    int n;
} ar_plan;

/* Parses "BYTES:REPS:ITERS,..." into `p`. Returns 0, or -1 when malformed
 * or past the limits above. */
int ar_plan_parse(const char *s, ar_plan *p);
/* Writes `p` in the form ar_plan_parse() reads. */
void ar_plan_format(const ar_plan *p, char *buf, size_t len);
/* The largest buffer of the plan, in bytes. */
size_t ar_plan_max_bytes(const ar_plan *p);

/* Bus bandwidth over algorithm bandwidth for `ranks` ranks: 2(n-1)/n, what
 * a ring moves per rank per byte reduced (NCCL-tests' definition). */
double ar_bus_factor(int ranks);

/* Prints the lines of one buffer size: time_us, algbw and busbw (GB/s,
 * 1e9 bytes/s), each the median of secs[0..reps) with min/max. `extra` is
 * further JSON members ("\"chunk_bytes\":1048576") or NULL. Sorts secs.
 * Returns the median bus bandwidth in GB/s. */
double ar_report(const char *impl, int ranks, const ar_step *st, double *secs,
                 const char *extra);

/* The value pattern rank `rank` fills element i with, and what every rank
 * holds there after `k` all-reduces in place over `world` ranks. Small
 * integers times powers of the world: exact in float32 for 2 and 4 ranks. */
float ar_fill_value(int rank, size_t i);
double ar_expected(int world, size_t i, int k);
/* Checks a sample of buf[0..n) (every 4099th element, and the last) after
 * `k` all-reduces: a wrong sum or a chunk in the wrong place shows.
 * Returns the index of the first wrong element, or n when all are right. */
size_t ar_check(const float *buf, size_t n, int world, int k);

/* One rank running a plan: for each size it fills the buffer, runs
 * AR_WARMUP untimed all-reduces and checks them, then the repetitions,
 * each after a barrier and timed as `max` gives it; rank 0 prints the
 * lines, unless `times` takes them. A wrong sum ends the process. */
typedef struct ar_runner {
    const char *impl;  /* as ar_report() names it */
    const char *extra; /* ar_report()'s extra members, or NULL */
    int rank, world;
    float *buf; /* ar_plan_max_bytes() */
    void *arg;
    /* `what` says which, for errors: "warm-up" or "all-reduce". */
    void (*allreduce)(void *arg, size_t n, const char *what);
    /* A barrier; returns the largest of every rank's v (the slowest rank's
     * time), or v where `times` leaves that to someone else. */
    double (*max)(void *arg, double v);
    /* Says `why` (a wrong sum) and ends the process; NULL: says it on
     * stderr and exits with status 1. */
    void (*abort)(void *arg, const char *why);
    /* Takes step `step`'s repetition times instead of rank 0's lines. */
    void (*times)(void *arg, int step, const double *secs, int reps);
} ar_runner;

void ar_run_plan(const ar_plan *plan, const ar_runner *r);

#endif

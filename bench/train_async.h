/* bench/train --async — issue 13's straggler benchmark: `ferry submit
 * tasks/mlp.so` on 4 local workers in sync mode and in async mode (DOWNPOUR
 * unbounded, DOWNPOUR with staleness bound 2, EASGD), each with and without
 * a straggler: the last worker slowed from outside by a SIGSTOP/SIGCONT
 * duty cycle (train_async_duty.c). Time to 0.84 test accuracy and accuracy
 * after a fixed number of epochs. */
#ifndef FERRY_BENCH_TRAIN_ASYNC_H
#define FERRY_BENCH_TRAIN_ASYNC_H

#include <stdbool.h>

typedef struct bench_async_cfg {
    bool quick;
    int epochs;                 /* the same for every run */
    int period_ms;              /* the duty cycle: stopped 2/3, running 1/3 */
    const char *ferry, *mlp_so; /* build/ferry, build/tasks/mlp.so */
} bench_async_cfg;

/* Runs every configuration one after another, each on a fresh cluster under
 * a private FERRY_HOME, prints a line a run and the targets' lines. A run
 * that cannot be made prints its line with the reason. Returns the number of
 * targets missed. */
int bench_train_async(const bench_async_cfg *c);

#endif

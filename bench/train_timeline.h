/* bench/train --timeline — what recording a timeline (`ferry submit
 * --timeline`) costs a step: tasks/mlp trained in this process by two
 * trainers, one recording and one not, epoch about, against the target of
 * at most 3% slower. */
#ifndef FERRY_BENCH_TRAIN_TIMELINE_H
#define FERRY_BENCH_TRAIN_TIMELINE_H

#include <stdbool.h>

typedef struct bench_tl_cfg {
    bool quick;
    const char *mlp_so; /* build/tasks/mlp.so */
} bench_tl_cfg;

/* Prints the step times, their ratio and the target's line. Returns the
 * number of targets missed (0 or 1), or -1 when it could not run. */
int bench_train_timeline(const bench_tl_cfg *c);

/* The same target end to end (train_timeline_e2e.c): a 2-worker sync run's
 * step time with `--timeline` and the metrics endpoint on against both off,
 * through `ferry` (build/ferry) and the task module at `so`. Returns as
 * bench_train_timeline. */
int bench_train_observe(const char *ferry, const char *so, bool quick);

#endif

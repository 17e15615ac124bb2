/* bench/train --sync — synchronous data-parallel training of tasks/mlp:
 * `ferry submit --mode sync` on 1, 2 and 4 local workers against PyTorch
 * DistributedDataParallel (gloo) on 2 and 4 processes, one BLAS thread a
 * worker, the same model, global batch, optimizer, schedule and data. */
#ifndef FERRY_BENCH_TRAIN_SYNC_H
#define FERRY_BENCH_TRAIN_SYNC_H

#include <stdbool.h>

typedef struct bench_sync_cfg {
    bool quick;
    int epochs;
    const char *ferry, *mlp_so; /* build/ferry, build/tasks/mlp.so */
    const char *python, *ddp_script;
    bool ddp_on;
} bench_sync_cfg;

/* Runs every configuration one after another (never two at once), prints
 * their lines and the targets' ratio lines. A run that cannot be made
 * prints skip lines with its reason. Returns the number of targets missed. */
int bench_train_sync(const bench_sync_cfg *c);

#endif

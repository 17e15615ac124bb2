/* bench/train --sync — synchronous data-parallel training of tasks/mlp:
 * `ferry submit --mode sync` on each count of local workers asked for
 * (default 1, 2 and 4) against PyTorch DistributedDataParallel (gloo) on
 * as many processes, one BLAS thread a worker, the same model, global
 * batch, optimizer, schedule and data. */
#ifndef FERRY_BENCH_TRAIN_SYNC_H
#define FERRY_BENCH_TRAIN_SYNC_H

#include <stdbool.h>

#define BENCH_SYNC_MAX_COUNTS 8

typedef struct bench_sync_cfg {
    bool quick;
    int epochs;
    /* The worker counts, ascending, 1 to 64; --quick without a list of its
     * own runs DDP on 2 processes only. */
    int workers[BENCH_SYNC_MAX_COUNTS], n_workers;
    bool workers_given;
    const char *data_dir;       /* --data: NULL, the default folder */
    const char *ferry, *mlp_so; /* build/ferry, build/tasks/mlp.so */
    const char *python, *ddp_script;
    bool ddp_on;
} bench_sync_cfg;

/* Runs every configuration one after another (never two at once), prints
 * their lines and the targets' ratio lines. A run that cannot be made
 * prints skip lines with its reason. Returns the number of targets missed. */
int bench_train_sync(const bench_sync_cfg *c);

#endif

/* bench/faults — the checkpoint half (faults_ckpt.c). */
#ifndef FERRY_BENCH_FAULTS_CKPT_H
#define FERRY_BENCH_FAULTS_CKPT_H

#include <stdbool.h>

/* The cost of tasks/mlp's checkpoints (the module at mlp_so), written
 * under `home`/ckpt-bench, as JSON lines. Returns 0 (the target met), 1
 * (missed) or -1 (could not measure). */
int bench_ckpt(const char *mlp_so, const char *home, bool quick);

#endif

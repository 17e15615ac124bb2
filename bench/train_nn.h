/* bench/train — the layer-list models of tasks/ (<ferry/nn.h>) against the
 * hand-written ones they replaced (bench/mlp_hand.c, bench/cnn_hand.c). */
#ifndef FERRY_BENCH_TRAIN_NN_H
#define FERRY_BENCH_TRAIN_NN_H

#include <stdbool.h>

#include "stats.h"

typedef struct bench_nn_cfg {
    bool quick, cnn_on;
    int cnn_threads; /* BLAS threads of the CNN's runs */
    const char *mlp_so, *mlp_hand_so, *cnn_so, *cnn_hand_so;
} bench_nn_cfg;

/* Trains each pair one epoch at a time, alternating which goes first, on
 * the cpu with ferry's trainer in this process, and prints both samples/s
 * and the median of the rounds' ratios against its target. Returns how
 * many targets were missed. */
int bench_train_nn(const bench_nn_cfg *c);

/* loss_grad alone, `reps` pairs of calls on a batch of `batch`, alternated
 * (train_nn_step.c): the median of the pairs' speed ratios (the list's
 * over the hand-written model's; > 1: the list is faster) and each side's
 * median time. 0, or -1 with the reason printed. */
int bench_nn_steps(const char *nn_so, const char *hand_so, int batch, int reps,
                   bench_summary *ratio, double *nn_ms, double *hand_ms);

#endif

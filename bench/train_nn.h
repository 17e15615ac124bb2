/* bench/train — the layer-list models of tasks/ (<ferry/nn.h>) against the
 * hand-written ones they replaced (bench/mlp_hand.c, bench/cnn_hand.c). */
#ifndef FERRY_BENCH_TRAIN_NN_H
#define FERRY_BENCH_TRAIN_NN_H

#include <stdbool.h>

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

#endif

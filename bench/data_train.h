/* bench/data — the training run from an .npz against the same run from
 * IDX (data_train.c). */
#ifndef FERRY_BENCH_DATA_TRAIN_H
#define FERRY_BENCH_DATA_TRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Trains tasks/mlp.so (mlp_so) on Fashion-MNIST read from its IDX files
 * and from an .npz of the same arrays written into `dir`, one epoch each,
 * alternating which goes first, and prints both samples/s and the median
 * of the rounds' ratios against the target. Returns how many targets were
 * missed (0 when skipped: no Fashion-MNIST). */
int bench_data_train(const char *dir, const char *mlp_so, bool quick);

/* An .npy (version 1) of `descr` ("<f4") with a shape of one to three
 * dimensions and len bytes of data, malloc'ed; *out_len its size. */
uint8_t *bench_npy(const char *descr, const uint64_t *dims, int ndims, const void *data,
                   size_t len, size_t *out_len);

#endif

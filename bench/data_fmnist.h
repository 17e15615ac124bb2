/* bench — Fashion-MNIST's training and test sets, loaded once for the
 * benches that train on them in process. */
#ifndef FERRY_BENCH_DATA_FMNIST_H
#define FERRY_BENCH_DATA_FMNIST_H

#include <stddef.h>

#include "runtime/data/data.h"

/* Loads the training set into full[0] and the test set into full[1]
 * (rt_fmnist_load's default files), and views of their first n_train and
 * n_test samples (0 or more than the set: all of it) into view, borrowing
 * full's memory. Returns 0, or an error logged as "who: why" with nothing
 * left to free; else free full[] with rt_dataset_free(). */
int bench_fmnist_pair(const char *who, rt_dataset full[2], rt_dataset view[2],
                      size_t n_train, size_t n_test);

#endif

/* tests/train — shared fixture: a bundled model module, the cpu device,
 * and small synthetic data sets. */
#ifndef FERRY_TESTS_TRAIN_H
#define FERRY_TESTS_TRAIN_H

#include "runtime/device/device.h"
#include "runtime/runtime.h"
#include "runtime/train/train.h"

typedef struct ttrain {
    rt_module mod;
    ferry_device_t *dev;
} ttrain;

/* Opens build/tasks/<name>.so and the cpu device; fails the test if either
 * cannot be had. */
void ttrain_open(ttrain *t, const char *name);
void ttrain_close(ttrain *t);

/* n random samples of the given shape with labels in [0, classes), drawn
 * from `seed`: something a classifier can be trained on in tests. */
void ttrain_random_set(rt_dataset *ds, size_t n, int c, int h, int w, int classes,
                       uint64_t seed);
void ttrain_free_set(rt_dataset *ds);

/* Features a linear set may have for ttrain_least_squares. */
#define TTRAIN_MAXD 16
/* An async session's secret (RT_PS_SECRET_BYTES), the same on every rank. */
#define TTRAIN_SECRET ((const uint8_t *)"async secret of 32 bytes, no NUL")
/* The least-squares fit of a linear set's targets, from the normal
 * equations in double: beta[0..features) the weights, beta[features] the
 * bias. */
void ttrain_least_squares(const rt_dataset *ds, double *beta);

#endif

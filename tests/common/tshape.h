/* tests/common — Fashion-MNIST's shape given to a model that takes its
 * shape from the data (the bundled mlp), as a run on the default set gives
 * it, for the tests and benchmarks that drive a model without a run.
 * Header-only, on the public model ABI alone: bench/ includes it too, and
 * builds without the tests. */
#ifndef FERRY_TESTS_TSHAPE_H
#define FERRY_TESTS_TSHAPE_H

#include <stddef.h>

#include <ferry/model.h>

/* 0 for a model of a fixed shape, or what its reshape to 1x28x28 samples
 * of 10 classes returns. */
static inline int tcom_fmnist_shape(const ferry_model_t *m)
{
    static const int fmnist[3] = {1, 28, 28};
    if (m->size < offsetof(ferry_model_t, reshape) + sizeof m->reshape || !m->reshape)
        return 0;
    return m->reshape(fmnist, 10);
}

#endif

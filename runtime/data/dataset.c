/* runtime/data — a data set by name. */
#include "data_int.h"

#include <string.h>

#include "ferry/error.h"

/* The synthetic set's sizes: big enough for a meaningful fit, small enough
 * that making it costs nothing. */
#define LINEAR_TRAIN_N 8192
#define LINEAR_TEST_N  2048
#define LINEAR_NOISE   0.1f

int rt_dataset_load(const char *name, const char *dir, bool train, int features,
                    uint64_t seed, rt_dataset *out, char *err, size_t errlen)
{
    return rt_dataset_load_polled(name, dir, train, features, seed, NULL, out, err,
                                  errlen);
}

int rt_dataset_load_polled(const char *name, const char *dir, bool train, int features,
                           uint64_t seed, const rt_data_cancel *cancel, rt_dataset *out,
                           char *err, size_t errlen)
{
    if (!out)
        return base_errf(err, errlen, FERRY_EINVAL, "rt_dataset_load: no output");
    if (!name || strcmp(name, "fashion-mnist") == 0)
        return rt_fmnist_load_polled(dir, train, cancel, out, err, errlen);
    if (strcmp(name, "linear") == 0) {
        int rc = rt_linear_make(train ? LINEAR_TRAIN_N : LINEAR_TEST_N, features,
                                LINEAR_NOISE, seed, train ? 0 : 1, out);
        if (rc != 0)
            return base_errf(err, errlen, rc, "linear data set with %d features: %s",
                             features, ferry_strerror(rc));
        return 0;
    }
    return base_errf(err, errlen, FERRY_EINVAL,
                     "unknown data set \"%s\" (fashion-mnist or linear)", name);
}

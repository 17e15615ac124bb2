/* runtime/data — a data set by name. */
#include "data_int.h"

#include <string.h>
#include <sys/stat.h>

#include "ferry/error.h"

/* The synthetic set's sizes: big enough for a meaningful fit, small enough
 * that making it costs nothing. */
#define LINEAR_TRAIN_N 8192
#define LINEAR_TEST_N  2048
#define LINEAR_NOISE   0.1f

bool rt_data_is_file(const char *path)
{
    if (!path || !path[0])
        return false;
    struct stat st;
    if (stat(path, &st) == 0)
        return !S_ISDIR(st.st_mode);
    /* Missing: "x.npy" was meant as a file, and its reader's error (the
     * path and why) says more than Fashion-MNIST's missing directory. */
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    return strchr(base, '.') != NULL && base[0] != '.';
}

/* A user's file named where Fashion-MNIST's directory would be: both sets
 * are read (the test set is a split of it) and the one asked for kept. */
static int load_file(const char *path, bool train, uint64_t seed,
                     const rt_data_cancel *cancel, rt_dataset *out, char *err, size_t errlen)
{
    rt_data_source s = {.path = path, .seed = seed};
    rt_dataset sets[2];
    int rc = rt_data_source_load(&s, cancel, &sets[0], &sets[1], err, errlen);
    if (rc != 0)
        return rc;
    *out = sets[train ? 0 : 1];
    rt_dataset_free(&sets[train ? 1 : 0]);
    return 0;
}

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
    if (rt_data_is_file(dir))
        return load_file(dir, train, seed, cancel, out, err, errlen);
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

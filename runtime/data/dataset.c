/* runtime/data — a data set by name, freeing one, and the small helpers the
 * folder's files share. */
#include "data_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ferry/error.h"

/* The synthetic set's sizes: big enough for a meaningful fit, small enough
 * that making it costs nothing. */
#define LINEAR_TRAIN_N 8192
#define LINEAR_TEST_N  2048
#define LINEAR_NOISE   0.1f

#define HUGE_PAGE ((size_t)2 << 20)

int rt_data_fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

void *rt_data_alloc(size_t n)
{
    if (n >= HUGE_PAGE) {
        /* A whole data set: the loader reads its rows in random order, one
         * or two 4 KiB pages a row, and TLB misses then cost as much as the
         * copying (a 128-row gather took half the time on 2 MiB pages). */
        size_t rounded = (n + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
        if (rounded < n)
            return NULL;
        void *p = aligned_alloc(HUGE_PAGE, rounded);
        if (p)
            madvise(p, rounded, MADV_HUGEPAGE); /* a hint: failure is harmless */
        return p;
    }
    size_t rounded = (n + 63) & ~(size_t)63;
    return aligned_alloc(64, rounded ? rounded : 64);
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
        return rt_data_fail(err, errlen, FERRY_EINVAL, "rt_dataset_load: no output");
    if (!name || strcmp(name, "fashion-mnist") == 0)
        return rt_fmnist_load_polled(dir, train, cancel, out, err, errlen);
    if (strcmp(name, "linear") == 0) {
        int rc = rt_linear_make(train ? LINEAR_TRAIN_N : LINEAR_TEST_N, features,
                                LINEAR_NOISE, seed, train ? 0 : 1, out);
        if (rc != 0)
            return rt_data_fail(err, errlen, rc, "linear data set with %d features: %s",
                                features, ferry_strerror(rc));
        return 0;
    }
    return rt_data_fail(err, errlen, FERRY_EINVAL,
                        "unknown data set \"%s\" (fashion-mnist or linear)", name);
}

void rt_dataset_free(rt_dataset *ds)
{
    if (!ds)
        return;
    free(ds->x);
    free(ds->labels);
    free(ds->targets);
    free(ds->answer);
    memset(ds, 0, sizeof *ds);
}

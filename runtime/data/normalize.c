/* runtime/data — normalisation of a user's set, from its training samples
 * alone: standard (zero mean, unit variance) or minmax (onto [0, 1]), per
 * channel for images (every pixel of a channel alike, as Fashion-MNIST's
 * constants are), per feature otherwise. A feature that never varies is
 * shifted only. Every worker reads the whole file and computes the same
 * numbers in the same order: the statistics agree bit for bit. */
#include "data_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/error.h"

/* Per-group statistics in double; groups are channels or features. Two
 * passes for the variance: the mean first, as numpy computes it. False
 * when out of memory. */
static bool stats(const rt_dataset *ds, int groups, bool minmax, double *a, double *b)
{
    size_t f = (size_t)ds->features, per = f / (size_t)groups;
    for (int g = 0; g < groups; g++) {
        a[g] = minmax ? INFINITY : 0;
        b[g] = minmax ? -INFINITY : 0;
    }
    float *row = malloc(f * sizeof *row);
    if (!row)
        return false;
    for (size_t i = 0; i < ds->n; i++)
        for (size_t j = 0; j < f; j++) {
            if (j == 0)
                rt_dataset_row(ds, i, row);
            double v = row[j];
            size_t g = j / per;
            if (minmax) {
                a[g] = v < a[g] ? v : a[g];
                b[g] = v > b[g] ? v : b[g];
            } else {
                a[g] += v;
            }
        }
    if (minmax) {
        free(row);
        return true;
    }
    double count = (double)ds->n * (double)per;
    for (int g = 0; g < groups; g++)
        a[g] /= count;
    for (size_t i = 0; i < ds->n; i++) {
        rt_dataset_row(ds, i, row);
        for (size_t j = 0; j < f; j++) {
            double d = row[j] - a[j / per];
            b[j / per] += d * d;
        }
    }
    for (int g = 0; g < groups; g++)
        b[g] = sqrt(b[g] / count);
    free(row);
    return true;
}

/* In place, or for a set read from its file, kept for the loader. */
static bool apply(rt_dataset *ds, const float *shift, const float *scale, int groups,
                  bool own)
{
    if (!ds)
        return true;
    if (!ds->x) {
        if (own)
            return true;
        ds->norm_shift = malloc((size_t)groups * sizeof(float));
        ds->norm_scale = malloc((size_t)groups * sizeof(float));
        if (!ds->norm_shift || !ds->norm_scale)
            return false;
        memcpy(ds->norm_shift, shift, (size_t)groups * sizeof(float));
        memcpy(ds->norm_scale, scale, (size_t)groups * sizeof(float));
        ds->norm_n = groups;
        return true;
    }
    size_t f = (size_t)ds->features, per = f / (size_t)groups;
    for (size_t i = 0; i < ds->n; i++)
        for (size_t j = 0; j < f; j++) {
            float *v = &ds->x[i * f + j];
            *v = (*v - shift[j / per]) * scale[j / per];
        }
    return true;
}

int rt_normalize(rt_dataset *train, rt_dataset *test, const char *how, char *err,
                 size_t errlen)
{
    if (!how || !how[0])
        how = "standard";
    bool minmax = strcmp(how, "minmax") == 0;
    if (strcmp(how, "none") == 0)
        return 0;
    if (!minmax && strcmp(how, "standard") != 0)
        return base_errf(err, errlen, FERRY_EINVAL,
                         "--normalize %s: standard, minmax or none", how);
    bool image = train->h > 1;
    int groups = image ? train->c : train->features;
    double *a = malloc((size_t)groups * sizeof *a), *b = malloc((size_t)groups * sizeof *b);
    train->norm_shift = malloc((size_t)groups * sizeof(float));
    train->norm_scale = malloc((size_t)groups * sizeof(float));
    if (!a || !b || !train->norm_shift || !train->norm_scale) {
        free(a);
        free(b);
        return base_errf(err, errlen, FERRY_ENOMEM, "no memory to normalise");
    }
    /* Set once the statistics are known: until then rows are read raw. */
    bool ok = stats(train, groups, minmax, a, b);
    train->norm_n = groups;
    for (int g = 0; g < groups; g++) {
        double spread = minmax ? b[g] - a[g] : b[g];
        train->norm_shift[g] = (float)a[g];
        train->norm_scale[g] = spread > 1e-12 ? (float)(1.0 / spread) : 1.0f;
    }
    free(a);
    free(b);
    ok = ok && apply(train, train->norm_shift, train->norm_scale, groups, true) &&
         apply(test, train->norm_shift, train->norm_scale, groups, false);
    return ok ? 0 : base_errf(err, errlen, FERRY_ENOMEM, "no memory to normalise");
}

int rt_normalize_as(rt_dataset *ds, const float *shift, const float *scale, int n,
                    char *err, size_t errlen)
{
    if (n == 0)
        return 0;
    if (n < 0 || ds->features % n != 0)
        return base_errf(err, errlen, FERRY_EINVAL,
                         "the run normalised %d groups of numbers, which %d numbers a "
                         "sample do not divide into",
                         n, ds->features);
    return apply(ds, shift, scale, n, false)
               ? 0
               : base_errf(err, errlen, FERRY_ENOMEM, "no memory to normalise");
}

const char *rt_data_norm_kind(const char *how, bool user_file)
{
    if (!user_file)
        return NULL;
    if (how && (strcmp(how, "minmax") == 0 || strcmp(how, "none") == 0))
        return strcmp(how, "none") == 0 ? "none" : "minmax";
    return "standard";
}

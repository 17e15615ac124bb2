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

/* Per-group statistics in double; groups are channels or features. */
static void stats(const rt_dataset *ds, int groups, bool minmax, double *a, double *b)
{
    size_t f = (size_t)ds->features, per = f / (size_t)groups;
    for (int g = 0; g < groups; g++) {
        a[g] = minmax ? INFINITY : 0;
        b[g] = minmax ? -INFINITY : 0;
    }
    for (size_t i = 0; i < ds->n; i++)
        for (size_t j = 0; j < f; j++) {
            double v = ds->x[i * f + j];
            size_t g = j / per;
            if (minmax) {
                a[g] = v < a[g] ? v : a[g];
                b[g] = v > b[g] ? v : b[g];
            } else {
                a[g] += v;
            }
        }
    if (minmax)
        return;
    double count = (double)ds->n * (double)per;
    for (int g = 0; g < groups; g++)
        a[g] /= count;
    for (size_t i = 0; i < ds->n; i++)
        for (size_t j = 0; j < f; j++) {
            double d = ds->x[i * f + j] - a[j / per];
            b[j / per] += d * d;
        }
    for (int g = 0; g < groups; g++)
        b[g] = sqrt(b[g] / count);
}

static void apply(rt_dataset *ds, const float *shift, const float *scale, int groups)
{
    if (!ds)
        return;
    size_t f = (size_t)ds->features, per = f / (size_t)groups;
    for (size_t i = 0; i < ds->n; i++)
        for (size_t j = 0; j < f; j++) {
            float *v = &ds->x[i * f + j];
            *v = (*v - shift[j / per]) * scale[j / per];
        }
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
    train->norm_n = groups;
    stats(train, groups, minmax, a, b);
    for (int g = 0; g < groups; g++) {
        double spread = minmax ? b[g] - a[g] : b[g];
        train->norm_shift[g] = (float)a[g];
        train->norm_scale[g] = spread > 1e-12 ? (float)(1.0 / spread) : 1.0f;
    }
    free(a);
    free(b);
    apply(train, train->norm_shift, train->norm_scale, groups);
    apply(test, train->norm_shift, train->norm_scale, groups);
    return 0;
}

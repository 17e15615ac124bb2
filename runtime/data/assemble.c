/* runtime/data — a user's file made a data set: the sample shape from the
 * array's dimensions after the first, samples converted to float and
 * checked finite, labels checked (integers from 0, or names mapped to
 * classes) or taken as float targets. */
#include "data_int.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/error.h"

/* Dimensions after the first: 1 a vector (1 x 1 x d), 2 an image
 * (1 x h x w), 3 channels first, more folded into the channels. */
static int shape_of(const rt_raw *r, rt_dataset *ds, char *err, size_t errlen)
{
    if (r->is_csv) {
        ds->c = ds->h = 1;
        ds->w = ds->features = r->csv.features;
        return 0;
    }
    const rt_array *x = &r->x;
    if (x->ndims < 1)
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: x is a single number, not an array of samples", r->path);
    uint64_t feats = 1;
    for (int i = 1; i < x->ndims; i++) {
        feats *= x->dims[i];
        if (feats > INT_MAX)
            return base_errf(err, errlen, FERRY_EINVAL,
                             "%s: samples of more than %d numbers", r->path, INT_MAX);
    }
    int k = x->ndims - 1;
    uint64_t w = k >= 1 ? x->dims[k] : 1, h = k >= 2 ? x->dims[k - 1] : 1;
    if (feats == 0)
        return base_errf(err, errlen, FERRY_ECORRUPT, "%s: samples of no numbers",
                         r->path);
    ds->h = (int)h;
    ds->w = (int)w;
    ds->c = (int)(feats / (h * w));
    ds->features = (int)feats;
    return 0;
}

static size_t row_of(const uint32_t *rows, size_t i)
{
    return rows ? rows[i] : i;
}

/* An .npy stays in its file: the set maps it again (a mapping of its own,
 * freed with the set) and keeps which rows are its samples; the samples
 * are checked finite once the reader's shards are known
 * (rt_dataset_check_finite), and read again by the loader. */
static int map_x(const rt_raw *r, const uint32_t *rows, rt_dataset *ds, char *err,
                 size_t errlen)
{
    ds->mapped = calloc(1, sizeof *ds->mapped);
    if (rows && ds->n && (ds->mapped_rows = malloc(ds->n * sizeof *rows)))
        memcpy(ds->mapped_rows, rows, ds->n * sizeof *rows);
    return !ds->mapped || (rows && ds->n && !ds->mapped_rows)
               ? base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory", r->path)
           : r->x_key ? rt_npz_read(r->path, NULL, 0, r->x_key, RT_NPZ_MEMBER_CAP, ds->mapped,
                                    err, errlen)
                      : rt_npy_read(r->path, ds->mapped, err, errlen);
}

int rt_dataset_check_finite(const rt_dataset *ds, size_t lo, size_t n, const char *path,
                            char *err, size_t errlen)
{
    if (!ds->mapped)
        return 0;
    size_t f = (size_t)ds->features, bad = 0, first = 0;
    float *row = malloc(f * sizeof *row);
    if (!row)
        return base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory", path);
    for (size_t i = lo; i < lo + n && i < ds->n; i++) {
        rt_dataset_row(ds, i, row);
        for (size_t j = 0; j < f; j++)
            if (!isfinite(row[j]) && bad++ == 0)
                first = row_of(ds->mapped_rows, i) * f + j;
    }
    free(row);
    if (bad)
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: %zu NaN or infinite values, the first at sample %zu, number %zu",
                         path, bad, first / f, first % f);
    return 0;
}

static int fill_x(const rt_raw *r, const uint32_t *rows, rt_dataset *ds, char *err,
                  size_t errlen)
{
    if (!r->is_csv && r->x.map)
        return map_x(r, rows, ds, err, errlen);
    size_t f = (size_t)ds->features, bad = 0, first = 0;
    if (!(ds->x = rt_data_alloc(ds->n * f * sizeof(float))))
        return base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory for %zu samples",
                         r->path, ds->n);
    for (size_t i = 0; i < ds->n; i++) {
        float *out = ds->x + i * f;
        size_t src = row_of(rows, i);
        if (r->is_csv)
            memcpy(out, r->csv.x + src * f, f * sizeof(float));
        else
            rt_array_floats(&r->x, src * f, f, out);
        for (size_t j = 0; j < f; j++)
            if (!isfinite(out[j]) && bad++ == 0)
                first = src * f + j;
    }
    if (bad)
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: %zu NaN or infinite values, the first at sample %zu, "
                         "number %zu",
                         r->path, bad, first / f, first % f);
    return 0;
}

static double label_at(const rt_raw *r, size_t i)
{
    return r->is_csv ? r->csv.y[i] : rt_array_get(&r->y, i);
}

/* Whether the labels are classes (integers, names) or targets (floats). */
static bool classes_in(const rt_raw *r, const uint32_t *rows, size_t n)
{
    if (!r->is_csv)
        return !rt_dtype_is_float(r->y.type) && r->y.ndims == 1;
    if (r->csv.n_classes)
        return true;
    for (size_t i = 0; i < n; i++) {
        double v = r->csv.y[row_of(rows, i)];
        if (v != floor(v))
            return false;
    }
    return true;
}

/* A test set's names, mapped to the training set's classes. */
static int map_names(const rt_raw *r, const rt_dataset *train, int32_t *map, char *err,
                     size_t errlen)
{
    for (int i = 0; i < r->csv.n_classes; i++) {
        map[i] = -1;
        for (int j = 0; j < train->n_class_names; j++)
            if (strcmp(r->csv.classes[i], train->class_names[j]) == 0)
                map[i] = j;
        if (map[i] < 0)
            return base_errf(err, errlen, FERRY_EINVAL,
                             "%s: label \"%s\" is not a class of the training set",
                             r->path, r->csv.classes[i]);
    }
    return 0;
}

static int copy_names(const rt_raw *r, rt_dataset *ds)
{
    int n = r->csv.n_classes;
    if (!(ds->class_names = calloc((size_t)n, sizeof *ds->class_names)))
        return FERRY_ENOMEM;
    ds->n_class_names = n;
    for (int i = 0; i < n; i++)
        if (!(ds->class_names[i] = strdup(r->csv.classes[i])))
            return FERRY_ENOMEM;
    return 0;
}

static int fill_labels(const rt_raw *r, const uint32_t *rows, const rt_dataset *train,
                       rt_dataset *ds, char *err, size_t errlen)
{
    int32_t *map = NULL;
    int rc = 0;
    if (r->is_csv && r->csv.n_classes && train) {
        if (!(map = malloc((size_t)r->csv.n_classes * sizeof *map)))
            return FERRY_ENOMEM;
        if ((rc = map_names(r, train, map, err, errlen)) != 0)
            goto out;
    } else if (r->is_csv && r->csv.n_classes && (rc = copy_names(r, ds)) != 0) {
        goto out;
    }
    if (!(ds->labels = rt_data_alloc(ds->n * sizeof(int32_t)))) {
        rc = FERRY_ENOMEM;
        goto out;
    }
    int32_t top = -1;
    for (size_t i = 0; i < ds->n; i++) {
        size_t src = row_of(rows, i);
        double v = label_at(r, src);
        if (v < 0 || v > INT32_MAX - 1 || v != floor(v)) {
            rc = base_errf(err, errlen, FERRY_EINVAL,
                           "%s: label %g of sample %zu is not a class (an integer from 0)",
                           r->path, v, src);
            goto out;
        }
        int32_t l = map ? map[(int)v] : (int32_t)v;
        ds->labels[i] = l;
        top = l > top ? l : top;
    }
    ds->classes = train && train->n_class_names ? train->n_class_names
                  : ds->n_class_names           ? ds->n_class_names
                                                : top + 1;
out:
    free(map);
    return rc == FERRY_ENOMEM ? base_errf(err, errlen, rc, "%s: no memory", r->path) : rc;
}

static int fill_targets(const rt_raw *r, const uint32_t *rows, rt_dataset *ds, char *err,
                        size_t errlen)
{
    size_t out = !r->is_csv && r->y.ndims == 2 ? (size_t)r->y.dims[1] : 1;
    if ((!r->is_csv && r->y.ndims > 2) || out == 0 || out > INT_MAX)
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: y of %d dimensions: labels or targets are 1 or 2", r->path,
                         r->y.ndims);
    ds->outputs = (int)out;
    if (!(ds->targets = rt_data_alloc(ds->n * out * sizeof(float))))
        return base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory", r->path);
    for (size_t i = 0; i < ds->n; i++)
        for (size_t k = 0; k < out; k++) {
            double v = label_at(r, row_of(rows, i) * out + k);
            if (!isfinite(v))
                return base_errf(err, errlen, FERRY_ECORRUPT,
                                 "%s: target %zu of sample %zu is %g", r->path, k,
                                 row_of(rows, i), v);
            ds->targets[i * out + k] = (float)v;
        }
    return 0;
}

int rt_raw_to_set(const rt_raw *r, const uint32_t *rows, size_t n,
                  const rt_dataset *classes_of, rt_dataset *ds, char *err, size_t errlen)
{
    memset(ds, 0, sizeof *ds);
    size_t have = rt_raw_count(r);
    if (!r->is_csv) {
        size_t labels = r->y.ndims ? (size_t)r->y.dims[0] : 1;
        if (labels != have)
            return base_errf(err, errlen, FERRY_EINVAL,
                             "%s: %zu samples but %zu labels (x and y differ in length)",
                             r->path, have, labels);
    }
    if (have == 0)
        return base_errf(err, errlen, FERRY_ECORRUPT, "%s: no samples", r->path);
    ds->n = n;
    int rc = shape_of(r, ds, err, errlen);
    if (rc == 0)
        rc = fill_x(r, rows, ds, err, errlen);
    if (rc == 0)
        rc = classes_in(r, rows, n) ? fill_labels(r, rows, classes_of, ds, err, errlen)
                                    : fill_targets(r, rows, ds, err, errlen);
    if (rc != 0)
        rt_dataset_free(ds);
    return rc;
}

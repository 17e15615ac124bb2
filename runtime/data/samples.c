/* runtime/data — the samples of a prediction: every sample of one file,
 * with or without labels, made to match how the run that trained the
 * model saw its data (its sample shape, its class names, its
 * normalisation), never normalised by statistics of its own. */
#include "data_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ferry/error.h"

static bool starts(const char *path, const char *magic, size_t n)
{
    int fd;
    char err[8];
    if (rt_data_open_file(path, &fd, err, sizeof err) != 0)
        return false;
    char b[8] = {0};
    ssize_t got = read(fd, b, n);
    close(fd);
    return got == (ssize_t)n && memcmp(b, magic, n) == 0;
}

/* A CSV's label column taken back as the feature it is, for a file of
 * exactly the model's columns: the parser always picks a label column. */
static int csv_unlabel(rt_csv *c, const char *path, char *err, size_t errlen)
{
    if (c->n_classes)
        return base_errf(err, errlen, FERRY_EINVAL,
                         "%s: column %d (%s) holds text: the model takes %d numbers a "
                         "sample",
                         path, c->label_col + 1, c->names[c->label_col], c->cols);
    size_t f = (size_t)c->cols, rows = c->rows, lc = (size_t)c->label_col;
    float *x = malloc((rows ? rows : 1) * f * sizeof *x);
    if (!x)
        return base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory", path);
    for (size_t i = 0; i < rows; i++) {
        const float *in = c->x + i * (f - 1);
        float *out = x + i * f;
        memcpy(out, in, lc * sizeof *out);
        out[lc] = (float)c->y[i];
        memcpy(out + lc + 1, in + lc, (f - 1 - lc) * sizeof *out);
        c->y[i] = 0;
    }
    free(c->x);
    c->x = x;
    c->features = c->cols;
    return 0;
}

/* Zeros standing in for the labels of a file that has none. */
static int no_labels(rt_raw *r, char *err, size_t errlen)
{
    size_t n = rt_raw_count(r);
    uint8_t *zeros = calloc(n ? n : 1, 1);
    if (!zeros)
        return base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory", r->path);
    rt_array_free(&r->y);
    r->y = (rt_array){.type = RT_DT_U8,
                      .ndims = 1,
                      .dims = {n},
                      .count = n,
                      .data = zeros,
                      .owned = zeros};
    return 0;
}

/* The file as read, labels or not. */
static int read_raw(const rt_data_source *s, const char *path, const char *labels,
                    int features, rt_raw *r, bool *labelled, char *err, size_t errlen)
{
    const char *xk = s->x_key && s->x_key[0] ? s->x_key : "x";
    const char *yk = s->y_key && s->y_key[0] ? s->y_key : "y";
    *labelled = true;
    int rc;
    if (labels && labels[0]) {
        rc = rt_raw_read(s, path, labels, NULL, r, err, errlen);
    } else if (starts(path, "\x93NUMPY", 6)) {
        memset(r, 0, sizeof *r);
        r->path = path;
        *labelled = false;
        rc = rt_npy_read(path, &r->x, err, errlen);
    } else if (starts(path, "PK\x03\x04", 4)) {
        memset(r, 0, sizeof *r);
        r->path = path;
        r->x_key = xk;
        rc = rt_npz_read(path, NULL, 0, xk, RT_NPZ_MEMBER_CAP, &r->x, err, errlen);
        char why[512] = "";
        int yrc = rc ? 0
                     : rt_npz_read(path, NULL, 0, yk, RT_NPZ_MEMBER_CAP, &r->y, why,
                                   sizeof why);
        if (yrc == FERRY_ENOENT) /* x alone */
            *labelled = false;
        else if (yrc)
            rc = base_errf(err, errlen, yrc, "%s", why);
    } else if (starts(path, "\0\0", 2) || starts(path, "\x1f\x8b", 2)) { /* IDX */
        memset(r, 0, sizeof *r);
        r->path = path;
        *labelled = false;
        rc = rt_idx_read_array(path, NULL, &r->x, err, errlen);
    } else {
        rc = rt_raw_read(s, path, NULL, NULL, r, err, errlen);
        /* A CSV of the model's columns alone: its last is no label. */
        if (rc == 0 && r->is_csv && r->csv.cols == features &&
            !(s->label && s->label[0])) {
            *labelled = false;
            rc = csv_unlabel(&r->csv, path, err, errlen);
        }
    }
    if (rc == 0 && !*labelled)
        rc = no_labels(r, err, errlen);
    return rc;
}

int rt_data_samples_load(const rt_data_source *s, const rt_data_seen *seen,
                         rt_dataset *out, bool *labelled, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    bool test = s->test_path && s->test_path[0];
    const char *path = test ? s->test_path : s->path;
    const char *labels = test ? s->test_labels : s->labels;
    if (!path || !path[0])
        return base_errf(err, errlen, FERRY_EINVAL, "no data file named");
    int features = seen->input[0] * seen->input[1] * seen->input[2];
    rt_raw r;
    int rc = read_raw(s, path, labels, features, &r, labelled, err, errlen);
    rt_dataset names = {.class_names = (char **)seen->class_names,
                        .n_class_names = seen->n_class_names};
    if (rc == 0)
        rc = rt_raw_to_set(&r, NULL, rt_raw_count(&r),
                           seen->n_class_names ? &names : NULL, out, err, errlen);
    if (rc == 0 && features && out->features != features)
        rc = base_errf(err, errlen, FERRY_EINVAL,
                       "%s: samples of %dx%dx%d (%d numbers), the model takes %dx%dx%d "
                       "(%d numbers)",
                       path, out->c, out->h, out->w, out->features, seen->input[0],
                       seen->input[1], seen->input[2], features);
    if (rc == 0)
        rc = rt_normalize_as(out, seen->shift, seen->scale, seen->norm_n, err, errlen);
    rt_raw_free(&r);
    if (rc == 0) {
        out->about = base_asprintf("%s: %zu samples of %dx%dx%d%s", path, out->n, out->c,
                                   out->h, out->w, *labelled ? " with labels" : "");
        if (!out->about)
            rc = base_errf(err, errlen, FERRY_ENOMEM, "no memory");
    }
    if (rc)
        rt_dataset_free(out);
    return rc;
}

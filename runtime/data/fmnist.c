/* runtime/data — Fashion-MNIST: two IDX files a split, pixels scaled to
 * [0, 1] and standardised with the training set's statistics. */
#include "data_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ferry/error.h"

#define FMNIST_SIDE    28
#define FMNIST_CLASSES 10
/* Mean and (population) standard deviation of the 47,040,000 training
 * pixels scaled to [0, 1], computed once from the files in double
 * precision; tests/data recomputes them from the real set. The test split is
 * normalised with these too, as any held-out data must be. */
#define FMNIST_MEAN 0.2860405969887955
#define FMNIST_STD  0.3530242445149226

#define FMNIST_HINT                                                                      \
    "install dataset-fashion-mnist (apt-get install dataset-fashion-mnist)"

/* Appends the install hint to a "file missing" message. */
static int missing(char *err, size_t errlen, int rc)
{
    if (rc == FERRY_ENOENT && err && errlen) {
        size_t used = strlen(err);
        if (used < errlen)
            snprintf(err + used, errlen - used, "; " FMNIST_HINT);
    }
    return rc;
}

static int load_split(const char *dir, bool train, const rt_data_cancel *cancel,
                      rt_idx *img, rt_idx *lab, char *ipath, char *lpath, size_t plen,
                      char *err, size_t errlen)
{
    const char *stem = train ? "train" : "t10k";
    snprintf(ipath, plen, "%s/%s-images-idx3-ubyte.gz", dir, stem);
    snprintf(lpath, plen, "%s/%s-labels-idx1-ubyte.gz", dir, stem);
    int rc = rt_idx_read_polled(ipath, cancel, img, err, errlen);
    if (rc != 0)
        return missing(err, errlen, rc);
    rc = rt_idx_read_polled(lpath, cancel, lab, err, errlen);
    if (rc != 0)
        return missing(err, errlen, rc);
    if (img->ndims != 3 || img->dims[1] != FMNIST_SIDE || img->dims[2] != FMNIST_SIDE)
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: expected images of %dx%d pixels (3 IDX dimensions)", ipath,
                         FMNIST_SIDE, FMNIST_SIDE);
    if (lab->ndims != 1)
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: expected labels (1 IDX dimension), found %d dimensions",
                         lpath, lab->ndims);
    if (img->dims[0] != lab->dims[0])
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s holds %u images but %s holds %u labels", ipath, img->dims[0],
                         lpath, lab->dims[0]);
    for (size_t i = 0; i < lab->len; i++)
        if (lab->data[i] >= FMNIST_CLASSES)
            return base_errf(err, errlen, FERRY_ECORRUPT,
                             "%s: label %u of sample %zu is not a class 0..%d", lpath,
                             lab->data[i], i, FMNIST_CLASSES - 1);
    return 0;
}

int rt_fmnist_load(const char *dir, bool train, rt_dataset *out, char *err, size_t errlen)
{
    return rt_fmnist_load_polled(dir, train, NULL, out, err, errlen);
}

int rt_fmnist_load_polled(const char *dir, bool train, const rt_data_cancel *cancel,
                          rt_dataset *out, char *err, size_t errlen)
{
    if (!out)
        return base_errf(err, errlen, FERRY_EINVAL, "rt_fmnist_load: no output");
    memset(out, 0, sizeof *out);
    if (!dir)
        dir = RT_FMNIST_DIR;
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return base_errf(err, errlen, FERRY_ENOENT, "%s: no such directory; " FMNIST_HINT,
                         dir);

    size_t plen = strlen(dir) + 64;
    char *paths = malloc(2 * plen);
    if (!paths)
        return base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory", dir);
    rt_idx img = {0}, lab = {0};
    rt_dataset ds = {0};
    int rc = load_split(dir, train, cancel, &img, &lab, paths, paths + plen, plen, err,
                        errlen);
    if (rc != 0)
        goto out;

    ds.n = img.dims[0];
    ds.c = 1;
    ds.h = ds.w = FMNIST_SIDE;
    ds.features = FMNIST_SIDE * FMNIST_SIDE;
    ds.classes = FMNIST_CLASSES;
    ds.x = rt_data_alloc(img.len * sizeof(float));
    ds.labels = rt_data_alloc(ds.n * sizeof(int32_t));
    if (!ds.x || !ds.labels) {
        rc = base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory for %zu samples", paths,
                       ds.n);
        goto out;
    }
    /* 256 possible pixel values: a table makes the conversion one load each,
     * and every pixel of a value the same float, whatever the split. */
    float table[256];
    for (int v = 0; v < 256; v++)
        table[v] = (float)((v / 255.0 - FMNIST_MEAN) / FMNIST_STD);
    for (size_t i = 0; i < img.len; i++)
        ds.x[i] = table[img.data[i]];
    for (size_t i = 0; i < ds.n; i++)
        ds.labels[i] = lab.data[i];
    /* The same, said in the pixels' own units for what keeps it (--save). */
    ds.norm_shift = malloc(sizeof(float));
    ds.norm_scale = malloc(sizeof(float));
    if (!ds.norm_shift || !ds.norm_scale) {
        rc = base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory", paths);
        goto out;
    }
    ds.norm_shift[0] = (float)(255.0 * FMNIST_MEAN);
    ds.norm_scale[0] = (float)(1.0 / (255.0 * FMNIST_STD));
    ds.norm_n = 1;
    ds.about = base_asprintf("Fashion-MNIST from %s: %zu samples of 1x%dx%d, %d classes; "
                             "normalised with its published mean %.4f and standard "
                             "deviation %.4f",
                             dir, ds.n, FMNIST_SIDE, FMNIST_SIDE, FMNIST_CLASSES,
                             FMNIST_MEAN, FMNIST_STD);
    *out = ds;
    memset(&ds, 0, sizeof ds);
out:
    rt_dataset_free(&ds);
    rt_idx_free(&img);
    rt_idx_free(&lab);
    free(paths);
    return rc;
}

/* tests/data — Fashion-MNIST: the real files when installed (sizes, class
 * counts, spot values checked against the test's own decompression, the
 * normalisation), and small hand-made sets in a temp dir for every error
 * the loader must report. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tdata.h"

/* What the loader's constants must be (the training set's pixel mean and
 * standard deviation on [0, 1]); the real-data test recomputes them. */
#define MEAN 0.2860406
#define STD  0.3530242

static const char *const IMAGES[2] = {"t10k-images-idx3-ubyte.gz",
                                      "train-images-idx3-ubyte.gz"};
static const char *const LABELS[2] = {"t10k-labels-idx1-ubyte.gz",
                                      "train-labels-idx1-ubyte.gz"};

/* Writes a split of n images (28 x 28, pixel p of image i = (i + p) % 256)
 * and the given labels, with the counts the headers announce. */
static void write_split(bool train, uint32_t n_images, uint32_t side,
                        const uint8_t *labels, uint32_t n_labels)
{
    size_t len = (size_t)n_images * side * side, flen;
    uint8_t *px = malloc(len + 1);
    cr_assert(px);
    for (size_t i = 0; i < len; i++)
        px[i] = (uint8_t)((i / (side * side) + i % (side * side)) % 256);
    uint32_t idims[3] = {n_images, side, side};
    uint8_t *file = td_idx_bytes(0x08, 3, idims, px, len, &flen);
    td_write_gz(td_path(IMAGES[train]), file, flen);
    free(file);
    free(px);
    uint32_t ldims[1] = {n_labels};
    file = td_idx_bytes(0x08, 1, ldims, labels, n_labels, &flen);
    td_write_gz(td_path(LABELS[train]), file, flen);
    free(file);
}

TD_TEST(fmnist, a_small_split_loads_normalised_with_the_training_statistics)
{
    uint8_t labels[3] = {9, 0, 4};
    write_split(false, 3, 28, labels, 3);
    rt_dataset ds;
    char err[512] = "";
    cr_assert_eq(rt_fmnist_load(td_dir(), false, &ds, err, sizeof err), 0, "%s", err);
    cr_expect_eq(ds.n, 3);
    cr_expect_eq(ds.features, 784);
    cr_expect(ds.c == 1 && ds.h == 28 && ds.w == 28);
    cr_expect_eq(ds.classes, 10);
    cr_expect_eq(ds.outputs, 0);
    cr_expect_null(ds.targets);
    cr_expect_eq(ds.labels[0], 9);
    cr_expect_eq(ds.labels[2], 4);
    for (size_t i = 0; i < 3; i++)
        for (size_t p = 0; p < 784; p += 97) {
            double raw = (double)((i + p) % 256);
            double want = (raw / 255.0 - MEAN) / STD;
            cr_expect(fabs(ds.x[i * 784 + p] - want) < 1e-5, "x[%zu][%zu] = %f, want %f",
                      i, p, ds.x[i * 784 + p], want);
        }
    cr_expect_eq((uintptr_t)ds.x % 64, 0, "x is 64-byte aligned");
    rt_dataset_free(&ds);
    cr_expect_null(ds.x);
    rt_dataset_free(NULL);
}

TD_TEST(fmnist, a_missing_directory_says_to_install_the_package)
{
    char err[512] = "";
    rt_dataset ds;
    const char *dir = td_path("nowhere");
    int rc = rt_fmnist_load(dir, true, &ds, err, sizeof err);
    td_expect_err(rc, FERRY_ENOENT, err, dir);
    cr_expect(strstr(err, "apt-get install dataset-fashion-mnist") != NULL, "%s", err);
    cr_expect_null(ds.x);
}

TD_TEST(fmnist, a_missing_labels_file_is_enoent_naming_it)
{
    uint8_t labels[2] = {1, 2};
    write_split(true, 2, 28, labels, 2);
    cr_assert(remove(td_path(LABELS[1])) == 0);
    char err[512] = "";
    rt_dataset ds;
    int rc = rt_fmnist_load(td_dir(), true, &ds, err, sizeof err);
    td_expect_err(rc, FERRY_ENOENT, err, td_path(LABELS[1]));
    cr_expect(strstr(err, "dataset-fashion-mnist") != NULL, "%s", err);
}

TD_TEST(fmnist, images_and_labels_that_disagree_in_count_are_corrupt)
{
    uint8_t labels[2] = {1, 2};
    write_split(true, 3, 28, labels, 2);
    char err[512] = "";
    rt_dataset ds;
    int rc = rt_fmnist_load(td_dir(), true, &ds, err, sizeof err);
    td_expect_err(rc, FERRY_ECORRUPT, err, td_path(IMAGES[1]));
    cr_expect(strstr(err, td_path(LABELS[1])) != NULL, "names both files: %s", err);
    cr_expect(strstr(err, "3 images") && strstr(err, "2 labels"), "%s", err);
}

TD_TEST(fmnist, a_label_out_of_range_is_corrupt)
{
    uint8_t labels[3] = {1, 10, 2};
    write_split(false, 3, 28, labels, 3);
    char err[512] = "";
    rt_dataset ds;
    int rc = rt_fmnist_load(td_dir(), false, &ds, err, sizeof err);
    td_expect_err(rc, FERRY_ECORRUPT, err, td_path(LABELS[0]));
    cr_expect(strstr(err, "label 10 of sample 1") != NULL, "%s", err);
}

TD_TEST(fmnist, images_of_another_size_are_corrupt)
{
    uint8_t labels[2] = {1, 2};
    write_split(true, 2, 27, labels, 2);
    char err[512] = "";
    rt_dataset ds;
    int rc = rt_fmnist_load(td_dir(), true, &ds, err, sizeof err);
    td_expect_err(rc, FERRY_ECORRUPT, err, td_path(IMAGES[1]));
    cr_expect(strstr(err, "28x28") != NULL, "%s", err);
}

TD_TEST(fmnist, a_corrupt_images_file_is_corrupt_naming_it)
{
    uint8_t labels[3] = {1, 2, 3};
    write_split(true, 3, 28, labels, 3);
    size_t len;
    const char *path = td_path(IMAGES[1]);
    uint8_t *z = td_read(path, &len);
    td_write(path, z, len - 8);
    free(z);
    char err[512] = "";
    rt_dataset ds;
    td_expect_err(rt_fmnist_load(td_dir(), true, &ds, err, sizeof err), FERRY_ECORRUPT,
                  err, path);
}

TD_TEST(fmnist, an_unknown_data_set_name_is_einval)
{
    char err[256] = "";
    rt_dataset ds;
    int rc = rt_dataset_load("cifar", NULL, true, 0, 1, &ds, err, sizeof err);
    cr_expect_eq(rc, FERRY_EINVAL);
    cr_expect(strstr(err, "cifar") != NULL, "%s", err);
}

/* ---- the real files ------------------------------------------------------- */

TD_TEST(fmnist, the_real_training_set_matches_its_files_and_is_normalised)
{
    td_need_fmnist();
    rt_dataset ds;
    char err[512] = "";
    cr_assert_eq(rt_fmnist_load(NULL, true, &ds, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ds.n, 60000);
    cr_assert_eq(ds.features, 784);
    cr_expect_eq(ds.classes, 10);

    /* Labels: 6,000 of each class; the first is 9 (ankle boot). */
    size_t hist[10] = {0};
    for (size_t i = 0; i < ds.n; i++) {
        cr_assert(ds.labels[i] >= 0 && ds.labels[i] < 10);
        hist[ds.labels[i]]++;
    }
    for (int c = 0; c < 10; c++)
        cr_expect_eq(hist[c], 6000, "class %d: %zu samples", c, hist[c]);
    cr_expect_eq(ds.labels[0], 9);

    /* Every pixel against the test's own decompression of the file, and the
     * constants against the statistics of those raw pixels. */
    size_t rlen;
    uint8_t *raw = td_gunzip(RT_FMNIST_DIR "/train-images-idx3-ubyte.gz", &rlen);
    cr_assert_eq(rlen, 16 + 60000 * 784);
    const uint8_t *px = raw + 16;
    cr_expect_eq(px[96], 1, "first image, first non-zero pixel");
    cr_expect_eq(px[100], 73);
    double sum = 0, sum2 = 0, nsum = 0, nsum2 = 0, maxdiff = 0;
    for (size_t i = 0; i < 60000 * 784; i++) {
        double v = px[i] / 255.0, x = ds.x[i];
        sum += v;
        sum2 += v * v;
        nsum += x;
        nsum2 += x * x;
        double d = fabs(x - (v - MEAN) / STD);
        if (d > maxdiff)
            maxdiff = d;
    }
    free(raw);
    double n = 60000.0 * 784.0;
    double mean = sum / n, std = sqrt(sum2 / n - mean * mean);
    cr_expect(fabs(mean - MEAN) < 1e-6, "pixel mean %.7f", mean);
    cr_expect(fabs(std - STD) < 1e-6, "pixel std %.7f", std);
    cr_expect(maxdiff < 1e-5, "largest difference from the file %g", maxdiff);
    double nmean = nsum / n, nstd = sqrt(nsum2 / n - nmean * nmean);
    cr_expect(fabs(nmean) < 1e-4, "normalised mean %g", nmean);
    cr_expect(fabs(nstd - 1) < 1e-4, "normalised std %g", nstd);
    rt_dataset_free(&ds);
}

TD_TEST(fmnist, the_real_test_set_loads_by_name_with_1000_of_each_class)
{
    td_need_fmnist();
    rt_dataset ds;
    char err[512] = "";
    cr_assert_eq(
        rt_dataset_load("fashion-mnist", NULL, false, 0, 0, &ds, err, sizeof err), 0,
        "%s", err);
    cr_assert_eq(ds.n, 10000);
    cr_expect_eq(ds.features, 784);
    size_t hist[10] = {0};
    for (size_t i = 0; i < ds.n; i++)
        hist[ds.labels[i]]++;
    for (int c = 0; c < 10; c++)
        cr_expect_eq(hist[c], 1000, "class %d: %zu samples", c, hist[c]);
    size_t llen;
    uint8_t *raw = td_gunzip(RT_FMNIST_DIR "/t10k-labels-idx1-ubyte.gz", &llen);
    cr_assert_eq(llen, 8 + 10000);
    for (size_t i = 0; i < 10000; i++)
        cr_assert_eq(ds.labels[i], raw[8 + i], "label %zu", i);
    free(raw);
    rt_dataset_free(&ds);
}

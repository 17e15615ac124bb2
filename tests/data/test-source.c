/* tests/data — a run's sets from a user's files: IDX of any type, the
 * seeded split, the normalisation, the test set's agreement with the
 * training set, and a file named where Fashion-MNIST's directory goes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/data_int.h"
#include "tdata.h"
#include "tfiles.h"

/* n rows of `features` numbers and a label a row, class k's rows near k. */
static void write_csv(const char *path, int n, int features, const char *const *names)
{
    FILE *f = fopen(path, "w");
    cr_assert(f);
    for (int j = 0; j < features; j++)
        fprintf(f, "f%d,", j);
    fprintf(f, "label\n");
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < features; j++)
            fprintf(f, "%d,", (i % 3) * 10 + (i * 7 + j) % 5);
        if (names)
            fprintf(f, "%s\n", names[i % 3]);
        else
            fprintf(f, "%d\n", i % 3);
    }
    cr_assert(fclose(f) == 0);
}

TD_TEST(source, idx_files_of_any_type_and_shape_are_read)
{
    /* int16, 3 samples of 2x1x2, big-endian; labels as int32. */
    uint8_t x[24], y[12] = {0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2};
    for (int i = 0; i < 12; i++) {
        x[2 * i] = (uint8_t)(((i - 6) >> 8) & 0xff);
        x[2 * i + 1] = (uint8_t)((i - 6) & 0xff);
    }
    uint32_t xd[] = {3, 2, 1, 2}, yd[] = {3};
    size_t xl, yl;
    uint8_t *xb = td_idx_bytes(0x0B, 4, xd, x, sizeof x, &xl);
    uint8_t *yb = td_idx_bytes(0x0C, 1, yd, y, sizeof y, &yl);
    td_write_gz(td_path("x.idx.gz"), xb, xl);
    td_write(td_path("y.idx"), yb, yl);
    free(xb);
    free(yb);
    rt_data_source s = {.path = td_path("x.idx.gz"), .labels = td_path("y.idx"),
                        .test_path = td_path("x.idx.gz"), .test_labels = td_path("y.idx"),
                        .normalize = "none"};
    rt_dataset tr, te;
    char err[512] = "";
    cr_assert_eq(rt_data_source_load(&s, NULL, &tr, &te, err, sizeof err), 0, "%s", err);
    cr_expect(tr.c == 2 && tr.h == 1 && tr.w == 2 && tr.features == 4, "%dx%dx%d", tr.c,
              tr.h, tr.w);
    cr_expect(tr.x[0] == -6.0f && tr.x[11] == 5.0f);
    cr_expect(tr.labels[1] == 1 && tr.labels[2] == 2 && tr.classes == 3);
    rt_dataset_free(&tr);
    rt_dataset_free(&te);
}

TD_TEST(source, an_unknown_idx_type_is_refused_by_code)
{
    uint32_t d[] = {2};
    uint8_t data[2] = {0};
    size_t l;
    uint8_t *b = td_idx_bytes(0x0A, 1, d, data, 2, &l);
    td_write(td_path("x.idx"), b, l);
    free(b);
    rt_array a;
    char err[512] = "";
    int rc = rt_idx_read_array(td_path("x.idx"), NULL, &a, err, sizeof err);
    td_expect_err(rc, FERRY_ECORRUPT, err, td_path("x.idx"));
    cr_expect(strstr(err, "element type 0x0a"), "%s", err);
}

static void load_split(double frac, uint64_t seed, rt_dataset *tr, rt_dataset *te)
{
    rt_data_source s = {.path = td_path("s.csv"), .test_split = frac, .seed = seed,
                        .normalize = "none"};
    char err[512] = "";
    cr_assert_eq(rt_data_source_load(&s, NULL, tr, te, err, sizeof err), 0, "%s", err);
}

TD_TEST(source, the_test_split_is_reproducible_by_seed)
{
    write_csv(td_path("s.csv"), 200, 3, NULL);
    rt_dataset a, at, b, bt, c, ct;
    load_split(0.25, 7, &a, &at);
    load_split(0.25, 7, &b, &bt);
    load_split(0.25, 8, &c, &ct);
    cr_expect(a.n == 150 && at.n == 50, "%zu + %zu", a.n, at.n);
    cr_expect(memcmp(at.x, bt.x, at.n * 3 * sizeof(float)) == 0, "same seed, same split");
    cr_expect(memcmp(a.x, b.x, a.n * 3 * sizeof(float)) == 0);
    cr_expect(memcmp(at.x, ct.x, at.n * 3 * sizeof(float)) != 0, "another seed, another");
    rt_dataset *sets[] = {&a, &at, &b, &bt, &c, &ct};
    for (int i = 0; i < 6; i++)
        rt_dataset_free(sets[i]);
}

TD_TEST(source, standard_and_minmax_come_from_the_training_set)
{
    write_csv(td_path("n.csv"), 90, 2, NULL);
    rt_data_source s = {.path = td_path("n.csv"), .test_path = td_path("n.csv")};
    rt_dataset tr, te;
    char err[512] = "";
    cr_assert_eq(rt_data_source_load(&s, NULL, &tr, &te, err, sizeof err), 0, "%s", err);
    for (int j = 0; j < 2; j++) {
        double sum = 0, sq = 0;
        for (size_t i = 0; i < tr.n; i++) {
            sum += tr.x[i * 2 + j];
            sq += tr.x[i * 2 + j] * tr.x[i * 2 + j];
        }
        cr_expect(fabs(sum / tr.n) < 1e-5 && fabs(sq / tr.n - 1) < 1e-4, "feature %d", j);
    }
    cr_expect(memcmp(tr.x, te.x, tr.n * 2 * sizeof(float)) == 0, "the same numbers");
    cr_expect(strstr(tr.about, "normalised standard per feature"), "%s", tr.about);
    rt_dataset_free(&tr);
    rt_dataset_free(&te);
    s.normalize = "minmax";
    cr_assert_eq(rt_data_source_load(&s, NULL, &tr, &te, err, sizeof err), 0, "%s", err);
    float lo = 1, hi = 0;
    for (size_t i = 0; i < tr.n * 2; i++) {
        lo = tr.x[i] < lo ? tr.x[i] : lo;
        hi = tr.x[i] > hi ? tr.x[i] : hi;
    }
    cr_expect(lo == 0.0f && fabsf(hi - 1.0f) < 1e-6f, "%g..%g", lo, hi);
    rt_dataset_free(&tr);
    rt_dataset_free(&te);
    s.normalize = "loud";
    cr_expect_eq(rt_data_source_load(&s, NULL, &tr, &te, err, sizeof err), FERRY_EINVAL);
    cr_expect(strstr(err, "standard, minmax or none"), "%s", err);
}

TD_TEST(source, a_test_set_of_another_shape_is_refused)
{
    write_csv(td_path("a.csv"), 30, 3, NULL);
    write_csv(td_path("b.csv"), 30, 4, NULL);
    rt_data_source s = {.path = td_path("a.csv"), .test_path = td_path("b.csv")};
    rt_dataset tr, te;
    char err[512] = "";
    int rc = rt_data_source_load(&s, NULL, &tr, &te, err, sizeof err);
    td_expect_err(rc, FERRY_EINVAL, err, td_path("b.csv"));
    cr_expect(strstr(err, "test samples of 1x1x4") && strstr(err, "training set's are 1x1x3"),
              "%s", err);
}

TD_TEST(source, test_labels_take_the_training_sets_classes)
{
    const char *names[] = {"setosa", "versicolor", "virginica"};
    const char *other[] = {"versicolor", "virginica", "rosa"};
    write_csv(td_path("tr.csv"), 30, 2, names);
    write_csv(td_path("te.csv"), 2, 2, names + 1); /* versicolor and virginica only */
    write_csv(td_path("bad.csv"), 3, 2, other);
    rt_data_source s = {.path = td_path("tr.csv"), .test_path = td_path("te.csv")};
    rt_dataset tr, te;
    char err[512] = "";
    cr_assert_eq(rt_data_source_load(&s, NULL, &tr, &te, err, sizeof err), 0, "%s", err);
    cr_expect(te.labels[0] == 1 && te.labels[1] == 2 && te.classes == 3);
    cr_expect(strstr(tr.about, "0=setosa:10 1=versicolor:10 2=virginica:10"), "%s",
              tr.about);
    rt_dataset_free(&tr);
    rt_dataset_free(&te);
    s.test_path = td_path("bad.csv");
    int rc = rt_data_source_load(&s, NULL, &tr, &te, err, sizeof err);
    td_expect_err(rc, FERRY_EINVAL, err, td_path("bad.csv"));
    cr_expect(strstr(err, "\"rosa\" is not a class of the training set"), "%s", err);
}

TD_TEST(source, a_file_named_as_the_data_directory_is_read)
{
    write_csv(td_path("d.csv"), 50, 2, NULL);
    rt_dataset tr, te;
    char err[512] = "";
    cr_assert_eq(rt_dataset_load("fashion-mnist", td_path("d.csv"), true, 784, 3, &tr, err,
                                 sizeof err),
                 0, "%s", err);
    cr_assert_eq(rt_dataset_load("fashion-mnist", td_path("d.csv"), false, 784, 3, &te, err,
                                 sizeof err),
                 0, "%s", err);
    cr_expect(tr.n == 45 && te.n == 5, "%zu + %zu: a tenth held out", tr.n, te.n);
    cr_expect(tr.features == 2);
    rt_dataset_free(&tr);
    rt_dataset_free(&te);
}

TD_TEST(source, fashion_mnist_states_its_published_constants)
{
    td_need_fmnist();
    rt_dataset te;
    char err[512] = "";
    cr_assert_eq(rt_fmnist_load(NULL, false, &te, err, sizeof err), 0, "%s", err);
    cr_expect(te.about && strstr(te.about, "10000 samples of 1x28x28") &&
                  strstr(te.about, "published mean 0.2860") &&
                  strstr(te.about, "standard deviation 0.3530"),
              "%s", te.about);
    rt_dataset_free(&te);
}

TD_TEST(source, a_truncated_idx_file_says_expected_and_found_bytes)
{
    uint32_t d[] = {3, 2};
    int32_t data[6] = {0};
    size_t l;
    uint8_t *b = td_idx_bytes(0x0C, 2, d, (const uint8_t *)data, sizeof data, &l);
    td_write(td_path("cut.idx"), b, l - 7);
    free(b);
    rt_array a;
    char err[512] = "";
    int rc = rt_idx_read_array(td_path("cut.idx"), NULL, &a, err, sizeof err);
    td_expect_err(rc, FERRY_ECORRUPT, err, td_path("cut.idx"));
    cr_expect(strstr(err, "truncated") && strstr(err, "24 bytes of IDX data expected, 17 found"),
              "%s", err);
}

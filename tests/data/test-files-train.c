/* tests/data — the bundled mlp trained from a user's files: Fashion-MNIST
 * written as .npz, CSV and IDX trains to the same accuracy from each, a
 * synthetic 3-class CSV with string labels is learnt, and labels beyond
 * the model's classes are refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../train/ttrain.h"
#include "runtime/data/data_int.h"
#include "tdata.h"
#include "tfiles.h"

#define TRAIN_N 6000
#define TEST_N  2000
#define SIDE    28
#define PIXELS  (SIDE * SIDE)

/* Trains the mlp two epochs on the sets `s` names; the test accuracy. */
static double train_on(const rt_data_source *s, rt_dataset *about)
{
    ttrain f;
    ttrain_open(&f, "mlp");
    rt_dataset tr, te;
    char err[512] = "";
    cr_assert_eq(rt_data_source_load(s, NULL, &tr, &te, err, sizeof err), 0, "%s", err);
    rt_train_opts o = {.batch = 64,
                       .optim = {.kind = RT_OPT_SGD, .lr = 0.05f, .momentum = 0.9f},
                       .seed = 1,
                       .train_set = &tr,
                       .test_set = &te};
    rt_trainer *t;
    cr_assert_eq(rt_trainer_create(f.mod.task->model, f.dev, &o, &t, err, sizeof err), 0,
                 "%s", err);
    rt_epoch_stats st;
    for (int e = 0; e < 2; e++)
        cr_assert_eq(rt_trainer_epoch(t, &st, NULL, NULL, err, sizeof err), 0, "%s", err);
    rt_trainer_destroy(t);
    ttrain_close(&f);
    if (about) { /* keeps the line only */
        *about = (rt_dataset){.about = tr.about};
        tr.about = NULL;
    }
    rt_dataset_free(&tr);
    rt_dataset_free(&te);
    return st.test_accuracy;
}

/* The pixels as Fashion-MNIST's reader gives them: scaled to [0, 1], then
 * standardised with the published constants. */
static float *scaled(const uint8_t *img, size_t n)
{
    float *x = malloc(n * PIXELS * sizeof *x);
    cr_assert(x);
    for (size_t i = 0; i < n * PIXELS; i++)
        x[i] = (float)((img[i] / 255.0 - 0.2860405969887955) / 0.3530242445149226);
    return x;
}

static void write_csv(const char *path, const float *img, const uint8_t *lab, size_t n)
{
    FILE *f = fopen(path, "w");
    cr_assert(f);
    for (int j = 0; j < PIXELS; j++)
        fprintf(f, "p%d,", j);
    fprintf(f, "label\n");
    for (size_t i = 0; i < n; i++) {
        for (int j = 0; j < PIXELS; j++)
            fprintf(f, "%.9g,", img[i * PIXELS + j]);
        fprintf(f, "%u\n", lab[i]);
    }
    cr_assert(fclose(f) == 0);
}

static void write_npz(const char *path, const void *img, bool f32, const uint8_t *lab,
                      size_t n)
{
    uint64_t xs[] = {n, SIDE, SIDE}, ys[] = {n};
    size_t xl, yl, sz = f32 ? 4 : 1;
    uint8_t *xb = tf_npy(f32 ? "<f4" : "|u1", xs, 3, img, n * PIXELS * sz, NULL, &xl);
    uint8_t *yb = tf_npy("|u1", ys, 1, lab, n, NULL, &yl);
    const char *names[] = {"x.npy", "y.npy"};
    const uint8_t *bytes[] = {xb, yb};
    size_t lens[] = {xl, yl};
    tf_write_zip(path, 2, names, bytes, lens, true);
    free(xb);
    free(yb);
}

/* IDX of big-endian float32 (type 0x0D) when f32, else of bytes. */
static void write_idx(const char *xpath, const char *ypath, const void *img, bool f32,
                      const uint8_t *lab, size_t n)
{
    uint32_t xd[] = {(uint32_t)n, SIDE, SIDE}, yd[] = {(uint32_t)n};
    size_t xl, yl, bytes = n * PIXELS * (f32 ? 4 : 1);
    uint8_t *be = malloc(bytes);
    cr_assert(be);
    memcpy(be, img, bytes);
    for (size_t i = 0; f32 && i < bytes; i += 4) {
        uint8_t t = be[i];
        be[i] = be[i + 3];
        be[i + 3] = t;
        t = be[i + 1];
        be[i + 1] = be[i + 2];
        be[i + 2] = t;
    }
    uint8_t *xb = td_idx_bytes(f32 ? 0x0D : 0x08, 3, xd, be, bytes, &xl);
    free(be);
    uint8_t *yb = td_idx_bytes(0x08, 1, yd, lab, n, &yl);
    td_write(xpath, xb, xl);
    td_write(ypath, yb, yl);
    free(xb);
    free(yb);
}

Test(files_train, fashion_mnist_from_npz_csv_and_idx_trains_alike, .fini = td_teardown,
     .timeout = 600)
{
    td_need_fmnist();
    rt_idx img, lab, timg, tlab;
    char err[512] = "";
    const char *d = RT_FMNIST_DIR;
    char p[4][256];
    snprintf(p[0], 256, "%s/train-images-idx3-ubyte.gz", d);
    snprintf(p[1], 256, "%s/train-labels-idx1-ubyte.gz", d);
    snprintf(p[2], 256, "%s/t10k-images-idx3-ubyte.gz", d);
    snprintf(p[3], 256, "%s/t10k-labels-idx1-ubyte.gz", d);
    cr_assert_eq(rt_idx_read(p[0], &img, err, sizeof err), 0, "%s", err);
    cr_assert_eq(rt_idx_read(p[1], &lab, err, sizeof err), 0, "%s", err);
    cr_assert_eq(rt_idx_read(p[2], &timg, err, sizeof err), 0, "%s", err);
    cr_assert_eq(rt_idx_read(p[3], &tlab, err, sizeof err), 0, "%s", err);
    /* The same numbers in each format, read without normalising: the
     * formats must give the same floats, so the same training. */
    float *x = scaled(img.data, TRAIN_N), *tx = scaled(timg.data, TEST_N);
    write_npz(td_path("tr.npz"), x, true, lab.data, TRAIN_N);
    write_npz(td_path("te.npz"), tx, true, tlab.data, TEST_N);
    write_csv(td_path("tr.csv"), x, lab.data, TRAIN_N);
    write_csv(td_path("te.csv"), tx, tlab.data, TEST_N);
    write_idx(td_path("tr-x.idx"), td_path("tr-y.idx"), x, true, lab.data, TRAIN_N);
    write_idx(td_path("te-x.idx"), td_path("te-y.idx"), tx, true, tlab.data, TEST_N);
    /* And the bytes themselves, normalised per channel by the reader. */
    write_npz(td_path("tr8.npz"), img.data, false, lab.data, TRAIN_N);
    write_npz(td_path("te8.npz"), timg.data, false, tlab.data, TEST_N);
    write_idx(td_path("tr8-x.idx"), td_path("tr8-y.idx"), img.data, false, lab.data,
              TRAIN_N);
    write_idx(td_path("te8-x.idx"), td_path("te8-y.idx"), timg.data, false, tlab.data,
              TEST_N);
    free(x);
    free(tx);
    rt_idx_free(&img);
    rt_idx_free(&lab);
    rt_idx_free(&timg);
    rt_idx_free(&tlab);

    /* td_path's buffers rotate: each source keeps copies. */
    char f[16][256];
    const char *name[] = {"tr.npz",    "te.npz",    "tr.csv",    "te.csv",
                          "tr-x.idx",  "tr-y.idx",  "te-x.idx",  "te-y.idx",
                          "tr8.npz",   "te8.npz",   "tr8-x.idx", "tr8-y.idx",
                          "te8-x.idx", "te8-y.idx"};
    for (int i = 0; i < 14; i++)
        snprintf(f[i], sizeof f[i], "%s", td_path(name[i]));
    rt_data_source npz = {.path = f[0], .test_path = f[1], .normalize = "none"};
    rt_data_source csv = {.path = f[2], .test_path = f[3], .normalize = "none"};
    rt_data_source idx = {.path = f[4], .labels = f[5], .test_path = f[6],
                          .test_labels = f[7], .normalize = "none"};
    rt_data_source npz8 = {.path = f[8], .test_path = f[9]};
    rt_data_source idx8 = {.path = f[10], .labels = f[11], .test_path = f[12],
                           .test_labels = f[13]};
    double a_npz = train_on(&npz, NULL), a_csv = train_on(&csv, NULL),
           a_idx = train_on(&idx, NULL), a_npz8 = train_on(&npz8, NULL),
           a_idx8 = train_on(&idx8, NULL);
    cr_log_info("accuracy: npz %.4f, csv %.4f, idx %.4f; from bytes: npz %.4f, idx %.4f",
                a_npz, a_csv, a_idx, a_npz8, a_idx8);
    cr_expect(a_idx > 0.75, "the mlp learns: %.4f", a_idx);
    cr_expect(fabs(a_npz - a_idx) <= 0.003, "npz %.4f, idx %.4f", a_npz, a_idx);
    cr_expect(fabs(a_csv - a_idx) <= 0.003, "csv %.4f, idx %.4f", a_csv, a_idx);
    cr_expect(fabs(a_npz8 - a_idx8) <= 0.003, "npz %.4f, idx %.4f", a_npz8, a_idx8);
    td_finish();
}

/* Three classes named by strings, each a cloud around its own pattern of
 * the mlp's 784 inputs. */
static void write_blobs(const char *path, int n, uint64_t seed)
{
    static const char *const names[] = {"gamma", "alpha", "beta"};
    FILE *f = fopen(path, "w");
    cr_assert(f);
    for (int j = 0; j < PIXELS; j++)
        fprintf(f, "f%d,", j);
    fprintf(f, "kind\n");
    rt_rng r;
    rt_rng_seed(&r, seed, 0);
    for (int i = 0; i < n; i++) {
        int k = i % 3;
        for (int j = 0; j < PIXELS; j++)
            fprintf(f, "%.3f,", ((j * 7 + k * 13) % 3 == 0 ? 1.0 : 0.0) + rt_rng_normal(&r));
        fprintf(f, "%s\n", names[k]);
    }
    cr_assert(fclose(f) == 0);
}

Test(files_train, a_csv_with_string_labels_is_learnt_and_its_mapping_said,
     .fini = td_teardown, .timeout = 300)
{
    write_blobs(td_path("blobs.csv"), 1500, 5);
    rt_data_source s = {.path = td_path("blobs.csv"), .label = "kind", .test_split = 0.2,
                        .seed = 3};
    rt_dataset about;
    double acc = train_on(&s, &about);
    cr_expect(acc > 0.95, "accuracy %.4f", acc);
    cr_expect(strstr(about.about, "3 classes") && strstr(about.about, "0=alpha:") &&
                  strstr(about.about, "1=beta:") && strstr(about.about, "2=gamma:"),
              "%s", about.about);
    rt_dataset_free(&about);
    td_finish();
}

/* Three named classes of two features, each a cloud around its centre. */
static void write_table(const char *path, int n, uint64_t seed)
{
    static const char *const names[] = {"rose", "iris", "lily"};
    static const double centre[3][2] = {{0, 0}, {3, 3}, {-3, 3}};
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fprintf(f, "width,height,species\n");
    rt_rng r;
    rt_rng_seed(&r, seed, 0);
    for (int i = 0; i < n; i++) {
        int k = (int)rt_rng_below(&r, 3);
        fprintf(f, "%.3f,%.3f,%s\n", centre[k][0] + 0.7 * rt_rng_normal(&r),
                centre[k][1] + 0.7 * rt_rng_normal(&r), names[k]);
    }
    cr_assert(fclose(f) == 0);
}

Test(files_train, the_bundled_mlp_takes_a_tables_shape_and_classes,
     .fini = td_teardown, .timeout = 300)
{
    /* The mlp declares neither its input nor its classes: a table of two
     * features and three named classes makes it 2-256-128-3. */
    write_table(td_path("table.csv"), 1500, 9);
    rt_data_source s = {.path = td_path("table.csv"), .seed = 3};
    rt_dataset about;
    double acc = train_on(&s, &about);
    cr_expect(acc > 0.95, "accuracy %.4f", acc);
    cr_expect(strstr(about.about, "of 1x1x2, 3 classes"), "%s", about.about);
    rt_dataset_free(&about);
    td_finish();
}

TD_TEST(files_train, labels_beyond_the_models_classes_are_refused)
{
    /* The cnn's ten classes are fixed (the mlp would take twelve). */
    rt_dataset set;
    ttrain_random_set(&set, 64, 1, SIDE, SIDE, 10, 1);
    set.labels[5] = 11;
    set.classes = 12;
    ttrain f;
    ttrain_open(&f, "cnn");
    rt_train_opts o = {.optim = {.kind = RT_OPT_SGD}, .train_set = &set, .test_set = &set};
    rt_trainer *t;
    char err[512] = "";
    cr_assert_eq(rt_trainer_create(f.mod.task->model, f.dev, &o, &t, err, sizeof err),
                 FERRY_EINVAL);
    cr_expect(strstr(err, "12 classes, the model has 10 outputs"), "%s", err);
    ttrain_close(&f);
    ttrain_free_set(&set);
}

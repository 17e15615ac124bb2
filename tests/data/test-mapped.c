/* tests/data — an .npy read in place: the set keeps the file mapped, the
 * loader converts and normalises rows as it gathers them, the numbers are
 * those of the same arrays read into memory (from an .npz), and reading
 * the set adds no copy of it to the process's anonymous memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/data_int.h"
#include "tcommon.h"
#include "tdata.h"
#include "tfiles.h"

/* n samples of 3 x 4 int16 and their labels, as .npy pair and as .npz. */
static void write_both(size_t n)
{
    int16_t *x = malloc(n * 12 * sizeof *x);
    int64_t *y = malloc(n * sizeof *y);
    cr_assert(x && y);
    for (size_t i = 0; i < n * 12; i++)
        x[i] = (int16_t)((i * 7919) % 2001 - 1000);
    for (size_t i = 0; i < n; i++)
        y[i] = (int64_t)(i % 4);
    uint64_t xs[] = {n, 3, 4}, ys[] = {n};
    tf_write_npy(td_path("x.npy"), "<i2", xs, 3, x, n * 12 * sizeof *x);
    tf_write_npy(td_path("y.npy"), "<i8", ys, 1, y, n * sizeof *y);
    size_t xl, yl;
    uint8_t *xb = tf_npy("<i2", xs, 3, x, n * 12 * sizeof *x, NULL, &xl);
    uint8_t *yb = tf_npy("<i8", ys, 1, y, n * sizeof *y, NULL, &yl);
    const char *names[] = {"x.npy", "y.npy"};
    const uint8_t *bytes[] = {xb, yb};
    size_t lens[] = {xl, yl};
    tf_write_zip(td_path("d.npz"), 2, names, bytes, lens, true);
    free(xb);
    free(yb);
    free(x);
    free(y);
}

TD_TEST(mapped, an_npy_is_read_in_place_with_the_numbers_of_a_copy)
{
    write_both(500);
    char xp[256], yp[256], zp[256];
    snprintf(xp, sizeof xp, "%s", td_path("x.npy"));
    snprintf(yp, sizeof yp, "%s", td_path("y.npy"));
    snprintf(zp, sizeof zp, "%s", td_path("d.npz"));
    rt_data_source npy = {.path = xp, .labels = yp, .test_split = 0.2, .seed = 9};
    rt_data_source npz = {.path = zp, .test_split = 0.2, .seed = 9};
    rt_dataset a, at, b, bt;
    char err[512] = "";
    cr_assert_eq(rt_data_source_load(&npy, NULL, &a, &at, err, sizeof err), 0, "%s", err);
    cr_assert_eq(rt_data_source_load(&npz, NULL, &b, &bt, err, sizeof err), 0, "%s", err);
    cr_expect(a.x == NULL && a.mapped && at.x == NULL && at.mapped, "read in place");
    cr_expect(b.x != NULL, "an .npz member is inflated into memory");
    cr_assert(a.n == b.n && at.n == bt.n && a.n == 400);
    float ra[12], rb[12];
    for (size_t i = 0; i < a.n; i++) {
        rt_dataset_row(&a, i, ra);
        rt_dataset_row(&b, i, rb);
        cr_assert(memcmp(ra, rb, sizeof ra) == 0, "training sample %zu", i);
    }
    for (size_t i = 0; i < at.n; i++) {
        rt_dataset_row(&at, i, ra);
        rt_dataset_row(&bt, i, rb);
        cr_assert(memcmp(ra, rb, sizeof ra) == 0, "test sample %zu", i);
    }
    /* The loader gathers the same rows from either. */
    rt_loader_opts o = {.batch = 64, .world = 2, .rank = 1, .seed = 3, .shuffle = true};
    rt_loader *la, *lb;
    cr_assert_eq(rt_loader_create(&a, &o, &la), 0);
    cr_assert_eq(rt_loader_create(&b, &o, &lb), 0);
    rt_loader_begin(la, 1);
    rt_loader_begin(lb, 1);
    const rt_batch_host *ha, *hb;
    while ((ha = rt_loader_next(la))) {
        hb = rt_loader_next(lb);
        cr_assert(hb && ha->n == hb->n);
        cr_assert(memcmp(ha->x, hb->x, (size_t)ha->n * 12 * sizeof(float)) == 0);
        cr_assert(memcmp(ha->labels, hb->labels, (size_t)ha->n * sizeof(int32_t)) == 0);
    }
    rt_loader_destroy(la);
    rt_loader_destroy(lb);
    rt_dataset *sets[] = {&a, &at, &b, &bt};
    for (int i = 0; i < 4; i++)
        rt_dataset_free(sets[i]);
}

static long rss_anon_kib(void)
{
    long kib = tcom_status_kib(0, "RssAnon");
    cr_assert(kib >= 0);
    return kib;
}

/* 48 MiB of float32 samples: reading them and an epoch of the loader add
 * far less than the file to anonymous memory (labels, the row list and
 * the loader's ring only). */
TD_TEST(mapped, reading_and_loading_an_npy_adds_no_copy_to_anonymous_memory)
{
    size_t n = 16384, f = 768;
    uint64_t xs[] = {n, f}, ys[] = {n};
    size_t len;
    uint8_t *hdr = tf_npy("<f4", xs, 2, NULL, 0, NULL, &len);
    FILE *out = fopen(td_path("big.npy"), "wb");
    cr_assert(out && fwrite(hdr, 1, len, out) == len);
    free(hdr);
    float row[768];
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < f; j++)
            row[j] = (float)((i + j) % 17);
        cr_assert(fwrite(row, sizeof row, 1, out) == 1);
    }
    cr_assert(fclose(out) == 0);
    int32_t *y = calloc(n, sizeof *y);
    tf_write_npy(td_path("by.npy"), "<i4", ys, 1, y, n * sizeof *y);
    free(y);
    char xp[256], yp[256];
    snprintf(xp, sizeof xp, "%s", td_path("big.npy"));
    snprintf(yp, sizeof yp, "%s", td_path("by.npy"));

    long before = rss_anon_kib();
    rt_data_source s = {.path = xp, .labels = yp, .seed = 1};
    rt_dataset tr, te;
    char err[512] = "";
    cr_assert_eq(rt_data_source_load(&s, NULL, &tr, &te, err, sizeof err), 0, "%s", err);
    rt_loader_opts o = {.batch = 128, .world = 1, .seed = 1, .shuffle = true};
    rt_loader *l;
    cr_assert_eq(rt_loader_create(&tr, &o, &l), 0);
    rt_loader_begin(l, 0);
    size_t seen = 0;
    const rt_batch_host *b;
    while ((b = rt_loader_next(l)))
        seen += (size_t)b->n;
    long grown = rss_anon_kib() - before;
    cr_expect_eq(seen, tr.n);
    cr_log_info("RssAnon grew %ld KiB reading a %zu KiB file", grown, n * f * 4 / 1024);
    cr_expect(grown < 8 * 1024, "RssAnon grew %ld KiB for a 48 MiB file", grown);
    rt_loader_destroy(l);
    rt_dataset_free(&tr);
    rt_dataset_free(&te);
}

/* tests/data — .npz zips (stored by numpy.savez, deflated by
 * savez_compressed): stored members used in place, keys found or listed,
 * and sizes checked against the cap before a byte is inflated. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/data_int.h"
#include "tdata.h"
#include "tfiles.h"

/* x: 6 samples of 1x2x2 u8; y: labels 0..2 (int64). */
static void write_npz(const char *path, const char *xname, const char *yname, bool deflate,
                      size_t ylen)
{
    uint8_t x[24];
    for (int i = 0; i < 24; i++)
        x[i] = (uint8_t)(i * 10);
    int64_t y[6] = {0, 1, 2, 0, 1, 2};
    uint64_t xs[] = {6, 2, 2}, ys[] = {ylen};
    size_t xl, yl;
    uint8_t *xb = tf_npy("|u1", xs, 3, x, sizeof x, NULL, &xl);
    uint8_t *yb = tf_npy("<i8", ys, 1, y, ylen * sizeof *y, NULL, &yl);
    const char *names[] = {xname, yname};
    const uint8_t *bytes[] = {xb, yb};
    size_t lens[] = {xl, yl};
    tf_write_zip(path, 2, names, bytes, lens, deflate);
    free(xb);
    free(yb);
}

static void expect_loads(bool deflate)
{
    write_npz(td_path("d.npz"), "x.npy", "y.npy", deflate, 6);
    rt_data_source s = {.path = td_path("d.npz"), .test_path = td_path("d.npz"),
                        .normalize = "none"};
    rt_dataset tr, te;
    char err[512] = "";
    cr_assert_eq(rt_data_source_load(&s, NULL, &tr, &te, err, sizeof err), 0, "%s", err);
    cr_expect(tr.n == 6 && tr.c == 1 && tr.h == 2 && tr.w == 2 && tr.classes == 3);
    float last[4];
    rt_dataset_row(&tr, 5, last);
    cr_expect(last[3] == 230.0f && tr.labels[5] == 2);
    if (deflate)
        cr_expect(tr.x && !tr.mapped, "a deflated member is inflated into memory");
    else
        cr_expect(!tr.x && tr.mapped && tr.mapped->map, "a stored member is used in place");
    cr_expect(tr.about && strstr(tr.about, "6 samples of 1x2x2") &&
                  strstr(tr.about, "3 classes, balance 2 2 2"),
              "%s", tr.about);
    rt_dataset_free(&tr);
    rt_dataset_free(&te);
}

TD_TEST(npz, stored_and_deflated_members_are_read)
{
    expect_loads(false);
    expect_loads(true);
}

TD_TEST(npz, other_keys_are_named_and_a_missing_one_lists_those_it_has)
{
    write_npz(td_path("k.npz"), "images.npy", "classes.npy", false, 6);
    rt_data_source s = {.path = td_path("k.npz"), .test_path = td_path("k.npz")};
    rt_dataset tr, te;
    char err[512] = "";
    int rc = rt_data_source_load(&s, NULL, &tr, &te, err, sizeof err);
    td_expect_err(rc, FERRY_ENOENT, err, td_path("k.npz"));
    cr_expect(strstr(err, "no array \"x\" (it has: images, classes)"), "%s", err);
    s.x_key = "images";
    s.y_key = "classes";
    cr_assert_eq(rt_data_source_load(&s, NULL, &tr, &te, err, sizeof err), 0, "%s", err);
    rt_dataset_free(&tr);
    rt_dataset_free(&te);
}

TD_TEST(npz, x_and_y_of_different_lengths_give_both_counts)
{
    write_npz(td_path("l.npz"), "x.npy", "y.npy", true, 5);
    rt_data_source s = {.path = td_path("l.npz")};
    rt_dataset tr, te;
    char err[512] = "";
    int rc = rt_data_source_load(&s, NULL, &tr, &te, err, sizeof err);
    td_expect_err(rc, FERRY_EINVAL, err, td_path("l.npz"));
    cr_expect(strstr(err, "6 samples but 5 labels"), "%s", err);
}

TD_TEST(npz, a_member_beyond_the_cap_is_refused_before_it_is_inflated)
{
    write_npz(td_path("c.npz"), "x.npy", "y.npy", true, 6);
    rt_array a;
    char err[512] = "";
    int rc = rt_npz_read(td_path("c.npz"), NULL, 0, "x", 64, &a, err, sizeof err);
    td_expect_err(rc, FERRY_ECORRUPT, err, td_path("c.npz"));
    cr_expect(strstr(err, "member x.npy claims") && strstr(err, "beyond the cap of 64"),
              "%s", err);
}

/* A directory that claims 4 GiB from a few compressed bytes: refused from
 * the directory, not by inflating. */
TD_TEST(npz, a_zip_bomb_is_refused_from_its_directory)
{
    write_npz(td_path("b.npz"), "x.npy", "y.npy", true, 6);
    size_t n;
    uint8_t *b = td_read(td_path("b.npz"), &n);
    int patched = 0;
    for (size_t i = 0; i + 46 <= n; i++)
        if (memcmp(b + i, "PK\x01\x02", 4) == 0) { /* central directory entry */
            memcpy(b + i + 24, "\xf0\xff\xff\xff", 4); /* uncompressed size */
            patched++;
        }
    cr_assert_eq(patched, 2);
    td_write(td_path("b.npz"), b, n);
    free(b);
    rt_array a;
    char err[512] = "";
    int rc = rt_npz_read(td_path("b.npz"), NULL, 0, "x", RT_NPZ_MEMBER_CAP, &a, err,
                         sizeof err);
    td_expect_err(rc, FERRY_ECORRUPT, err, td_path("b.npz"));
    cr_expect(strstr(err, "claims 4294967280 bytes from") && strstr(err, "zip bomb"), "%s",
              err);
}

TD_TEST(npz, a_damaged_zip_is_refused)
{
    write_npz(td_path("z.npz"), "x.npy", "y.npy", false, 6);
    size_t n;
    uint8_t *b = td_read(td_path("z.npz"), &n);
    td_write(td_path("z.npz"), b, n / 2); /* the directory cut off */
    free(b);
    rt_data_source s = {.path = td_path("z.npz")};
    rt_dataset tr, te;
    char err[512] = "";
    int rc = rt_data_source_load(&s, NULL, &tr, &te, err, sizeof err);
    td_expect_err(rc, FERRY_ECORRUPT, err, td_path("z.npz"));
    cr_expect(strstr(err, "not a readable .npz"), "%s", err);
}

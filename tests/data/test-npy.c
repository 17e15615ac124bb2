/* tests/data — .npy files: every element type converted to float, big
 * endian handled, and every refusal (Fortran order, object arrays, an
 * unread type, a header beyond the cap, a truncated file) naming the file
 * and what is wrong. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/data_int.h"
#include "tdata.h"
#include "tfiles.h"

static rt_data_source plain(const char *x, const char *y)
{
    return (rt_data_source){.path = x, .labels = y, .normalize = "none", .seed = 1};
}

/* Four samples of two features and their labels 0, 1, 2, 1. */
static void write_pair(const char *descr, const void *x, size_t xbytes)
{
    uint64_t shape[] = {4, 2}, yshape[] = {4};
    int64_t y[] = {0, 1, 2, 1};
    tf_write_npy(td_path("x.npy"), descr, shape, 2, x, xbytes);
    tf_write_npy(td_path("y.npy"), "<i8", yshape, 1, y, sizeof y);
}

static void expect_values(const char *descr, const void *x, size_t xbytes)
{
    write_pair(descr, x, xbytes);
    rt_data_source s = plain(td_path("x.npy"), td_path("y.npy"));
    s.test_path = s.path;
    s.test_labels = s.labels;
    rt_dataset tr, te;
    char err[512] = "";
    cr_assert_eq(rt_data_source_load(&s, NULL, &tr, &te, err, sizeof err), 0, "%s: %s",
                 descr, err);
    cr_assert_eq(tr.n, 4);
    cr_assert_eq(tr.features, 2);
    cr_assert_eq(tr.classes, 3);
    float got[8];
    for (size_t r = 0; r < 4; r++)
        rt_dataset_row(&tr, r, got + 2 * r);
    for (int i = 0; i < 8; i++)
        cr_expect_float_eq(got[i], (float)(i - 3), 1e-6, "%s[%d] = %g", descr, i, got[i]);
    cr_expect_eq(tr.labels[2], 2);
    rt_dataset_free(&tr);
    rt_dataset_free(&te);
}

TD_TEST(npy, every_element_type_is_converted_to_float)
{
    int8_t i1[] = {-3, -2, -1, 0, 1, 2, 3, 4};
    int16_t i2[] = {-3, -2, -1, 0, 1, 2, 3, 4};
    int32_t i4[] = {-3, -2, -1, 0, 1, 2, 3, 4};
    int64_t i8[] = {-3, -2, -1, 0, 1, 2, 3, 4};
    float f4[] = {-3, -2, -1, 0, 1, 2, 3, 4};
    double f8[] = {-3, -2, -1, 0, 1, 2, 3, 4};
    /* float16: -3 -2 -1 0 1 2 3 4 */
    uint16_t f2[] = {0xc200, 0xc000, 0xbc00, 0x0000, 0x3c00, 0x4000, 0x4200, 0x4400};
    expect_values("|i1", i1, sizeof i1);
    expect_values("<i2", i2, sizeof i2);
    expect_values("<i4", i4, sizeof i4);
    expect_values("<i8", i8, sizeof i8);
    expect_values("<f2", f2, sizeof f2);
    expect_values("<f4", f4, sizeof f4);
    expect_values("<f8", f8, sizeof f8);
    /* Big-endian int32: the bytes swapped. */
    uint8_t be[32];
    for (int i = 0; i < 8; i++) {
        uint32_t v = (uint32_t)(i - 3);
        be[4 * i] = (uint8_t)(v >> 24);
        be[4 * i + 1] = (uint8_t)(v >> 16);
        be[4 * i + 2] = (uint8_t)(v >> 8);
        be[4 * i + 3] = (uint8_t)v;
    }
    expect_values(">i4", be, sizeof be);
}

TD_TEST(npy, unsigned_bytes_keep_their_values_and_the_file_stays_mapped)
{
    uint8_t x[] = {0, 255, 7, 9, 1, 2, 3, 4};
    write_pair("|u1", x, sizeof x);
    rt_array a;
    char err[512] = "";
    cr_assert_eq(rt_npy_read(td_path("x.npy"), &a, err, sizeof err), 0, "%s", err);
    cr_expect(a.map != NULL && a.owned == NULL, "an .npy is read through a mapping");
    cr_expect_eq(a.ndims, 2);
    float f[8];
    rt_array_floats(&a, 0, 8, f);
    cr_expect_float_eq(f[1], 255.0f, 0);
    rt_array_free(&a);
}

static void expect_refused(const char *dict, const char *want)
{
    size_t n;
    float x[8] = {0};
    uint8_t *b = tf_npy(NULL, NULL, 0, x, sizeof x, dict, &n);
    td_write(td_path("bad.npy"), b, n);
    free(b);
    rt_array a;
    char err[512] = "";
    int rc = rt_npy_read(td_path("bad.npy"), &a, err, sizeof err);
    td_expect_err(rc, FERRY_ECORRUPT, err, td_path("bad.npy"));
    cr_expect(strstr(err, want), "want \"%s\" in: %s", want, err);
}

TD_TEST(npy, fortran_order_objects_and_unread_types_are_refused_by_name)
{
    expect_refused("{'descr': '<f4', 'fortran_order': True, 'shape': (4, 2), }",
                   "Fortran order");
    expect_refused("{'descr': '|O', 'fortran_order': False, 'shape': (4,), }",
                   "never unpickled");
    expect_refused("{'descr': '<u2', 'fortran_order': False, 'shape': (4,), }", "'<u2'");
    expect_refused("{'descr': '<c8', 'fortran_order': False, 'shape': (4,), }",
                   "element type");
    expect_refused("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }",
                   "structured");
    expect_refused("{'descr': '<f4', 'shape': (4, 2), }", "lacks");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2), "
                   "'evil': __import__('os'), }",
                   "known keys");
}

TD_TEST(npy, a_header_beyond_the_cap_is_refused_before_it_is_read)
{
    uint8_t b[16] = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0};
    uint32_t big = 1u << 30; /* a 1 GiB header */
    b[8] = (uint8_t)big;
    b[9] = (uint8_t)(big >> 8);
    b[10] = (uint8_t)(big >> 16);
    b[11] = (uint8_t)(big >> 24);
    td_write(td_path("big.npy"), b, sizeof b);
    rt_array a;
    char err[512] = "";
    int rc = rt_npy_read(td_path("big.npy"), &a, err, sizeof err);
    td_expect_err(rc, FERRY_ECORRUPT, err, td_path("big.npy"));
    cr_expect(strstr(err, "1073741824") && strstr(err, "cap of 65536"), "%s", err);
}

TD_TEST(npy, a_truncated_file_says_expected_and_found_bytes)
{
    uint64_t shape[] = {4, 2};
    float x[8] = {0};
    size_t n;
    uint8_t *b = tf_npy("<f4", shape, 2, x, sizeof x, NULL, &n);
    td_write(td_path("cut.npy"), b, n - 5);
    free(b);
    rt_array a;
    char err[512] = "";
    int rc = rt_npy_read(td_path("cut.npy"), &a, err, sizeof err);
    td_expect_err(rc, FERRY_ECORRUPT, err, td_path("cut.npy"));
    char want[64];
    snprintf(want, sizeof want, "%zu bytes expected, %zu found", n, n - 5);
    cr_expect(strstr(err, "truncated") && strstr(err, want), "%s", err);
}

TD_TEST(npy, an_empty_file_and_a_foreign_one_are_not_npy)
{
    td_write(td_path("e.npy"), "", 0);
    td_write(td_path("f.npy"), "hello world", 11);
    rt_array a;
    char err[512] = "";
    td_expect_err(rt_npy_read(td_path("e.npy"), &a, err, sizeof err), FERRY_ECORRUPT, err,
                  td_path("e.npy"));
    cr_expect(strstr(err, "empty"), "%s", err);
    td_expect_err(rt_npy_read(td_path("f.npy"), &a, err, sizeof err), FERRY_ECORRUPT, err,
                  td_path("f.npy"));
    cr_expect(strstr(err, "magic"), "%s", err);
}

TD_TEST(npy, samples_and_labels_of_different_lengths_give_both_counts)
{
    uint64_t shape[] = {4, 2}, yshape[] = {3};
    float x[8] = {0};
    int64_t y[3] = {0, 1, 0};
    tf_write_npy(td_path("x.npy"), "<f4", shape, 2, x, sizeof x);
    tf_write_npy(td_path("y.npy"), "<i8", yshape, 1, y, sizeof y);
    rt_data_source s = plain(td_path("x.npy"), td_path("y.npy"));
    rt_dataset tr, te;
    char err[512] = "";
    int rc = rt_data_source_load(&s, NULL, &tr, &te, err, sizeof err);
    td_expect_err(rc, FERRY_EINVAL, err, td_path("x.npy"));
    cr_expect(strstr(err, "4 samples but 3 labels"), "%s", err);
}

/* Loads x.npy (4 x 2 floats) with labels y, training and test alike;
 * returns the error. */
static int load_four(const float *x, const int64_t *y, char *err, size_t errlen)
{
    uint64_t shape[] = {4, 2}, yshape[] = {4};
    tf_write_npy(td_path("x.npy"), "<f4", shape, 2, x, 8 * sizeof *x);
    tf_write_npy(td_path("y.npy"), "<i8", yshape, 1, y, 4 * sizeof *y);
    rt_data_source s = plain(td_path("x.npy"), td_path("y.npy"));
    s.test_path = s.path;
    s.test_labels = s.labels;
    rt_dataset tr, te;
    int rc = rt_data_source_load(&s, NULL, &tr, &te, err, errlen);
    if (rc == 0) {
        rt_dataset_free(&tr);
        rt_dataset_free(&te);
    }
    return rc;
}

TD_TEST(npy, nan_and_infinity_are_refused_with_their_count_and_first_place)
{
    float x[8] = {0, 1, 2, NAN, 4, INFINITY, 6, 7};
    int64_t y[4] = {0, 1, 0, 1};
    char err[512] = "";
    td_expect_err(load_four(x, y, err, sizeof err), FERRY_ECORRUPT, err, td_path("x.npy"));
    cr_expect(strstr(err, "2 NaN or infinite") && strstr(err, "sample 1, number 1"), "%s",
              err);
}

TD_TEST(npy, negative_labels_are_refused)
{
    float x[8] = {0};
    int64_t y[4] = {0, 1, -1, 1};
    char err[512] = "";
    td_expect_err(load_four(x, y, err, sizeof err), FERRY_EINVAL, err, td_path("x.npy"));
    cr_expect(strstr(err, "label -1 of sample 2"), "%s", err);
}

TD_TEST(npy, samples_without_labels_ask_for_them)
{
    uint64_t shape[] = {4, 2};
    float x[8] = {0};
    tf_write_npy(td_path("x.npy"), "<f4", shape, 2, x, sizeof x);
    rt_data_source s = plain(td_path("x.npy"), NULL);
    rt_dataset tr, te;
    char err[512] = "";
    int rc = rt_data_source_load(&s, NULL, &tr, &te, err, sizeof err);
    td_expect_err(rc, FERRY_EINVAL, err, td_path("x.npy"));
    cr_expect(strstr(err, "--labels"), "%s", err);
}

/* tests/params — a run's parameters as safetensors: what is written reads
 * back the same, byte for byte where the format fixes it, and a file that
 * is cut short, foreign or lies about its tensors is refused with a
 * message naming the file and what is wrong, before anything is handed
 * out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <ferry/ferry.h>

#include "cluster/params/params.h"

static char dir[64];
static char path[128];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/ferry-params-XXXXXX");
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/p.safetensors", dir);
}

static void teardown(void)
{
    unlink(path);
    rmdir(dir);
}

TestSuite(params, .init = setup, .fini = teardown);

static const char *const names[] = {"fc.weight", "fc.bias"};
static const uint32_t shapes[] = {3, 2, 0, 0, 2, 0, 0, 0};
static const float values[] = {1, 2, 3, 4, 5, 6, -1, -2};

static void save_two(void)
{
    cluster_tensors t = {2, names, shapes, values, 8};
    params_meta meta[] = {{"model", "tiny"}, {"test_accuracy", "0.5"}};
    char err[512] = "";
    cr_assert_eq(params_save(path, &t, meta, 2, err, sizeof err), 0, "%s", err);
}

/* The file's bytes, for tests that alter them. */
static uint8_t *file_bytes(size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*len + 1);
    cr_assert_eq(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

static void write_bytes(const void *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(b, 1, len, f), len);
    fclose(f);
}

/* A file of header `json` (its length written before it) and `vbytes`
 * bytes of values. */
static void write_header(const char *json, size_t vbytes)
{
    size_t n = strlen(json);
    uint8_t *b = calloc(1, 8 + n + vbytes + 1);
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(b + 8, json, n);
    write_bytes(b, 8 + n + vbytes);
    free(b);
}

static void expect_refused(int want, const char *needle)
{
    params_file f;
    char err[512] = "";
    cr_expect_eq(params_load(path, &f, err, sizeof err), want, "%s", err);
    cr_expect(strstr(err, needle), "'%s' not in: %s", needle, err);
    cr_expect(strstr(err, path), "the file is not named: %s", err);
    cr_expect_null(f.own);
}

Test(params, what_is_saved_reads_back_the_same)
{
    save_two();
    params_file f;
    char err[512] = "";
    cr_assert_eq(params_load(path, &f, err, sizeof err), 0, "%s", err);
    cr_assert_eq(f.t.n, 2);
    cr_assert_str_eq(f.t.names[0], "fc.weight");
    cr_assert_str_eq(f.t.names[1], "fc.bias");
    cr_assert_eq(memcmp(f.t.shapes, shapes, sizeof shapes), 0);
    cr_assert_eq(f.t.floats, 8);
    cr_assert_eq(memcmp(f.t.values, values, sizeof values), 0);
    cr_assert_str_eq(params_meta_get(&f, "model"), "tiny");
    cr_assert_str_eq(params_meta_get(&f, "test_accuracy"), "0.5");
    cr_assert_null(params_meta_get(&f, "nothing"));
    params_file_free(&f);
}

Test(params, the_layout_is_the_formats)
{
    save_two();
    size_t len;
    uint8_t *b = file_bytes(&len);
    uint64_t n = 0;
    for (int i = 0; i < 8; i++)
        n |= (uint64_t)b[i] << (8 * i);
    cr_assert_eq(n % 8, 0, "the values start on an 8-byte boundary");
    cr_assert_eq(len, 8 + n + sizeof values, "nothing but the header and the values");
    cr_assert_eq(memcmp(b + 8 + n, values, sizeof values), 0, "float32 as they lie");
    char *h = strndup((char *)b + 8, n);
    cr_assert(strstr(h, "\"fc.weight\":{\"dtype\":\"F32\",\"shape\":[3,2],"
                        "\"data_offsets\":[0,24]}"),
              "%s", h);
    cr_assert(strstr(h, "\"fc.bias\":{\"dtype\":\"F32\",\"shape\":[2],"
                        "\"data_offsets\":[24,32]}"),
              "%s", h);
    cr_assert(strstr(h, "\"__metadata__\":{\"model\":\"tiny\""), "%s", h);
    free(h);
    free(b);
}

Test(params, a_missing_file_is_enoent)
{
    expect_refused(FERRY_ENOENT, "cannot open");
}

Test(params, a_file_too_short_for_a_header_is_refused)
{
    write_bytes("abc", 3);
    expect_refused(FERRY_ECORRUPT, "too few for a header");
}

Test(params, a_file_cut_short_is_refused)
{
    save_two();
    size_t len;
    uint8_t *b = file_bytes(&len);
    write_bytes(b, 40); /* the header claims more than is left */
    free(b);
    expect_refused(FERRY_ECORRUPT, "cut short");
}

Test(params, values_cut_short_are_refused)
{
    save_two();
    size_t len;
    uint8_t *b = file_bytes(&len);
    write_bytes(b, len - 4);
    free(b);
    expect_refused(FERRY_ECORRUPT, "'fc.bias' claims bytes 24..32 of the 28");
}

Test(params, a_header_that_is_not_json_is_refused)
{
    write_header("{not json", 0);
    expect_refused(FERRY_ECORRUPT, "not a JSON object");
    write_header("[1,2]", 0);
    expect_refused(FERRY_ECORRUPT, "not a JSON object");
}

Test(params, a_dtype_other_than_f32_is_refused_by_name)
{
    write_header("{\"w\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4);
    expect_refused(FERRY_EINVAL, "'w' is BF16: ferry reads float32 (F32) only");
}

Test(params, more_than_four_dimensions_are_refused)
{
    write_header(
        "{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", 4);
    expect_refused(FERRY_EINVAL, "has 5 dimensions");
}

Test(params, a_byte_range_that_does_not_match_the_shape_is_refused)
{
    write_header("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 12);
    expect_refused(FERRY_ECORRUPT, "where its shape takes 12");
}

Test(params, a_bad_dimension_or_a_missing_field_is_refused)
{
    write_header("{\"w\":{\"dtype\":\"F32\",\"shape\":[-3],\"data_offsets\":[0,12]}}",
                 12);
    expect_refused(FERRY_ECORRUPT, "not a positive integer");
    write_header("{\"w\":{\"dtype\":\"F32\",\"shape\":[3]}}", 12);
    expect_refused(FERRY_ECORRUPT, "lacks a dtype, a shape or its data_offsets");
}

Test(params, a_header_beyond_the_cap_is_refused_before_it_is_read)
{
    uint8_t b[16] = {0};
    uint64_t n = (uint64_t)PARAMS_MAX_HEADER + 1;
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(n >> (8 * i));
    write_bytes(b, sizeof b);
    expect_refused(FERRY_ECORRUPT, "its header claims");
}

Test(params, duplicate_names_are_refused)
{
    write_header("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                 "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                 4);
    expect_refused(FERRY_ECORRUPT, "not a JSON object");
}

/* tests/data — the fixture: a private temp dir per test, writers for the
 * IDX and gzip files the tests damage, and the check that ends each test
 * (temp dir removed, no leaks). */
#ifndef FERRY_TESTS_DATA_TDATA_H
#define FERRY_TESTS_DATA_TDATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <criterion/criterion.h>

#include "ferry/error.h"
#include "runtime/data/data.h"

/* The test's private directory (mkdtemp), made on first use. */
const char *td_dir(void);
/* td_dir()/name in a static buffer of one of 4 rotating slots. */
const char *td_path(const char *name);

/* An IDX header (magic 0 0 type ndims, big-endian dims) followed by `data`
 * (len bytes) in a malloc'ed buffer of *out_len bytes. */
uint8_t *td_idx_bytes(uint8_t type, int ndims, const uint32_t *dims, const uint8_t *data,
                      size_t len, size_t *out_len);
/* Writes bytes as they are, or gzip-compressed (zlib's gzwrite). */
void td_write(const char *path, const void *bytes, size_t len);
void td_write_gz(const char *path, const void *bytes, size_t len);
/* The whole file, malloc'ed; *len its size. */
uint8_t *td_read(const char *path, size_t *len);
/* The decompressed contents of a gzip file, read with zlib by the test
 * itself (not through rt_idx_read). */
uint8_t *td_gunzip(const char *path, size_t *len);

/* Skips the test unless Debian's dataset-fashion-mnist is installed (under
 * CI=true fails it: CI installs it). */
void td_need_fmnist(void);

/* Asserts rc == want and that err names `path`. */
void td_expect_err(int rc, int want, const char *err, const char *path);

void td_teardown(void);
/* Removes the temp dir and asserts no leak (sanitizer builds). */
void td_finish(void);

/* Test() whose body ends with td_finish(); .fini cleans up after a failure.
 * The timeout only turns a hung loader into a failure (the slowest test, the
 * real training set under ASan, takes a few seconds). */
#define TD_TEST(suite, name, ...)                                                        \
    static void td_body_##suite##_##name(void);                                          \
    Test(suite, name, .fini = td_teardown, .timeout = 60, ##__VA_ARGS__)                 \
    {                                                                                    \
        td_body_##suite##_##name();                                                      \
        td_finish();                                                                     \
    }                                                                                    \
    static void td_body_##suite##_##name(void)

#endif

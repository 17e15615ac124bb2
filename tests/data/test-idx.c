/* tests/data — rt_idx_read on good files, plain and gzip, and on every way
 * a file can be missing, damaged or cut short: each error has its exact
 * code and names the file. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tdata.h"

/* A gzip'd IDX file of 3 x 100 x 100 pseudo-random bytes: big enough that
 * its compressed stream spans many deflate blocks. */
static const char *write_sample_gz(const char *name, uint8_t **data_out)
{
    uint32_t dims[3] = {3, 100, 100};
    size_t len = 3 * 100 * 100, flen;
    uint8_t *data = malloc(len);
    cr_assert(data);
    uint32_t x = 12345;
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245u + 12345u;
        data[i] = (uint8_t)(x >> 24);
    }
    uint8_t *file = td_idx_bytes(0x08, 3, dims, data, len, &flen);
    const char *path = td_path(name);
    td_write_gz(path, file, flen);
    free(file);
    if (data_out)
        *data_out = data;
    else
        free(data);
    return path;
}

static int read_expecting_failure(const char *path, char *err, size_t errlen)
{
    rt_idx idx;
    int rc = rt_idx_read(path, &idx, err, errlen);
    cr_expect_null(idx.data, "a failed read leaves no data");
    return rc;
}

TD_TEST(idx, reads_a_plain_file_with_its_dims_and_bytes)
{
    uint32_t dims[2] = {4, 3};
    uint8_t data[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 250, 255};
    size_t flen;
    uint8_t *file = td_idx_bytes(0x08, 2, dims, data, sizeof data, &flen);
    const char *path = td_path("plain.idx");
    td_write(path, file, flen);
    free(file);

    rt_idx idx;
    char err[256] = "";
    cr_assert_eq(rt_idx_read(path, &idx, err, sizeof err), 0, "%s", err);
    cr_expect_eq(idx.ndims, 2);
    cr_expect_eq(idx.dims[0], 4);
    cr_expect_eq(idx.dims[1], 3);
    cr_expect_eq(idx.len, 12);
    cr_expect_arr_eq(idx.data, data, sizeof data);
    rt_idx_free(&idx);
    cr_expect_null(idx.data);
    rt_idx_free(NULL);
}

TD_TEST(idx, reads_a_gzip_file_the_same_as_its_contents)
{
    uint8_t *data;
    const char *path = write_sample_gz("sample.idx.gz", &data);
    rt_idx idx;
    char err[256] = "";
    cr_assert_eq(rt_idx_read(path, &idx, err, sizeof err), 0, "%s", err);
    cr_expect_eq(idx.ndims, 3);
    cr_expect_eq(idx.dims[0], 3);
    cr_expect_eq(idx.dims[1], 100);
    cr_expect_eq(idx.dims[2], 100);
    cr_assert_eq(idx.len, 30000);
    cr_expect_arr_eq(idx.data, data, idx.len);
    rt_idx_free(&idx);
    free(data);
}

TD_TEST(idx, reads_a_file_whose_size_is_zero_along_a_dimension)
{
    uint32_t dims[3] = {0, 28, 28};
    size_t flen;
    uint8_t *file = td_idx_bytes(0x08, 3, dims, NULL, 0, &flen);
    const char *path = td_path("none.idx");
    td_write(path, file, flen);
    free(file);
    rt_idx idx;
    char err[256] = "";
    cr_assert_eq(rt_idx_read(path, &idx, err, sizeof err), 0, "%s", err);
    cr_expect_eq(idx.len, 0);
    cr_expect_eq(idx.dims[1], 28);
    rt_idx_free(&idx);
}

TD_TEST(idx, a_missing_file_is_enoent_naming_it)
{
    char err[256] = "";
    const char *path = td_path("no-such-file.gz");
    td_expect_err(read_expecting_failure(path, err, sizeof err), FERRY_ENOENT, err, path);
}

TD_TEST(idx, a_directory_is_an_io_error_naming_it)
{
    char err[256] = "";
    const char *path = td_dir();
    td_expect_err(read_expecting_failure(path, err, sizeof err), FERRY_EIO, err, path);
}

/* A FIFO blocks an open for reading until a writer comes: the reader must
 * refuse it at once, not hang its training forever. */
TD_TEST(idx, a_fifo_is_refused_at_once_not_waited_on)
{
    char err[256] = "";
    const char *path = td_path("train-images-idx3-ubyte.gz");
    cr_assert(mkfifo(path, 0600) == 0);
    td_expect_err(read_expecting_failure(path, err, sizeof err), FERRY_EIO, err, path);
    cr_assert(strstr(err, "not a regular file"), "%s", err);
}

TD_TEST(idx, an_empty_file_is_corrupt)
{
    char err[256] = "";
    const char *path = td_path("empty.gz");
    td_write(path, "", 0);
    td_expect_err(read_expecting_failure(path, err, sizeof err), FERRY_ECORRUPT, err,
                  path);
    cr_expect(strstr(err, "empty") != NULL, "%s", err);
}

TD_TEST(idx, a_wrong_magic_is_corrupt)
{
    char err[256] = "";
    const char *path = td_path("magic.idx");
    uint8_t bytes[] = {0x1f, 0x8c, 0x08, 0x01, 0, 0, 0, 1, 7};
    td_write(path, bytes, sizeof bytes);
    td_expect_err(read_expecting_failure(path, err, sizeof err), FERRY_ECORRUPT, err,
                  path);
    cr_expect(strstr(err, "not an IDX file") != NULL, "%s", err);
}

TD_TEST(idx, a_type_other_than_unsigned_bytes_is_corrupt)
{
    char err[256] = "";
    uint32_t dims[1] = {1};
    uint8_t four[4] = {0};
    size_t flen;
    uint8_t *file = td_idx_bytes(0x0d, 1, dims, four, sizeof four, &flen); /* float */
    const char *path = td_path("float.idx.gz");
    td_write_gz(path, file, flen);
    free(file);
    td_expect_err(read_expecting_failure(path, err, sizeof err), FERRY_ECORRUPT, err,
                  path);
    cr_expect(strstr(err, "0x0d") != NULL, "%s", err);
}

TD_TEST(idx, zero_or_too_many_dimensions_are_corrupt)
{
    uint32_t dims[5] = {1, 1, 1, 1, 1};
    uint8_t one = 1;
    int counts[2] = {0, 5};
    for (int i = 0; i < 2; i++) {
        char err[256] = "";
        size_t flen;
        uint8_t *file = td_idx_bytes(0x08, counts[i], dims, &one, 1, &flen);
        const char *path = td_path(i ? "five.idx" : "zero.idx");
        td_write(path, file, flen);
        free(file);
        td_expect_err(read_expecting_failure(path, err, sizeof err), FERRY_ECORRUPT, err,
                      path);
        cr_expect(strstr(err, "dimensions") != NULL, "%s", err);
    }
}

TD_TEST(idx, dimensions_that_overflow_are_corrupt)
{
    char err[256] = "";
    uint32_t dims[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 2};
    size_t flen;
    uint8_t *file = td_idx_bytes(0x08, 4, dims, NULL, 0, &flen);
    const char *path = td_path("huge.idx");
    td_write(path, file, flen);
    free(file);
    td_expect_err(read_expecting_failure(path, err, sizeof err), FERRY_ECORRUPT, err,
                  path);
    cr_expect(strstr(err, "overflow") != NULL, "%s", err);
}

TD_TEST(idx, a_header_cut_short_is_corrupt)
{
    char err[256] = "";
    uint8_t bytes[] = {0, 0, 0x08, 3, 0, 0, 0, 2, 0, 0}; /* 3 dims, 1.5 given */
    const char *path = td_path("short-header.idx");
    td_write(path, bytes, sizeof bytes);
    td_expect_err(read_expecting_failure(path, err, sizeof err), FERRY_ECORRUPT, err,
                  path);
    cr_expect(strstr(err, "truncated") != NULL, "%s", err);
}

TD_TEST(idx, a_header_promising_more_data_than_there_is_is_truncated)
{
    char err[256] = "";
    uint32_t dims[2] = {10, 10};
    uint8_t data[60] = {0};
    size_t flen;
    uint8_t *file = td_idx_bytes(0x08, 2, dims, data, sizeof data, &flen);
    const char *path = td_path("short.idx");
    td_write(path, file, flen);
    free(file);
    td_expect_err(read_expecting_failure(path, err, sizeof err), FERRY_ECORRUPT, err,
                  path);
    cr_expect(strstr(err, "truncated") != NULL, "%s", err);
    cr_expect(strstr(err, "100") != NULL && strstr(err, "60") != NULL,
              "says what was promised and what is there: %s", err);
}

TD_TEST(idx, data_beyond_what_the_header_promises_is_corrupt)
{
    char err[256] = "";
    uint32_t dims[1] = {4};
    uint8_t data[5] = {1, 2, 3, 4, 5};
    size_t flen;
    uint8_t *file = td_idx_bytes(0x08, 1, dims, data, sizeof data, &flen);
    const char *path = td_path("long.idx.gz");
    td_write_gz(path, file, flen);
    free(file);
    td_expect_err(read_expecting_failure(path, err, sizeof err), FERRY_ECORRUPT, err,
                  path);
    cr_expect(strstr(err, "more data") != NULL, "%s", err);
}

TD_TEST(idx, a_gzip_file_cut_in_half_is_corrupt)
{
    const char *whole = write_sample_gz("whole.idx.gz", NULL);
    size_t len;
    uint8_t *z = td_read(whole, &len);
    const char *path = td_path("half.idx.gz");
    td_write(path, z, len / 2);
    free(z);
    char err[256] = "";
    td_expect_err(read_expecting_failure(path, err, sizeof err), FERRY_ECORRUPT, err,
                  path);
    cr_expect(strstr(err, "gzip") != NULL, "%s", err);
}

TD_TEST(idx, a_gzip_file_missing_only_its_trailer_is_corrupt)
{
    /* Every data byte is there; the stream's CRC and length are not. */
    const char *whole = write_sample_gz("whole.idx.gz", NULL);
    size_t len;
    uint8_t *z = td_read(whole, &len);
    const char *path = td_path("no-trailer.idx.gz");
    td_write(path, z, len - 8);
    free(z);
    char err[256] = "";
    td_expect_err(read_expecting_failure(path, err, sizeof err), FERRY_ECORRUPT, err,
                  path);
}

TD_TEST(idx, a_wrong_gzip_crc_is_corrupt)
{
    const char *whole = write_sample_gz("whole.idx.gz", NULL);
    size_t len;
    uint8_t *z = td_read(whole, &len);
    z[len - 8] ^= 0xff; /* the trailer's CRC-32 */
    const char *path = td_path("crc.idx.gz");
    td_write(path, z, len);
    free(z);
    char err[256] = "";
    td_expect_err(read_expecting_failure(path, err, sizeof err), FERRY_ECORRUPT, err,
                  path);
    cr_expect(strstr(err, "incorrect data check") != NULL, "zlib's reason: %s", err);
    cr_expect(strstr(err, "<fd:") == NULL, "no descriptor in the text: %s", err);
}

TD_TEST(idx, flipped_bytes_inside_a_gzip_stream_are_corrupt)
{
    const char *whole = write_sample_gz("whole.idx.gz", NULL);
    size_t len;
    uint8_t *z = td_read(whole, &len);
    for (size_t i = len / 2; i < len / 2 + 16; i++)
        z[i] ^= 0x5a;
    const char *path = td_path("flipped.idx.gz");
    td_write(path, z, len);
    free(z);
    char err[256] = "";
    td_expect_err(read_expecting_failure(path, err, sizeof err), FERRY_ECORRUPT, err,
                  path);
}

TD_TEST(idx, the_real_training_labels_cut_in_half_are_corrupt)
{
    td_need_fmnist();
    size_t len;
    uint8_t *z = td_read(RT_FMNIST_DIR "/train-labels-idx1-ubyte.gz", &len);
    const char *path = td_path("train-labels-idx1-ubyte.gz");
    td_write(path, z, len / 2);
    char err[256] = "";
    td_expect_err(read_expecting_failure(path, err, sizeof err), FERRY_ECORRUPT, err,
                  path);
    z[len / 2] ^= 0x01;
    td_write(path, z, len);
    free(z);
    td_expect_err(read_expecting_failure(path, err, sizeof err), FERRY_ECORRUPT, err,
                  path);
}

TD_TEST(idx, an_error_text_fits_a_short_buffer_and_a_null_one)
{
    char err[8];
    const char *path = td_path("missing");
    rt_idx idx;
    cr_expect_eq(rt_idx_read(path, &idx, err, sizeof err), FERRY_ENOENT);
    cr_expect_eq(strlen(err), sizeof err - 1);
    cr_expect_eq(rt_idx_read(path, &idx, NULL, 0), FERRY_ENOENT);
    cr_expect_eq(rt_idx_read(NULL, &idx, NULL, 0), FERRY_EINVAL);
}

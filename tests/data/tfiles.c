/* tests/data — the user-file writers. */
#include "tfiles.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <zip.h>

#include "tdata.h"

uint8_t *tf_npy(const char *descr, const uint64_t *shape, int ndims, const void *data,
                size_t len, const char *dict, size_t *out_len)
{
    char hdr[512];
    int used;
    if (dict) {
        used = snprintf(hdr, sizeof hdr, "%s", dict);
    } else {
        used = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                        descr);
        for (int i = 0; i < ndims; i++)
            used += snprintf(hdr + used, sizeof hdr - (size_t)used, "%llu,%s",
                             (unsigned long long)shape[i], i + 1 < ndims ? " " : "");
        used += snprintf(hdr + used, sizeof hdr - (size_t)used, "), }");
    }
    /* NumPy pads the header with spaces and a newline to a multiple of 64. */
    size_t total = 10 + (size_t)used + 1;
    size_t padded = (total + 63) / 64 * 64;
    uint8_t *b = malloc(padded + len + 1);
    cr_assert(b);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    size_t hl = padded - 10;
    b[8] = (uint8_t)hl;
    b[9] = (uint8_t)(hl >> 8);
    memcpy(b + 10, hdr, (size_t)used);
    memset(b + 10 + used, ' ', padded - 10 - (size_t)used);
    b[padded - 1] = '\n';
    if (len)
        memcpy(b + padded, data, len);
    *out_len = padded + len;
    return b;
}

void tf_write_npy(const char *path, const char *descr, const uint64_t *shape, int ndims,
                  const void *data, size_t len)
{
    size_t n;
    uint8_t *b = tf_npy(descr, shape, ndims, data, len, NULL, &n);
    td_write(path, b, n);
    free(b);
}

void tf_write_zip(const char *path, int n, const char *const *names,
                  const uint8_t *const *bytes, const size_t *lens, bool deflate)
{
    int zerr;
    zip_t *z = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &zerr);
    cr_assert(z, "zip_open %s: %d", path, zerr);
    for (int i = 0; i < n; i++) {
        zip_source_t *s = zip_source_buffer(z, bytes[i], lens[i], 0);
        cr_assert(s);
        zip_int64_t idx = zip_file_add(z, names[i], s, ZIP_FL_OVERWRITE);
        cr_assert(idx >= 0);
        cr_assert(zip_set_file_compression(z, (zip_uint64_t)idx,
                                           deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0) == 0);
    }
    cr_assert(zip_close(z) == 0, "zip_close: %s", zip_strerror(z));
}

void tf_write_text(const char *path, const char *text)
{
    td_write(path, text, strlen(text));
}

/* tests/data — the fixture's helpers. */
#include "tdata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "tcommon.h"

static char dir[64];

const char *td_dir(void)
{
    if (!dir[0]) {
        strcpy(dir, "/tmp/ferry-data-XXXXXX");
        cr_assert(mkdtemp(dir) != NULL, "mkdtemp failed");
    }
    return dir;
}

const char *td_path(const char *name)
{
    static char bufs[4][256];
    static int next;
    char *b = bufs[next++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", td_dir(), name);
    return b;
}

uint8_t *td_idx_bytes(uint8_t type, int ndims, const uint32_t *dims, const uint8_t *data,
                      size_t len, size_t *out_len)
{
    size_t head = 4 + 4 * (size_t)ndims;
    uint8_t *b = malloc(head + len + 1);
    cr_assert(b);
    b[0] = 0;
    b[1] = 0;
    b[2] = type;
    b[3] = (uint8_t)ndims;
    for (int i = 0; i < ndims; i++) {
        b[4 + 4 * i] = (uint8_t)(dims[i] >> 24);
        b[5 + 4 * i] = (uint8_t)(dims[i] >> 16);
        b[6 + 4 * i] = (uint8_t)(dims[i] >> 8);
        b[7 + 4 * i] = (uint8_t)dims[i];
    }
    if (len)
        memcpy(b + head, data, len);
    *out_len = head + len;
    return b;
}

void td_write(const char *path, const void *bytes, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f, "cannot create %s", path);
    cr_assert(len == 0 || fwrite(bytes, 1, len, f) == len);
    cr_assert(fclose(f) == 0);
}

void td_write_gz(const char *path, const void *bytes, size_t len)
{
    gzFile gz = gzopen(path, "wb");
    cr_assert(gz, "cannot create %s", path);
    cr_assert(len == 0 || gzwrite(gz, bytes, (unsigned)len) == (int)len);
    cr_assert(gzclose(gz) == Z_OK);
}

uint8_t *td_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    cr_assert(fseek(f, 0, SEEK_END) == 0);
    long n = ftell(f);
    cr_assert(n >= 0);
    rewind(f);
    uint8_t *b = malloc((size_t)n + 1);
    cr_assert(b);
    cr_assert(fread(b, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

uint8_t *td_gunzip(const char *path, size_t *len)
{
    size_t zlen;
    uint8_t *z = td_read(path, &zlen);
    z_stream s = {0};
    cr_assert(inflateInit2(&s, 16 + MAX_WBITS) == Z_OK);
    size_t cap = zlen * 4 + 1024, used = 0;
    uint8_t *out = malloc(cap);
    cr_assert(out);
    s.next_in = z;
    s.avail_in = (uInt)zlen;
    int rc;
    do {
        if (used == cap) {
            cap *= 2;
            out = realloc(out, cap);
            cr_assert(out);
        }
        s.next_out = out + used;
        s.avail_out = (uInt)(cap - used);
        rc = inflate(&s, Z_NO_FLUSH);
        cr_assert(rc == Z_OK || rc == Z_STREAM_END, "inflate %s: %d", path, rc);
        used = cap - s.avail_out;
    } while (rc != Z_STREAM_END);
    inflateEnd(&s);
    free(z);
    *len = used;
    return out;
}

void td_need_fmnist(void)
{
    struct stat st;
    char p[256];
    snprintf(p, sizeof p, "%s/train-images-idx3-ubyte.gz", RT_FMNIST_DIR);
    if (stat(p, &st) != 0)
        tcom_skip_missing("dataset-fashion-mnist", p);
}

void td_expect_err(int rc, int want, const char *err, const char *path)
{
    cr_expect_eq(rc, want, "rc %s (%d), expected %s: %s", ferry_err_name(rc), rc,
                 ferry_err_name(want), err);
    cr_expect(strstr(err, path) != NULL, "error text does not name %s: %s", path, err);
}

void td_teardown(void)
{
    if (dir[0]) {
        tcom_rm_tree(dir);
        dir[0] = 0;
    }
}

void td_finish(void)
{
    td_teardown();
    tcom_assert_no_leaks();
}

/* runtime/data — IDX files of any element type and dimension count (the
 * format's 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32 and 0x0E f64,
 * big-endian), gzip or plain, for a user's own sets; Fashion-MNIST's
 * bytes go through idx.c's rt_idx_read. */
#include "data_int.h"

#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "ferry/error.h"

static bool idx_type(uint8_t code, rt_dtype *t)
{
    switch (code) {
    case 0x08: *t = RT_DT_U8; return true;
    case 0x09: *t = RT_DT_I8; return true;
    case 0x0B: *t = RT_DT_I16; return true;
    case 0x0C: *t = RT_DT_I32; return true;
    case 0x0D: *t = RT_DT_F32; return true;
    case 0x0E: *t = RT_DT_F64; return true;
    default: return false;
    }
}

int rt_idx_header(const char *name, const uint8_t *buf, size_t len, rt_array *a,
                  size_t *hdr_len, char *err, size_t errlen)
{
    int rc = rt_header_begin(name, len, "an IDX file", a, err, errlen);
    if (rc)
        return rc;
    if (len < 4)
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: truncated: 4 bytes of IDX magic expected, %zu found", name,
                         len);
    if (buf[0] != 0 || buf[1] != 0)
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: not an IDX file (magic %02x %02x %02x %02x)", name, buf[0],
                         buf[1], buf[2], buf[3]);
    if (!idx_type(buf[2], &a->type))
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: IDX element type 0x%02x, which is not one (0x08 u8, 0x09 "
                         "i8, 0x0b i16, 0x0c i32, 0x0d f32, 0x0e f64)",
                         name, buf[2]);
    a->swap = rt_dtype_size(a->type) > 1;
    if (buf[3] < 1 || buf[3] > RT_ARRAY_MAX_DIMS)
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: IDX with %u dimensions, 1 to %d are read", name, buf[3],
                         RT_ARRAY_MAX_DIMS);
    a->ndims = buf[3];
    size_t want = 4 + 4 * (size_t)a->ndims;
    if (len < want)
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: truncated: %zu bytes of IDX header expected, %zu found",
                         name, want, len);
    for (int i = 0; i < a->ndims; i++) {
        const uint8_t *b = buf + 4 + 4 * i;
        a->dims[i] = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 |
                     (uint32_t)b[3];
    }
    if (!rt_array_count(a))
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: IDX dimensions overflow the address space", name);
    *hdr_len = want;
    return 0;
}

/* Reads the header through gz: the magic first, then as many sizes as it
 * says. */
static int read_header(gzFile gz, const char *path, rt_array *a, char *err, size_t errlen)
{
    uint8_t hdr[4 + 4 * RT_ARRAY_MAX_DIMS];
    size_t got, hlen;
    if (rt_gz_read_full(gz, hdr, 4, NULL, &got) != 0) {
        int zerr = Z_OK;
        gzerror(gz, &zerr);
        if (zerr == Z_OK)
            return rt_idx_header(path, hdr, got, a, &hlen, err, errlen);
        return rt_gz_short_read(gz, path, "IDX magic", 4, got, err, errlen);
    }
    size_t dims = hdr[3] <= RT_ARRAY_MAX_DIMS ? hdr[3] : 0;
    if (dims && rt_gz_read_full(gz, hdr + 4, 4 * dims, NULL, &got) != 0)
        return rt_gz_short_read(gz, path, "IDX dimensions", 4 * dims, got, err, errlen);
    return rt_idx_header(path, hdr, 4 + 4 * dims, a, &hlen, err, errlen);
}

int rt_idx_read_array(const char *path, const rt_data_cancel *cancel, rt_array *out,
                      char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    gzFile gz;
    int rc = rt_gz_open(path, &gz, err, errlen);
    if (rc != 0)
        return rc;
    rt_array a;
    uint8_t *data = NULL;
    if ((rc = read_header(gz, path, &a, err, errlen)) != 0)
        goto out;
    size_t bytes = a.count * rt_dtype_size(a.type);
    if (!(data = rt_data_alloc(bytes ? bytes : 1))) {
        rc = base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory for %zu bytes", path,
                       bytes);
        goto out;
    }
    size_t got;
    int r = rt_gz_read_full(gz, data, bytes, cancel, &got);
    if (r != 0) {
        rc = r > 0 ? base_errf(err, errlen, FERRY_ECANCELED,
                               "%s: cancelled while reading it", path)
                   : rt_gz_short_read(gz, path, "IDX data", bytes, got, err, errlen);
        goto out;
    }
    uint8_t extra;
    if (gzread(gz, &extra, 1) > 0) {
        rc = base_errf(err, errlen, FERRY_ECORRUPT,
                       "%s: more data than the IDX header's %zu bytes", path, bytes);
        goto out;
    }
    a.data = data;
    a.owned = data;
    data = NULL;
    *out = a;
out:
    free(data);
    gzclose(gz);
    return rc;
}

/* runtime/data — a user's file, its format known from its first bytes
 * (NumPy's magic, a zip's, HDF5's, IDX's two zero bytes, gzip's) and else
 * from its name (.csv, .tsv), read into arrays or a CSV's table. */
#include "data_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ferry/error.h"

typedef enum fmt { FMT_NPY, FMT_NPZ, FMT_IDX, FMT_HDF5, FMT_CSV, FMT_UNKNOWN } fmt;

static bool ends(const char *s, const char *suffix)
{
    size_t l = strlen(s), k = strlen(suffix);
    return l >= k && strcasecmp(s + l - k, suffix) == 0;
}

static fmt by_name(const char *path)
{
    if (ends(path, ".npy"))
        return FMT_NPY;
    if (ends(path, ".npz"))
        return FMT_NPZ;
    if (ends(path, ".h5") || ends(path, ".hdf5"))
        return FMT_HDF5;
    if (ends(path, ".csv") || ends(path, ".tsv") || ends(path, ".txt"))
        return FMT_CSV;
    if (ends(path, "ubyte") || ends(path, ".idx") || ends(path, "ubyte.gz") ||
        ends(path, ".idx.gz"))
        return FMT_IDX;
    return FMT_UNKNOWN;
}

static int detect(const char *path, fmt *out, char *err, size_t errlen)
{
    int fd, rc = rt_data_open_file(path, &fd, err, errlen);
    if (rc != 0)
        return rc;
    uint8_t b[8] = {0};
    ssize_t n = read(fd, b, sizeof b);
    close(fd);
    if (n < 0)
        return base_errf(err, errlen, FERRY_EIO, "%s: %s", path, strerror(errno));
    if (n >= 6 && memcmp(b, "\x93NUMPY", 6) == 0)
        *out = FMT_NPY;
    else if (n >= 4 && memcmp(b, "PK\x03\x04", 4) == 0)
        *out = FMT_NPZ;
    else if (n >= 8 && memcmp(b, "\x89HDF\r\n\x1a\n", 8) == 0)
        *out = FMT_HDF5;
    else if (n >= 4 && ((b[0] == 0 && b[1] == 0) || (b[0] == 0x1f && b[1] == 0x8b)))
        *out = FMT_IDX;
    else if ((*out = by_name(path)) == FMT_UNKNOWN)
        *out = FMT_CSV; /* text: the CSV reader says what is wrong with it */
    return 0;
}

static int read_csv(const rt_data_source *s, const char *path, rt_raw *out, char *err,
                    size_t errlen)
{
    int rc = rt_map_file(path, &out->map, &out->map_len, err, errlen);
    if (rc != 0)
        return rc;
    if (out->map)
        madvise(out->map, out->map_len, MADV_SEQUENTIAL);
    out->is_csv = true;
    return rt_csv_parse(path, out->map ? out->map : "", out->map_len, s->label, &out->csv,
                        err, errlen);
}

/* One array of an .npy, IDX or HDF5 file. */
static int read_array(const char *path, const char *key, const rt_data_cancel *cancel,
                      rt_array *a, char *err, size_t errlen)
{
    fmt f = FMT_UNKNOWN;
    int rc = detect(path, &f, err, errlen);
    if (rc != 0)
        return rc;
    switch (f) {
    case FMT_NPY: return rt_npy_read(path, a, err, errlen);
    case FMT_IDX: return rt_idx_read_array(path, cancel, a, err, errlen);
    case FMT_HDF5: return rt_h5_read(path, key, a, err, errlen);
    default:
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: labels are read from an .npy, IDX or HDF5 file", path);
    }
}

int rt_raw_read(const rt_data_source *s, const char *path, const char *labels,
                const rt_data_cancel *cancel, rt_raw *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->path = path;
    const char *xk = s->x_key && s->x_key[0] ? s->x_key : "x";
    const char *yk = s->y_key && s->y_key[0] ? s->y_key : "y";
    fmt f = FMT_UNKNOWN;
    int rc = detect(path, &f, err, errlen);
    if (rc != 0)
        return rc;
    switch (f) {
    case FMT_CSV: return read_csv(s, path, out, err, errlen);
    case FMT_NPZ:
        out->x_key = xk;
        rc = rt_npz_read(path, NULL, 0, xk, RT_NPZ_MEMBER_CAP, &out->x, err, errlen);
        return rc ? rc
                  : rt_npz_read(path, NULL, 0, yk, RT_NPZ_MEMBER_CAP, &out->y, err, errlen);
    case FMT_HDF5:
        rc = rt_h5_read(path, xk, &out->x, err, errlen);
        if (rc == 0 && labels && labels[0])
            return read_array(labels, yk, cancel, &out->y, err, errlen);
        return rc ? rc : rt_h5_read(path, yk, &out->y, err, errlen);
    default:
        rc = read_array(path, xk, cancel, &out->x, err, errlen);
        if (rc != 0)
            return rc;
        if (!labels || !labels[0])
            return base_errf(err, errlen, FERRY_EINVAL,
                             "%s: holds samples only: name its labels with --labels FILE",
                             path);
        return read_array(labels, yk, cancel, &out->y, err, errlen);
    }
}

size_t rt_raw_count(const rt_raw *r)
{
    if (r->is_csv)
        return r->csv.rows;
    return r->x.ndims ? (size_t)r->x.dims[0] : 1;
}

void rt_raw_free(rt_raw *r)
{
    if (!r)
        return;
    rt_array_free(&r->x);
    rt_array_free(&r->y);
    rt_csv_free(&r->csv);
    if (r->map)
        munmap(r->map, r->map_len);
    memset(r, 0, sizeof *r);
}

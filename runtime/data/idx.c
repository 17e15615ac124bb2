/* runtime/data — IDX files (LeCun's format: magic 0x00 0x00 type ndims,
 * ndims big-endian uint32 sizes, then the data), read through zlib's gz*
 * calls, which take gzip and plain files alike. Only type 0x08 (unsigned
 * bytes) is read: it is what the image sets ship. */
#include "data_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "ferry/error.h"

#define IDX_TYPE_UBYTE 0x08
#define IDX_MAX_DIMS   4
/* gzread takes an unsigned count; read in pieces well below that. */
#define IDX_CHUNK (1u << 30)

/* Why gzread returned less than asked: an I/O error, a damaged or cut
 * gzip stream (zlib's text), or a plain end of file. */
int rt_gz_short_read(gzFile gz, const char *path, const char *what, size_t want,
                      size_t got, char *err, size_t errlen)
{
    int zerr = Z_OK;
    const char *zmsg = gzerror(gz, &zerr);
    /* zlib prefixes its text with the name it was given: "<fd:N>: ". */
    const char *colon = strstr(zmsg, ": ");
    if (zmsg[0] == '<' && colon)
        zmsg = colon + 2;
    if (zerr == Z_ERRNO)
        return base_errf(err, errlen, FERRY_EIO, "%s: reading it: %s", path,
                         strerror(errno));
    if (zerr != Z_OK)
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: damaged or truncated gzip stream (%s)", path, zmsg);
    return base_errf(err, errlen, FERRY_ECORRUPT,
                     "%s: truncated: %zu bytes of %s expected, %zu found", path, want,
                     what, got);
}

/* Pieces between two looks at a cancellation: a few ms of inflating. */
#define IDX_POLLED_CHUNK (4u << 20)

/* -1: a short read; 1: cancelled. */
int rt_gz_read_full(gzFile gz, void *buf, size_t len, const rt_data_cancel *cancel,
                     size_t *got)
{
    uint8_t *p = buf;
    unsigned chunk = cancel && cancel->fn ? IDX_POLLED_CHUNK : IDX_CHUNK;
    *got = 0;
    while (*got < len) {
        if (cancel && cancel->fn && cancel->fn(cancel->arg))
            return 1;
        size_t left = len - *got;
        unsigned ask = left > chunk ? chunk : (unsigned)left;
        int n = gzread(gz, p + *got, ask);
        if (n <= 0)
            return -1;
        *got += (size_t)n;
    }
    return 0;
}

/* Opens without blocking, so that a FIFO (or a device) named as data fails
 * at once instead of waiting forever for a writer; reads then block as
 * usual. */
int rt_data_open_file(const char *path, int *fd_out, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        int code = e == ENOENT ? FERRY_ENOENT : e == EACCES ? FERRY_EACCES : FERRY_EIO;
        return base_errf(err, errlen, code, "%s: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return base_errf(err, errlen, FERRY_EIO, "%s: not a regular file", path);
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        return base_errf(err, errlen, FERRY_EIO, "%s: %s", path, strerror(e));
    }
    *fd_out = fd;
    return 0;
}

int rt_gz_open(const char *path, struct gzFile_s **out, char *err, size_t errlen)
{
    int fd = -1, rc = rt_data_open_file(path, &fd, err, errlen);
    if (rc != 0)
        return rc;
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) {
        close(fd);
        return base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory to open it", path);
    }
    gzbuffer(gz, 256 * 1024);
    *out = gz;
    return 0;
}

/* Reads and checks the magic and the sizes; sets ndims, dims and len. */
static int read_header(gzFile gz, const char *path, rt_idx *out, char *err, size_t errlen)
{
    uint8_t magic[4];
    size_t got;
    if (rt_gz_read_full(gz, magic, sizeof magic, NULL, &got) != 0) {
        int zerr = Z_OK;
        gzerror(gz, &zerr);
        if (got == 0 && zerr == Z_OK)
            return base_errf(err, errlen, FERRY_ECORRUPT,
                             "%s: empty file, not an IDX file", path);
        return rt_gz_short_read(gz, path, "IDX magic", sizeof magic, got, err, errlen);
    }
    if (magic[0] != 0 || magic[1] != 0)
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: not an IDX file (magic %02x %02x %02x %02x)", path,
                         magic[0], magic[1], magic[2], magic[3]);
    if (magic[2] != IDX_TYPE_UBYTE)
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: IDX data type 0x%02x, only unsigned bytes (0x08) are "
                         "read",
                         path, magic[2]);
    if (magic[3] < 1 || magic[3] > IDX_MAX_DIMS)
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: IDX with %u dimensions, 1 to %d are read", path, magic[3],
                         IDX_MAX_DIMS);
    out->ndims = magic[3];

    uint8_t raw[4 * IDX_MAX_DIMS];
    size_t want = 4 * (size_t)out->ndims;
    if (rt_gz_read_full(gz, raw, want, NULL, &got) != 0)
        return rt_gz_short_read(gz, path, "IDX dimensions", want, got, err, errlen);
    size_t len = 1;
    for (int i = 0; i < out->ndims; i++) {
        const uint8_t *b = raw + 4 * i;
        uint32_t d = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 |
                     (uint32_t)b[3];
        out->dims[i] = d;
        if (d != 0 && len > (SIZE_MAX / 2) / d)
            return base_errf(err, errlen, FERRY_ECORRUPT,
                             "%s: IDX dimensions overflow the address space", path);
        len *= d;
    }
    out->len = len;
    return 0;
}

int rt_idx_read(const char *path, rt_idx *out, char *err, size_t errlen)
{
    return rt_idx_read_polled(path, NULL, out, err, errlen);
}

int rt_idx_read_polled(const char *path, const rt_data_cancel *cancel, rt_idx *out,
                       char *err, size_t errlen)
{
    if (!path || !out)
        return base_errf(err, errlen, FERRY_EINVAL, "rt_idx_read: no path or output");
    memset(out, 0, sizeof *out);

    gzFile gz;
    int rc = rt_gz_open(path, &gz, err, errlen);
    if (rc != 0)
        return rc;

    rt_idx idx = {0};
    rc = read_header(gz, path, &idx, err, errlen);
    if (rc != 0)
        goto out;
    idx.data = malloc(idx.len ? idx.len : 1);
    if (!idx.data) {
        rc = base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory for %zu bytes", path,
                       idx.len);
        goto out;
    }
    size_t got;
    int r = rt_gz_read_full(gz, idx.data, idx.len, cancel, &got);
    if (r > 0) {
        rc = base_errf(err, errlen, FERRY_ECANCELED, "%s: cancelled while reading it",
                       path);
        goto out;
    }
    if (r != 0) {
        rc = rt_gz_short_read(gz, path, "IDX data", idx.len, got, err, errlen);
        goto out;
    }
    /* One more read reaches the end of the gzip stream, where zlib checks
     * its CRC and length; it also finds bytes the header did not announce. */
    uint8_t extra;
    int n = gzread(gz, &extra, 1);
    if (n > 0) {
        rc = base_errf(err, errlen, FERRY_ECORRUPT,
                       "%s: more data than the IDX header's %zu bytes", path, idx.len);
        goto out;
    }
    int zerr = Z_OK;
    gzerror(gz, &zerr);
    if (n < 0 || zerr != Z_OK) {
        rc = rt_gz_short_read(gz, path, "IDX data", idx.len, idx.len, err, errlen);
        goto out;
    }
    *out = idx;
    idx.data = NULL;
out:
    free(idx.data);
    gzclose(gz);
    return rc;
}

void rt_idx_free(rt_idx *idx)
{
    if (!idx)
        return;
    free(idx->data);
    memset(idx, 0, sizeof *idx);
}

/* runtime/data — NumPy's .npz: a zip of .npy members (numpy.savez stores
 * them, savez_compressed deflates them), read through libzip. A member's
 * size is checked against a cap, and against what deflate can give from
 * its compressed bytes, before a byte is inflated: a zip bomb is refused
 * from its directory alone. */
#include "data_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <zip.h>

#include "ferry/error.h"

/* Deflate's best ratio is about 1032:1; a member claiming more lies. */
#define DEFLATE_MAX_RATIO 1100

static int zip_failed(const char *path, int zerr, char *err, size_t errlen)
{
    zip_error_t ze;
    zip_error_init_with_code(&ze, zerr);
    int rc = base_errf(err, errlen, zerr == ZIP_ER_NOENT ? FERRY_ENOENT : FERRY_ECORRUPT,
                       "%s: not a readable .npz (zip): %s", path, zip_error_strerror(&ze));
    zip_error_fini(&ze);
    return rc;
}

static int open_zip(const char *path, const uint8_t *buf, size_t len, zip_t **out,
                    char *err, size_t errlen)
{
    int zerr = 0;
    zip_t *z;
    if (buf) {
        zip_error_t ze;
        zip_error_init(&ze);
        zip_source_t *src = zip_source_buffer_create(buf, len, 0, &ze);
        z = src ? zip_open_from_source(src, ZIP_RDONLY, &ze) : NULL;
        zerr = zip_error_code_zip(&ze);
        if (!z && src)
            zip_source_free(src);
        zip_error_fini(&ze);
    } else {
        z = zip_open(path, ZIP_RDONLY, &zerr);
    }
    *out = z;
    return z ? 0 : zip_failed(path, zerr, err, errlen);
}

/* "keys x, y" for the message that a key is missing. */
static void keys(zip_t *z, char *out, size_t outlen)
{
    size_t used = 0;
    out[0] = '\0';
    zip_int64_t n = zip_get_num_entries(z, 0);
    for (zip_int64_t i = 0; i < n && used + 1 < outlen; i++) {
        const char *name = zip_get_name(z, (zip_uint64_t)i, 0);
        if (!name)
            continue;
        size_t l = strlen(name);
        if (l > 4 && strcmp(name + l - 4, ".npy") == 0)
            l -= 4;
        int w = snprintf(out + used, outlen - used, "%s%.*s", used ? ", " : "", (int)l,
                         name);
        used += w > 0 ? (size_t)w : 0;
    }
}

/* Checks the member's sizes, inflates it into memory of its own. */
static int read_member(const char *path, zip_t *z, zip_int64_t idx, const char *member,
                       uint64_t cap, void **data, size_t *len, char *err, size_t errlen)
{
    zip_stat_t st;
    if (zip_stat_index(z, (zip_uint64_t)idx, 0, &st) != 0 ||
        !(st.valid & ZIP_STAT_SIZE) || !(st.valid & ZIP_STAT_COMP_SIZE))
        return base_errf(err, errlen, FERRY_ECORRUPT, "%s: member %s has no sizes", path,
                         member);
    if (st.size > cap)
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: member %s claims %llu bytes, beyond the cap of %llu", path,
                         member, (unsigned long long)st.size, (unsigned long long)cap);
    if (st.comp_method != ZIP_CM_STORE &&
        st.size / DEFLATE_MAX_RATIO > (st.comp_size ? st.comp_size : 1))
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: member %s claims %llu bytes from %llu compressed, more "
                         "than deflate gives (a zip bomb?)",
                         path, member, (unsigned long long)st.size,
                         (unsigned long long)st.comp_size);
    uint8_t *buf = rt_data_alloc(st.size ? st.size : 1);
    zip_file_t *f = buf ? zip_fopen_index(z, (zip_uint64_t)idx, 0) : NULL;
    if (!f) {
        free(buf);
        return base_errf(err, errlen, buf ? FERRY_ECORRUPT : FERRY_ENOMEM,
                         "%s: member %s: %s", path, member,
                         buf ? zip_strerror(z) : "no memory");
    }
    zip_uint64_t got = 0;
    while (got < st.size) {
        zip_int64_t n = zip_fread(f, buf + got, st.size - got);
        if (n <= 0)
            break;
        got += (zip_uint64_t)n;
    }
    int closed = zip_fclose(f); /* always: it frees the member's reader */
    bool bad = got != st.size || closed != 0;
    if (bad) {
        free(buf);
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: member %s: truncated or damaged: %llu bytes expected, %llu "
                         "read",
                         path, member, (unsigned long long)st.size,
                         (unsigned long long)got);
    }
    *data = buf;
    *len = st.size;
    return 0;
}

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* A stored member's bytes where they lie in the file: the local headers
 * walked from the start (numpy writes each with its sizes, zip64 ones in
 * the extra field) to the one named `member`. -1 when it is not found so
 * (a data descriptor, an odd layout): the member is then read as any. */
static int in_place(const uint8_t *m, size_t len, const char *member, uint64_t size,
                    size_t *off)
{
    size_t at = 0, nl = strlen(member);
    while (at + 30 <= len && memcmp(m + at, "PK\x03\x04", 4) == 0) {
        uint64_t csize = le(m + at + 18, 4), usize = le(m + at + 22, 4);
        size_t name = le(m + at + 26, 2), extra = le(m + at + 28, 2);
        size_t data = at + 30 + name + extra;
        if ((le(m + at + 6, 2) & 0x8) || data > len)
            return -1;
        for (size_t e = at + 30 + name; e + 4 <= at + 30 + name + extra;) {
            size_t id = le(m + e, 2), el = le(m + e + 2, 2);
            if (id == 1 && el >= 16 && e + 4 + 16 <= data) { /* zip64 sizes */
                usize = le(m + e + 4, 8);
                csize = le(m + e + 12, 8);
            }
            e += 4 + el;
        }
        if (name == nl && memcmp(m + at + 30, member, nl) == 0) {
            if (le(m + at + 8, 2) != ZIP_CM_STORE || usize != size || csize != size ||
                size > len - data)
                return -1;
            *off = data;
            return 0;
        }
        if (csize > len - data)
            return -1;
        at = data + csize;
    }
    return -1;
}

/* Maps the file and finds a stored member in it; false when it cannot. */
static bool map_member(const char *path, zip_t *z, zip_int64_t idx, const char *member,
                       uint64_t cap, void **map, size_t *maplen, void **data, size_t *dlen)
{
    zip_stat_t st;
    char err[16];
    size_t off;
    if (zip_stat_index(z, (zip_uint64_t)idx, 0, &st) != 0 ||
        !(st.valid & ZIP_STAT_SIZE) || !(st.valid & ZIP_STAT_COMP_METHOD) ||
        st.comp_method != ZIP_CM_STORE || st.size > cap ||
        rt_map_file(path, map, maplen, err, sizeof err) != 0)
        return false;
    if (!*map || in_place(*map, *maplen, member, st.size, &off) != 0) {
        if (*map)
            munmap(*map, *maplen);
        *map = NULL;
        return false;
    }
    *data = (uint8_t *)*map + off;
    *dlen = st.size;
    return true;
}

int rt_npz_read(const char *path, const uint8_t *buf, size_t len, const char *key,
                uint64_t cap, rt_array *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    zip_t *z;
    int rc = open_zip(path, buf, len, &z, err, errlen);
    if (rc != 0)
        return rc;
    char member[256];
    snprintf(member, sizeof member, "%s.npy", key);
    zip_int64_t idx = zip_name_locate(z, member, 0);
    if (idx < 0) {
        char have[512];
        keys(z, have, sizeof have);
        rc = base_errf(err, errlen, FERRY_ENOENT, "%s: no array \"%s\" (it has: %s)", path,
                       key, have[0] ? have : "none");
        goto out;
    }
    void *data = NULL, *map = NULL;
    size_t dlen = 0, maplen = 0;
    /* A stored member of a file is used where it lies, as an .npy is. */
    if (!(!buf && map_member(path, z, idx, member, cap, &map, &maplen, &data, &dlen)) &&
        (rc = read_member(path, z, idx, member, cap, &data, &dlen, err, errlen)) != 0)
        goto out;
    char name[600];
    snprintf(name, sizeof name, "%s[%s]", path, key);
    rt_array a;
    size_t off;
    rc = rt_npy_header(name, data, dlen, &a, &off, err, errlen);
    size_t want = rc == 0 ? off + a.count * rt_dtype_size(a.type) : 0;
    if (rc == 0 && dlen != want)
        rc = base_errf(err, errlen, FERRY_ECORRUPT,
                       "%s: truncated or overlong: %zu bytes expected, %zu found", name,
                       want, dlen);
    if (rc != 0) {
        if (map)
            munmap(map, maplen);
        else
            free(data);
        goto out;
    }
    a.data = (const uint8_t *)data + off;
    if (map) {
        a.map = map;
        a.map_len = maplen;
    } else {
        a.owned = data;
    }
    *out = a;
out:
    zip_discard(z);
    return rc;
}

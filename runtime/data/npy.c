/* runtime/data — NumPy's .npy format: the magic "\x93NUMPY", a version, the
 * header's length, then a Python dict literal ({'descr': '<f4',
 * 'fortran_order': False, 'shape': (60000, 28, 28), }) and the data. The
 * dict is parsed here as the few literals it may hold, never evaluated:
 * an object array (a pickle) is refused by name. */
#include "data_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ferry/error.h"

typedef struct cursor {
    const char *p, *end;
} cursor;

static void skip_space(cursor *c)
{
    while (c->p < c->end && (isspace((unsigned char)*c->p)))
        c->p++;
}

static bool eat(cursor *c, char ch)
{
    skip_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted string into out[outlen]; false when it is not one or too long. */
static bool string(cursor *c, char *out, size_t outlen)
{
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return false;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (n + 1 >= outlen)
            return false;
        out[n++] = *c->p++;
    }
    if (c->p >= c->end)
        return false;
    c->p++;
    out[n] = '\0';
    return true;
}

/* The shape tuple: "(60000, 28, 28)", "(5,)" or "()". */
static bool shape(cursor *c, rt_array *a)
{
    if (!eat(c, '('))
        return false;
    a->ndims = 0;
    for (;;) {
        if (eat(c, ')'))
            return true;
        skip_space(c);
        if (c->p >= c->end || !isdigit((unsigned char)*c->p) ||
            a->ndims == RT_ARRAY_MAX_DIMS)
            return false;
        uint64_t d = 0;
        while (c->p < c->end && isdigit((unsigned char)*c->p)) {
            if (d > UINT64_MAX / 10 - 10)
                return false;
            d = d * 10 + (uint64_t)(*c->p++ - '0');
        }
        a->dims[a->ndims++] = d;
        if (!eat(c, ',') && !(skip_space(c), c->p < c->end && *c->p == ')'))
            return false;
    }
}

/* '<f4' and its kin; an error message when the type is not read. */
static const char *descr(const char *d, rt_array *a)
{
    static const struct {
        char kind;
        int size;
        rt_dtype t;
    } known[] = {{'u', 1, RT_DT_U8},  {'i', 1, RT_DT_I8},  {'i', 2, RT_DT_I16},
                 {'i', 4, RT_DT_I32}, {'i', 8, RT_DT_I64}, {'f', 2, RT_DT_F16},
                 {'f', 4, RT_DT_F32}, {'f', 8, RT_DT_F64}};
    if (strchr(d, 'O'))
        return "an object array (pickled Python objects), which is never unpickled: "
               "save numbers";
    if (strlen(d) < 3 || !strchr("<>|=", d[0]))
        return "an element type it does not read";
    int size = atoi(d + 2);
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (known[i].kind == d[1] && known[i].size == size) {
            a->type = known[i].t;
            a->swap = d[0] == '>' && size > 1;
            return NULL;
        }
    return "an element type it does not read (u1, i1, i2, i4, i8, f2, f4 and f8 are)";
}

/* The dict's entries; the error's text, or NULL. */
static const char *dict(cursor *c, rt_array *a, char *bad, size_t badlen)
{
    bool got_descr = false, got_order = false, got_shape = false;
    if (!eat(c, '{'))
        return "its header is not a dict";
    while (!eat(c, '}')) {
        char key[32], val[64];
        if (!string(c, key, sizeof key) || !eat(c, ':'))
            return "its header is not a dict of known keys";
        if (strcmp(key, "descr") == 0) {
            if (!string(c, val, sizeof val))
                return "a structured element type (a record), which is not read";
            snprintf(bad, badlen, "%s", val);
            const char *why = descr(val, a);
            if (why)
                return why;
            got_descr = true;
        } else if (strcmp(key, "fortran_order") == 0) {
            skip_space(c);
            if (c->end - c->p >= 4 && memcmp(c->p, "True", 4) == 0)
                return "Fortran order, which is not read: save "
                       "numpy.ascontiguousarray(x)";
            if (c->end - c->p < 5 || memcmp(c->p, "False", 5) != 0)
                return "a fortran_order that is neither True nor False";
            c->p += 5;
            got_order = true;
        } else if (strcmp(key, "shape") == 0) {
            if (!shape(c, a))
                return "a shape that is not a tuple of sizes (at most 16)";
            got_shape = true;
        } else {
            return "its header is not a dict of known keys";
        }
        if (!eat(c, ',') && !(skip_space(c), c->p < c->end && *c->p == '}'))
            return "its header is not a dict";
    }
    if (!got_descr || !got_order || !got_shape)
        return "its header lacks descr, fortran_order or shape";
    return NULL;
}

int rt_npy_header(const char *name, const uint8_t *buf, size_t len, rt_array *a,
                  size_t *data_off, char *err, size_t errlen)
{
    int rc = rt_header_begin(name, len, "an .npy", a, err, errlen);
    if (rc)
        return rc;
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: not an .npy file (no \\x93NUMPY magic)", name);
    size_t hlen, start;
    if (buf[6] == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        start = 10;
    } else if (buf[6] == 2 || buf[6] == 3) {
        if (len < 12)
            return base_errf(err, errlen, FERRY_ECORRUPT,
                             "%s: truncated: 12 bytes of .npy header expected, %zu found",
                             name, len);
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 |
               (size_t)buf[11] << 24;
        start = 12;
    } else {
        return base_errf(err, errlen, FERRY_ECORRUPT, "%s: .npy version %u, 1 to 3 are read",
                         name, buf[6]);
    }
    if (hlen > RT_NPY_HEADER_CAP)
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: .npy header of %zu bytes, beyond the cap of %d", name, hlen,
                         RT_NPY_HEADER_CAP);
    if (len - start < hlen)
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: truncated: %zu bytes of .npy header expected, %zu found",
                         name, start + hlen, len);
    cursor c = {(const char *)buf + start, (const char *)buf + start + hlen};
    char bad[64] = "";
    const char *why = dict(&c, a, bad, sizeof bad);
    if (why)
        return base_errf(err, errlen, FERRY_ECORRUPT, "%s: %s%s%s%s", name, why,
                         bad[0] ? " ('" : "", bad, bad[0] ? "')" : "");
    if (!rt_array_count(a))
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: a shape that overflows the address space", name);
    *data_off = start + hlen;
    return 0;
}

int rt_npy_read(const char *path, rt_array *out, char *err, size_t errlen)
{
    void *map;
    size_t len;
    int rc = rt_map_file(path, &map, &len, err, errlen);
    if (rc != 0)
        return rc;
    rt_array a;
    size_t off;
    rc = rt_npy_header(path, map, len, &a, &off, err, errlen);
    if (rc == 0) {
        size_t want = off + a.count * rt_dtype_size(a.type);
        if (len != want)
            rc = base_errf(err, errlen, FERRY_ECORRUPT,
                           len < want ? "%s: truncated: %zu bytes expected, %zu found"
                                      : "%s: %zu bytes expected, %zu found (data past "
                                        "the array)",
                           path, want, len);
    }
    if (rc != 0) {
        if (map)
            munmap(map, len);
        return rc;
    }
    a.data = (const uint8_t *)map + off;
    a.map = map;
    a.map_len = len;
    *out = a;
    return 0;
}

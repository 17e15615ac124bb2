/* safetensors written and read with jansson for the header: the values
 * are copied as they lie (float32, little-endian, which is also this
 * machine's order), so a file is the parameters plus a few hundred bytes.
 * A file read back is checked whole before anything of it is handed out:
 * the header's length against the file's, every tensor's dtype, rank and
 * byte range against its shape, so that a truncated or foreign file is
 * refused by name rather than loaded as garbage. */
#include "params.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <ferry/error.h>

#include "base/base.h"

static size_t count(const uint32_t shape[4])
{
    size_t n = 1;
    for (int d = 0; d < 4 && shape[d]; d++)
        n *= shape[d];
    return n;
}

static int rank_of(const uint32_t shape[4])
{
    int r = 0;
    while (r < 4 && shape[r])
        r++;
    return r;
}

/* The JSON header: each tensor's dtype, shape and byte range, in order. */
static json_t *header(const cluster_tensors *t, const params_meta *meta, size_t n_meta)
{
    json_t *h = json_object(), *md = json_object();
    if (!h || !md)
        goto fail;
    for (size_t i = 0; i < n_meta; i++)
        if (json_object_set_new(md, meta[i].key, json_string(meta[i].value)))
            goto fail;
    if (json_object_set_new(h, "__metadata__", md))
        goto fail_h;
    size_t at = 0;
    for (size_t i = 0; i < t->n; i++) {
        const uint32_t *shape = t->shapes + 4 * i;
        json_t *dims = json_array();
        for (int d = 0; dims && d < rank_of(shape); d++)
            json_array_append_new(dims, json_integer(shape[d]));
        size_t bytes = count(shape) * sizeof(float);
        json_t *one = json_pack("{s:s, s:o, s:[I, I]}", "dtype", "F32", "shape", dims,
                                "data_offsets", (json_int_t)at, (json_int_t)(at + bytes));
        if (!one || json_object_set_new(h, t->names[i], one))
            goto fail_h;
        at += bytes;
    }
    return h;
fail:
    json_decref(md);
fail_h:
    json_decref(h);
    return NULL;
}

int params_save(const char *path, const cluster_tensors *t, const params_meta *meta,
                size_t n_meta, char *err, size_t errlen)
{
    json_t *h = header(t, meta, n_meta);
    char *js = h ? json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(h);
    if (!js)
        return base_errf(err, errlen, FERRY_ENOMEM, "%s: cannot make the header", path);
    /* The values start on an 8-byte boundary, as the format recommends:
     * the header is padded with spaces. */
    size_t jlen = strlen(js), hlen = (jlen + 7) / 8 * 8;
    size_t vbytes = t->floats * sizeof(float), len = 8 + hlen + vbytes;
    uint8_t *buf = malloc(len);
    if (!buf) {
        free(js);
        return base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory for %zu bytes", path,
                         len);
    }
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    memcpy(buf + 8, js, jlen);
    memset(buf + 8 + jlen, ' ', hlen - jlen);
    if (vbytes)
        memcpy(buf + 8 + hlen, t->values, vbytes);
    free(js);
    int rc = base_write_atomic(path, buf, len, true);
    free(buf);
    if (rc)
        return base_errf(err, errlen, rc, "cannot write %s: %s", path,
                         ferry_strerror(rc));
    return 0;
}

/* The whole file, or FERRY_E* with err saying why. */
static int slurp(const char *path, uint8_t **out, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return base_errf(err, errlen, errno == ENOENT ? FERRY_ENOENT : FERRY_EIO,
                         "cannot open %s: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0;
    int rc = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            uint8_t *b = realloc(buf, cap);
            if (!b) {
                rc = base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory", path);
                break;
            }
            buf = b;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f))
                rc = base_errf(err, errlen, FERRY_EIO, "cannot read %s", path);
            break;
        }
    }
    fclose(f);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = n;
    return 0;
}

/* A tensor's entry of the header: its shape and byte range, checked
 * against the values' `vbytes`. */
static int entry(const char *path, const char *name, json_t *e, size_t vbytes,
                 uint32_t shape[4], size_t *begin, char *err, size_t errlen)
{
    const char *dtype = json_string_value(json_object_get(e, "dtype"));
    json_t *dims = json_object_get(e, "shape"),
           *offs = json_object_get(e, "data_offsets");
    if (!dtype || !json_is_array(dims) || !json_is_array(offs) ||
        json_array_size(offs) != 2)
        return base_errf(err, errlen, FERRY_ECORRUPT,
                         "%s: tensor '%.128s' lacks a dtype, a shape or its data_offsets",
                         path, name);
    if (strcmp(dtype, "F32") != 0)
        return base_errf(err, errlen, FERRY_EINVAL,
                         "%s: tensor '%.128s' is %.16s: ferry reads float32 (F32) only",
                         path, name, dtype);
    if (json_array_size(dims) > 4)
        return base_errf(err, errlen, FERRY_EINVAL,
                         "%s: tensor '%.128s' has %zu dimensions: ferry takes at most 4",
                         path, name, json_array_size(dims));
    memset(shape, 0, 4 * sizeof *shape);
    for (size_t d = 0; d < json_array_size(dims); d++) {
        json_int_t v = json_integer_value(json_array_get(dims, d));
        if (!json_is_integer(json_array_get(dims, d)) || v <= 0 || v > INT32_MAX)
            return base_errf(err, errlen, FERRY_ECORRUPT,
                             "%s: tensor '%.128s' has a dimension that is not a positive "
                             "integer",
                             path, name);
        shape[d] = (uint32_t)v;
    }
    json_int_t b = json_integer_value(json_array_get(offs, 0)),
               en = json_integer_value(json_array_get(offs, 1));
    size_t want = count(shape) * sizeof(float);
    if (b < 0 || en < b || (uint64_t)en > vbytes || (size_t)(en - b) != want)
        return base_errf(
            err, errlen, FERRY_ECORRUPT,
            "%s: tensor '%.128s' claims bytes %lld..%lld of the %zu after the "
            "header, where its shape takes %zu",
            path, name, (long long)b, (long long)en, vbytes, want);
    *begin = (size_t)b;
    return 0;
}

/* Counts the header's tensors and their strings (names and metadata). */
static void sizes(json_t *h, size_t *n, size_t *n_meta, size_t *strings)
{
    const char *key;
    json_t *v;
    json_object_foreach(h, key, v)
    {
        *strings += strlen(key) + 1;
        if (strcmp(key, "__metadata__") != 0) {
            (*n)++;
            continue;
        }
        const char *mk;
        json_t *mv;
        json_object_foreach(v, mk, mv)
        {
            (*n_meta)++;
            *strings +=
                strlen(mk) + 1 + (json_is_string(mv) ? json_string_length(mv) : 0) + 1;
        }
    }
}

/* Lays the header's tensors and metadata into one block for `out`. */
static int unpack(const char *path, json_t *h, const uint8_t *values, size_t vbytes,
                  params_file *out, char *err, size_t errlen)
{
    size_t n = 0, n_meta = 0, strings = 0;
    sizes(h, &n, &n_meta, &strings);
    size_t blk_len = vbytes + n * (4 * sizeof(uint32_t) + sizeof(char *)) +
                     n_meta * sizeof(params_meta) + strings + 16;
    char *blk = malloc(blk_len);
    if (!blk)
        return base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory", path);
    float *vals = (float *)(void *)blk;
    params_meta *meta = (params_meta *)(void *)(blk + (vbytes + 7) / 8 * 8);
    const char **names = (const char **)(meta + n_meta);
    uint32_t *shapes = (uint32_t *)(names + n);
    char *s = (char *)(shapes + 4 * n);
    size_t i = 0, m = 0, at = 0;
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach(h, key, v)
    {
        if (strcmp(key, "__metadata__") == 0) {
            const char *mk;
            json_t *mv;
            json_object_foreach(v, mk, mv)
            {
                const char *val = json_is_string(mv) ? json_string_value(mv) : "";
                meta[m].key = strcpy(s, mk);
                s += strlen(mk) + 1;
                meta[m++].value = strcpy(s, val);
                s += strlen(val) + 1;
            }
            continue;
        }
        size_t begin = 0;
        if ((rc = entry(path, key, v, vbytes, shapes + 4 * i, &begin, err, errlen)))
            break;
        size_t c = count(shapes + 4 * i);
        memcpy(vals + at, values + begin, c * sizeof(float));
        at += c;
        names[i++] = strcpy(s, key);
        s += strlen(key) + 1;
    }
    if (rc) {
        free(blk);
        return rc;
    }
    *out = (params_file){
        .t = {n, names, shapes, vals, at}, .n_meta = m, .meta = meta, .own = blk};
    return 0;
}

int params_load(const char *path, params_file *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = slurp(path, &buf, &len, err, errlen);
    if (rc)
        return rc;
    uint64_t hlen = 0;
    for (int i = 0; len >= 8 && i < 8; i++)
        hlen |= (uint64_t)buf[i] << (8 * i);
    json_error_t je;
    json_t *h = NULL;
    if (len < 8)
        rc = base_errf(err, errlen, FERRY_ECORRUPT,
                       "%s is not a safetensors file: %zu bytes, too few for a header",
                       path, len);
    else if (hlen > PARAMS_MAX_HEADER || hlen > len - 8)
        rc =
            base_errf(err, errlen, FERRY_ECORRUPT,
                      "%s is not a safetensors file (or is cut short): its header claims "
                      "%llu bytes of the %zu after its length",
                      path, (unsigned long long)hlen, len - 8);
    else if (!(h = json_loadb((const char *)buf + 8, hlen, JSON_REJECT_DUPLICATES,
                              &je)) ||
             !json_is_object(h))
        rc = base_errf(err, errlen, FERRY_ECORRUPT,
                       "%s is not a safetensors file: its header is not a JSON object "
                       "(%.200s)",
                       path, h ? "another JSON value" : je.text);
    else
        rc = unpack(path, h, buf + 8 + hlen, len - 8 - hlen, out, err, errlen);
    json_decref(h);
    free(buf);
    return rc;
}

const char *params_meta_get(const params_file *f, const char *key)
{
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[i].key, key) == 0)
            return f->meta[i].value;
    return NULL;
}

void params_file_free(params_file *f)
{
    free(f->own);
    memset(f, 0, sizeof *f);
}

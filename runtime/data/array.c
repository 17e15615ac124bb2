/* runtime/data — arrays as data files hold them: element types, the
 * conversion to float as elements are read, and the memory they live in (a
 * file mapping or their own). */
#include "data_int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ferry/error.h"

size_t rt_dtype_size(rt_dtype t)
{
    static const size_t size[] = {1, 1, 2, 4, 8, 2, 4, 8};
    return size[t];
}

const char *rt_dtype_name(rt_dtype t)
{
    static const char *const name[] = {"uint8", "int8",    "int16",   "int32",
                                       "int64", "float16", "float32", "float64"};
    return name[t];
}

bool rt_dtype_is_float(rt_dtype t)
{
    return t == RT_DT_F16 || t == RT_DT_F32 || t == RT_DT_F64;
}

bool rt_array_count(rt_array *a)
{
    size_t n = 1;
    for (int i = 0; i < a->ndims; i++) {
        if (a->dims[i] && n > (SIZE_MAX / 8) / a->dims[i])
            return false;
        n *= (size_t)a->dims[i];
    }
    a->count = n;
    return true;
}

/* IEEE 754 half to float: NumPy's float16. */
static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float v;
    if (exp == 0)
        v = ldexpf((float)man, -24); /* zero or subnormal */
    else if (exp == 31)
        v = man ? NAN : INFINITY;
    else
        v = ldexpf((float)(man | 0x400), (int)exp - 25);
    return sign ? -v : v;
}

/* The element's bytes in host (little-endian) order. */
static uint64_t raw(const rt_array *a, size_t i)
{
    size_t sz = rt_dtype_size(a->type);
    const uint8_t *p = a->data + i * sz;
    uint64_t v = 0;
    if (a->swap)
        for (size_t k = 0; k < sz; k++)
            v = v << 8 | p[k];
    else
        memcpy(&v, p, sz);
    return v;
}

double rt_array_get(const rt_array *a, size_t i)
{
    uint64_t v = raw(a, i);
    switch (a->type) {
    case RT_DT_U8: return (uint8_t)v;
    case RT_DT_I8: return (int8_t)v;
    case RT_DT_I16: return (int16_t)v;
    case RT_DT_I32: return (int32_t)v;
    case RT_DT_I64: return (double)(int64_t)v;
    case RT_DT_F16: return half_to_float((uint16_t)v);
    case RT_DT_F32: {
        uint32_t u = (uint32_t)v;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    default: {
        double d;
        memcpy(&d, &v, sizeof d);
        return d;
    }
    }
}

void rt_array_floats(const rt_array *a, size_t first, size_t n, float *out)
{
    /* The common cases without a switch an element: bytes and native
     * floats. */
    if (a->type == RT_DT_U8) {
        const uint8_t *p = a->data + first;
        for (size_t i = 0; i < n; i++)
            out[i] = p[i];
        return;
    }
    if (a->type == RT_DT_F32 && !a->swap) {
        memcpy(out, a->data + first * 4, n * 4);
        return;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = (float)rt_array_get(a, first + i);
}

void rt_array_free(rt_array *a)
{
    if (!a)
        return;
    if (a->map && a->map_len)
        munmap(a->map, a->map_len);
    free(a->owned);
    memset(a, 0, sizeof *a);
}

int rt_map_file(const char *path, void **map, size_t *len, char *err, size_t errlen)
{
    *map = NULL;
    *len = 0;
    int fd, rc = rt_data_open_file(path, &fd, err, errlen);
    if (rc != 0)
        return rc;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return base_errf(err, errlen, FERRY_EIO, "%s: %s", path, strerror(e));
    }
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return base_errf(err, errlen, FERRY_EIO, "%s: mapping it: %s", path,
                             strerror(e));
        }
        *map = p;
        *len = (size_t)st.st_size;
    }
    close(fd);
    return 0;
}

int rt_header_begin(const char *name, size_t len, const char *what, rt_array *a,
                    char *err, size_t errlen)
{
    memset(a, 0, sizeof *a);
    if (len == 0)
        return base_errf(err, errlen, FERRY_ECORRUPT, "%s: empty file, not %s", name, what);
    return 0;
}

/* runtime/data — HDF5 datasets by name, through Debian's libhdf5 (built
 * when meson finds it: the hdf5 feature). The dataset is read whole in its
 * own element type, converted to float as the others are. */
#include "data_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "ferry/error.h"

static bool h5_type(hid_t t, rt_dtype *out)
{
    static const struct {
        H5T_class_t cls;
        size_t size;
        bool sign;
        rt_dtype dt;
    } known[] = {{H5T_INTEGER, 1, false, RT_DT_U8}, {H5T_INTEGER, 1, true, RT_DT_I8},
                 {H5T_INTEGER, 2, true, RT_DT_I16}, {H5T_INTEGER, 4, true, RT_DT_I32},
                 {H5T_INTEGER, 8, true, RT_DT_I64}, {H5T_FLOAT, 2, true, RT_DT_F16},
                 {H5T_FLOAT, 4, true, RT_DT_F32},   {H5T_FLOAT, 8, true, RT_DT_F64}};
    H5T_class_t cls = H5Tget_class(t);
    size_t size = H5Tget_size(t);
    bool sign = cls == H5T_FLOAT || H5Tget_sign(t) == H5T_SGN_2;
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (known[i].cls == cls && known[i].size == size && known[i].sign == sign) {
            *out = known[i].dt;
            return true;
        }
    return false;
}

/* The native (little-endian) type of dt, for H5Dread to convert into. */
static hid_t native(rt_dtype dt)
{
    switch (dt) {
    case RT_DT_U8: return H5T_NATIVE_UINT8;
    case RT_DT_I8: return H5T_NATIVE_INT8;
    case RT_DT_I16: return H5T_NATIVE_INT16;
    case RT_DT_I32: return H5T_NATIVE_INT32;
    case RT_DT_I64: return H5T_NATIVE_INT64;
    case RT_DT_F16: return H5T_NATIVE_FLOAT; /* HDF5 has no native half */
    case RT_DT_F32: return H5T_NATIVE_FLOAT;
    default: return H5T_NATIVE_DOUBLE;
    }
}

static int read_set(const char *path, hid_t ds, rt_array *a, char *err, size_t errlen)
{
    hid_t type = H5Dget_type(ds), space = H5Dget_space(ds);
    int rc = 0;
    if (!h5_type(type, &a->type)) {
        rc = base_errf(err, errlen, FERRY_ECORRUPT,
                       "%s: an HDF5 element type it does not read (integers and floats "
                       "are)",
                       path);
        goto out;
    }
    if (a->type == RT_DT_F16)
        a->type = RT_DT_F32;
    int nd = H5Sget_simple_extent_ndims(space);
    hsize_t dims[RT_ARRAY_MAX_DIMS];
    if (nd < 0 || nd > RT_ARRAY_MAX_DIMS || H5Sget_simple_extent_dims(space, dims, NULL) < 0) {
        rc = base_errf(err, errlen, FERRY_ECORRUPT, "%s: a dataspace of %d dimensions",
                       path, nd);
        goto out;
    }
    a->ndims = nd;
    for (int i = 0; i < nd; i++)
        a->dims[i] = dims[i];
    size_t bytes;
    if (!rt_array_count(a) || !(a->owned = rt_data_alloc(
                                    (bytes = a->count * rt_dtype_size(a->type)) ? bytes : 1))) {
        rc = base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory", path);
        goto out;
    }
    a->data = a->owned;
    if (H5Dread(ds, native(a->type), H5S_ALL, H5S_ALL, H5P_DEFAULT, a->owned) < 0)
        rc = base_errf(err, errlen, FERRY_ECORRUPT, "%s: HDF5 could not read it", path);
out:
    H5Tclose(type);
    H5Sclose(space);
    return rc;
}

int rt_h5_read(const char *path, const char *key, rt_array *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors come back here, not on stderr */
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return base_errf(err, errlen, FERRY_ECORRUPT, "%s: not a readable HDF5 file",
                         path);
    int rc;
    hid_t ds = H5Lexists(f, key, H5P_DEFAULT) > 0 ? H5Dopen2(f, key, H5P_DEFAULT) : -1;
    if (ds < 0) {
        rc = base_errf(err, errlen, FERRY_ENOENT, "%s: no HDF5 dataset \"%s\"", path, key);
    } else {
        char name[600];
        snprintf(name, sizeof name, "%s[%s]", path, key);
        rc = read_set(name, ds, out, err, errlen);
        H5Dclose(ds);
    }
    H5Fclose(f);
    if (rc != 0)
        rt_array_free(out);
    return rc;
}

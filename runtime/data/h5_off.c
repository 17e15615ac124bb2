/* runtime/data — HDF5 when ferry was built without libhdf5. */
#include "data_int.h"

#include "ferry/error.h"

int rt_h5_read(const char *path, const char *key, rt_array *out, char *err, size_t errlen)
{
    (void)key;
    (void)out;
    return base_errf(err, errlen, FERRY_ENOTSUP,
                     "%s: an HDF5 file, and this ferry was built without HDF5 (install "
                     "libhdf5-dev and rebuild)",
                     path);
}

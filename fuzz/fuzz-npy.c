/* A libFuzzer target for the .npy header parser (runtime/data/npy.c): any
 * bytes give a parsed header whose data lies after it, or a refusal that
 * says why. Build and run: see fuzz/README. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data/data_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rt_array a;
    size_t off = 0;
    char err[256] = "";
    int rc = rt_npy_header("fuzz.npy", data, size, &a, &off, err, sizeof err);
    if (rc != 0) {
        if (rc != FERRY_ECORRUPT || !err[0])
            abort(); /* every refusal is a named corruption */
        return 0;
    }
    if (off > size || a.ndims < 0 || a.ndims > RT_ARRAY_MAX_DIMS)
        abort();
    size_t n = 1;
    for (int i = 0; i < a.ndims; i++)
        n *= (size_t)a.dims[i];
    if (n != a.count)
        abort();
    return 0;
}

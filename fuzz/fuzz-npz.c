/* A libFuzzer target for .npz reading (runtime/data/npz.c through libzip,
 * then the member's .npy header): any zip, damaged or lying about its
 * sizes, gives an array whose bytes are all there, or a refusal. The cap
 * is small so that a member claiming more is refused before inflating. */
#include <stdint.h>
#include <stdlib.h>

#include "runtime/data/data_int.h"

#define CAP ((uint64_t)1 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rt_array a;
    char err[256] = "";
    int rc = rt_npz_read("fuzz.npz", data, size, "x", CAP, &a, err, sizeof err);
    if (rc != 0) {
        if ((rc != FERRY_ECORRUPT && rc != FERRY_ENOENT && rc != FERRY_ENOMEM) || !err[0])
            abort();
        return 0;
    }
    size_t bytes = a.count * rt_dtype_size(a.type);
    if (bytes > CAP)
        abort();
    if (bytes) /* every byte was read: reads are defined */
        ((volatile const uint8_t *)a.data)[bytes - 1];
    rt_array_free(&a);
    return 0;
}

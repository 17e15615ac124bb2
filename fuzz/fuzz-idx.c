/* A libFuzzer target for the IDX header parser (runtime/data/idx_array.c):
 * any bytes give a type and shape whose header fits, or a refusal that
 * says why. */
#include <stdint.h>
#include <stdlib.h>

#include "runtime/data/data_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rt_array a;
    size_t hdr = 0;
    char err[256] = "";
    int rc = rt_idx_header("fuzz.idx", data, size, &a, &hdr, err, sizeof err);
    if (rc != 0) {
        if (rc != FERRY_ECORRUPT || !err[0])
            abort();
        return 0;
    }
    if (hdr > size || hdr != 4 + 4 * (size_t)a.ndims || rt_dtype_size(a.type) == 0)
        abort();
    return 0;
}

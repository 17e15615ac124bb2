/* The cpu device's scratch buffer (im2col columns), kept apart from the
 * device itself so that the operations that use it need only this file. */
#include <stdint.h>
#include <stdlib.h>

#include "cpu_int.h"

float *cpu_scratch(ferry_device_t *dev, size_t n)
{
    cpu_impl *im = dev->impl;
    if (n <= im->scratch_n)
        return im->scratch;
    if (n > SIZE_MAX / sizeof(float) / 2)
        return NULL;
    /* Grows by half again, so a run of slightly larger shapes does not
     * reallocate every call. */
    size_t want = n + n / 2;
    float *p = aligned_alloc(64, (want * sizeof(float) + 63) / 64 * 64);
    if (!p)
        return NULL;
    free(im->scratch);
    im->scratch = p;
    im->scratch_n = want;
    return p;
}

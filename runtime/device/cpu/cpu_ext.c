/* The cpu's side of the runtime's extension table: memory is the host's,
 * a gather is a row copy, and every product is float32, so fp32 is the only
 * precision it takes. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <ferry/error.h>

#include "runtime/device/device.h"

static int cpu_mem_info(ferry_device_t *dev, size_t *free_bytes, size_t *total_bytes)
{
    (void)dev;
    long page = sysconf(_SC_PAGESIZE), avail = sysconf(_SC_AVPHYS_PAGES),
         phys = sysconf(_SC_PHYS_PAGES);
    if (page <= 0 || avail < 0 || phys <= 0)
        return FERRY_EIO;
    *free_bytes = (size_t)avail * (size_t)page;
    *total_bytes = (size_t)phys * (size_t)page;
    return 0;
}

static int cpu_gather(ferry_device_t *dev, void *dst, const void *src, const uint32_t *idx,
                      size_t rows, size_t row_bytes)
{
    (void)dev;
    if (row_bytes % 4 != 0)
        return FERRY_EINVAL;
    for (size_t i = 0; i < rows; i++)
        memcpy((char *)dst + i * row_bytes, (const char *)src + (size_t)idx[i] * row_bytes,
               row_bytes);
    return 0;
}

static int cpu_set_precision(ferry_device_t *dev, rt_precision p, char *err, size_t errlen)
{
    if (p == RT_PREC_FP32)
        return 0;
    snprintf(err, errlen,
             "--precision %s: the %s device computes in float32 only; tf32 and bf16 "
             "need a GPU (use --precision fp32, the default)",
             rt_precision_name(p), dev->name);
    return FERRY_ENOTSUP;
}

const rt_device_ext_t rt_cpu_ext = {
    .version = RT_DEVICE_EXT_VERSION,
    .size = sizeof(rt_device_ext_t),
    .mem_info = cpu_mem_info,
    .gather = cpu_gather,
    .set_precision = cpu_set_precision,
};

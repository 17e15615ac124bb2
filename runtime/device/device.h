/* runtime/device — the backends behind <ferry/device.h>, split the way an
 * event library splits its platforms:
 *
 *   device.c   picks and opens a backend by name; the one file that knows
 *              both
 *   cpu/       OpenBLAS for gemm, im2col + gemm for convolutions, plain
 *              loops (vectorised by the compiler) for the rest
 *   cuda/      CUDA runtime, cuBLAS, cuDNN, and .cu kernels where no library
 *              call fits. Built as its own shared object (ferry-cuda.so,
 *              linked against the CUDA libraries) that device.c dlopens only
 *              when a cuda device is asked for, so that ferry starts, and
 *              runs on the cpu, on a machine without CUDA or a GPU.
 *
 * A device is used by one thread at a time (see <ferry/device.h>). */
#ifndef FERRY_RUNTIME_DEVICE_H
#define FERRY_RUNTIME_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include <ferry/device.h>

/* Opens the device `want` names: "cpu", "cuda" (= "cuda:0"), "cuda:N", or
 * "auto" (cuda:0 when a GPU is visible and the backend was built, the cpu
 * otherwise; never fails for want of a GPU). Returns 0, or
 *   FERRY_ENODEV  no GPU visible, or cuda support not built (err says which)
 *   FERRY_EINVAL  a name that is none of the above
 * with `err` set to a text fit for the user. */
int rt_device_open(const char *want, ferry_device_t **out, char *err, size_t errlen);
/* Whether `name` is one rt_device_open() understands (without opening it). */
bool rt_device_name_ok(const char *name);
/* Frees the device and everything it allocated. NULL: no-op. */
void rt_device_close(ferry_device_t *dev);

/* ---- the backends' entry points (device.c calls them) --------------------- */

/* cpu/: never fails but for memory. */
int rt_cpu_open(ferry_device_t **out, char *err, size_t errlen);
void rt_cpu_close(ferry_device_t *dev);

/* cuda/: exported by ferry-cuda.so under these names (dlsym). open returns
 * FERRY_ENODEV with a reason ("no GPU visible: cudaGetDeviceCount: ...")
 * when the device cannot be used; it never crashes for want of a GPU. */
#define RT_CUDA_OPEN_SYMBOL  "ferry_cuda_open"
#define RT_CUDA_CLOSE_SYMBOL "ferry_cuda_close"
typedef int (*rt_cuda_open_fn)(int index, ferry_device_t **out, char *err, size_t errlen);
typedef void (*rt_cuda_close_fn)(ferry_device_t *dev);

#endif

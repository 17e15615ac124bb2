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
#include <stdint.h>

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

/* ---- what the runtime asks of a device beyond <ferry/device.h> ------------ */

/* What products and convolutions compute in (`--precision`). fp32 is plain
 * float32 everywhere; tf32 lets cuBLAS and cuDNN use TF32 tensor cores
 * (inputs rounded to 10 mantissa bits, float32 sums); bf16 is mixed
 * precision: products and convolutions on bfloat16 inputs with float32
 * sums, master weights and optimizer state in float32 (cuda only; the cpu
 * refuses tf32 and bf16). */
typedef enum rt_precision {
    RT_PREC_FP32 = 0,
    RT_PREC_TF32 = 1,
    RT_PREC_BF16 = 2
} rt_precision;

/* "fp32", "tf32", "bf16" -> 0 with *out set; FERRY_EINVAL for anything else. */
int rt_precision_parse(const char *name, rt_precision *out);
const char *rt_precision_name(rt_precision p);

/* Ops only the runtime uses (the loader's device side, the trainer's
 * precision), kept out of the plugin ABI. Same rules as the ops table: one
 * thread at a time, issued in order with the device's other work. */
typedef struct rt_device_ext {
    uint32_t version, size;
    /* Free and total bytes of the device's memory (the cpu: the host's
     * available and physical memory). 0 or FERRY_E*. */
    int (*mem_info)(ferry_device_t *dev, size_t *free_bytes, size_t *total_bytes);
    /* Row i of dst = row idx[i] of src, for i < rows, rows of row_bytes each
     * (a multiple of 4); dst, src and idx are the device's memory, and the
     * indices are trusted to lie in src. Asynchronous like the ops: returns
     * a failure to issue (FERRY_EINVAL for a row_bytes not a multiple of 4),
     * later failures come with sync. */
    int (*gather)(ferry_device_t *dev, void *dst, const void *src, const uint32_t *idx,
                  size_t rows, size_t row_bytes);
    /* Sets the precision of every later gemm and convolution. 0, or
     * FERRY_ENOTSUP with the reason in err when the device cannot. */
    int (*set_precision)(ferry_device_t *dev, rt_precision p, char *err, size_t errlen);

    /* ---- staging: a second queue for copies (version 2) -------------------
     * For a set too large to hold on the device (runtime/data's rt_stager):
     * batches gathered on the host into pinned memory are copied on a queue
     * of their own while the compute queue runs the previous step. NULL on
     * a device without one (the cpu), where uploads are plain copies.
     * Marks order the two queues (CUDA events): a mark recorded on a queue
     * passes once the work issued there before it is done. */
    /* `bytes` of page-locked host memory, or NULL; freed with host_free. */
    void *(*host_alloc)(ferry_device_t *dev, size_t bytes);
    void (*host_free)(ferry_device_t *dev, void *p); /* NULL: no-op */
    int (*mark_create)(ferry_device_t *dev, void **mark);
    void (*mark_destroy)(ferry_device_t *dev, void *mark); /* NULL: no-op */
    /* Records `mark` after the work issued so far on `queue` (RT_QUEUE_*). */
    int (*mark_record)(ferry_device_t *dev, void *mark, int queue);
    /* Later work on `queue` waits, on the device, for `mark` to pass. */
    int (*mark_wait)(ferry_device_t *dev, void *mark, int queue);
    /* The calling thread waits for `mark` to pass; 0 or the queue's failure. */
    int (*mark_sync)(ferry_device_t *dev, void *mark);
    /* Host (memory from host_alloc) -> device on the copy queue; returns at
     * once. `host` must stay unchanged until a mark recorded on the copy
     * queue after it has passed. */
    int (*upload_async)(ferry_device_t *dev, void *dst, const void *host, size_t bytes);

    /* ---- graphs: a training step captured once, replayed (version 3) ------
     * NULL on a device without them (the cpu). Between capture_begin and
     * capture_end the ops issued on the compute queue are recorded, not
     * run. A loss op's host result cannot be known then: it is deferred,
     * and every run of the graph writes it to `loss` (the only host pointer
     * a loss may go to; *loss reads NaN until the first run). What cannot
     * be recorded — an allocation, a free, an upload or download, a sync,
     * a loss for another pointer or with a count of correct rows, a
     * convolution whose algorithm is not chosen yet — fails with
     * FERRY_EAGAIN and breaks the capture. */
    int (*capture_begin)(ferry_device_t *dev, float *loss);
    /* Ends the capture: with keep and nothing broken, *graph is the
     * instantiated step (0). Otherwise *graph is NULL and, when the capture
     * broke, FERRY_EAGAIN with the reason in err; failures of ops during
     * the capture are forgotten (the step has not run: run it again
     * uncaptured). */
    int (*capture_end)(ferry_device_t *dev, bool keep, void **graph, char *err,
                       size_t errlen);
    /* Runs `graph` on the compute queue; with a deferred loss, waits for it
     * and writes it. FERRY_EAGAIN, without running it, when a buffer the
     * backend keeps (its workspaces) moved since the capture: destroy the
     * graph and capture again. Else 0 or the device's failure. */
    int (*graph_run)(ferry_device_t *dev, void *graph);
    void (*graph_destroy)(ferry_device_t *dev, void *graph); /* NULL: no-op */
} rt_device_ext_t;

/* The queues of a device with staging: the one every op runs on, and the
 * copy queue of upload_async. */
enum { RT_QUEUE_COMPUTE = 0, RT_QUEUE_COPY = 1 };

#define RT_DEVICE_EXT_VERSION 3u

/* The extension table of an open device; never NULL. */
const rt_device_ext_t *rt_device_ext(const ferry_device_t *dev);

/* ---- the backends' entry points (device.c calls them) --------------------- */

/* cpu/: never fails but for memory. */
int rt_cpu_open(ferry_device_t **out, char *err, size_t errlen);
void rt_cpu_close(ferry_device_t *dev);
extern const rt_device_ext_t rt_cpu_ext;

/* cuda/: exported by ferry-cuda.so under these names (dlsym). open returns
 * FERRY_ENODEV with a reason ("no GPU visible: cudaGetDeviceCount: ...")
 * when the device cannot be used; it never crashes for want of a GPU. */
#define RT_CUDA_OPEN_SYMBOL  "ferry_cuda_open"
#define RT_CUDA_CLOSE_SYMBOL "ferry_cuda_close"
/* The backend's rt_device_ext_t, a data symbol. */
#define RT_CUDA_EXT_SYMBOL "ferry_cuda_ext"
typedef int (*rt_cuda_open_fn)(int index, ferry_device_t **out, char *err, size_t errlen);
typedef void (*rt_cuda_close_fn)(ferry_device_t *dev);

#endif

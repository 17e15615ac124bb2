/* The cuda backend's side of the runtime's extension table
 * (runtime/device/device.h): memory left on the GPU, the loader's gather of
 * a batch from a data set held on the device, and the precision of products
 * and convolutions; the staging members are cuda_stage.c's, the graph
 * members cuda_graph.c's. */
#include <stdio.h>

#include "runtime/device/device.h"

#include "cuda_int.h"

_Static_assert((int)CUDA_PREC_FP32 == (int)RT_PREC_FP32 &&
                   (int)CUDA_PREC_TF32 == (int)RT_PREC_TF32 &&
                   (int)CUDA_PREC_BF16 == (int)RT_PREC_BF16,
               "the backend's precisions are the runtime's");

static int cuda_mem_info(ferry_device_t *dev, size_t *free_bytes, size_t *total_bytes)
{
    cuda_dev_t *d = cuda_dev(dev);
    int rc = cuda_enter(d);
    if (rc != 0)
        return rc;
    CUDA_RT_TRY(d, cudaMemGetInfo(free_bytes, total_bytes), out);
out:
    return rc;
}

static int cuda_gather(ferry_device_t *dev, void *dst, const void *src,
                       const uint32_t *idx, size_t rows, size_t row_bytes)
{
    cuda_dev_t *d = cuda_dev(dev);
    if (row_bytes % 4 != 0)
        return cuda_einval(d, "gather: a row that is not whole 32-bit words");
    int rc = cuda_enter(d);
    if (rc != 0)
        return rc;
    cudaError_t e = cuda_k_gather(d->stream, dst, src, idx, rows, row_bytes / 4);
    return e == cudaSuccess ? 0 : cuda_rt_fail(d, "gather kernel", e);
}

static int cuda_set_precision(ferry_device_t *dev, rt_precision p, char *err,
                              size_t errlen)
{
    cuda_dev_t *d = cuda_dev(dev);
    if (p == RT_PREC_TF32 && d->cc_major < 8) {
        snprintf(err, errlen,
                 "--precision tf32: %s (compute capability %d.%d) has no TF32 tensor "
                 "cores; they start at 8.0 (Ampere)",
                 d->name, d->cc_major, d->cc_minor);
        return FERRY_ENOTSUP;
    }
    if (p == RT_PREC_BF16 && d->cc_major < 8) {
        snprintf(err, errlen,
                 "--precision bf16: %s (compute capability %d.%d) has no bfloat16 tensor "
                 "cores; they start at 8.0 (Ampere)",
                 d->name, d->cc_major, d->cc_minor);
        return FERRY_ENOTSUP;
    }
    if (p != RT_PREC_FP32 && p != RT_PREC_TF32 && p != RT_PREC_BF16) {
        snprintf(err, errlen, "--precision: unknown precision %d", (int)p);
        return FERRY_EINVAL;
    }
    int rc = cuda_enter(d);
    if (rc != 0)
        goto out;
    /* cuBLAS's default math never rounds float32 inputs below float32; the
     * TF32 mode lets sgemm use tensor cores. bf16 keeps the default: its
     * products go through cublasGemmEx on bfloat16 inputs (cuda_blas.c). */
    CUDA_BLAS_TRY(d,
                  cublasSetMathMode(d->blas, p == RT_PREC_TF32
                                                 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                 : CUBLAS_DEFAULT_MATH),
                  out);
    if ((cuda_precision_t)p != d->precision) {
        d->precision = (cuda_precision_t)p;
        /* The algorithms were chosen for the old math: choose again. */
        cuda_dnn_forget_algos(d);
    }
out:
    if (rc != 0)
        snprintf(err, errlen, "%s", d->errtext);
    return rc;
}

CUDA_EXPORT const rt_device_ext_t ferry_cuda_ext = {
    .version = RT_DEVICE_EXT_VERSION,
    .size = sizeof(rt_device_ext_t),
    .mem_info = cuda_mem_info,
    .gather = cuda_gather,
    .set_precision = cuda_set_precision,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .mark_create = cuda_mark_create,
    .mark_destroy = cuda_mark_destroy,
    .mark_record = cuda_mark_record,
    .mark_wait = cuda_mark_wait,
    .mark_sync = cuda_mark_sync,
    .upload_async = cuda_upload_async,
    .capture_begin = cuda_capture_begin,
    .capture_end = cuda_capture_end,
    .graph_run = cuda_graph_run,
    .graph_destroy = cuda_graph_destroy,
};

/* Opening and closing a cuda device. On a machine without a GPU (or with a driver
 * older than the runtime) the first CUDA call fails cleanly: open reports
 * FERRY_ENODEV with the runtime's own words, and never goes further. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/device/device.h"

#include "cuda_int.h"

/* ---- open and close ------------------------------------------------------ */

static void describe(cuda_dev_t *d, const struct cudaDeviceProp *prop)
{
    snprintf(d->description, sizeof d->description, "%s %s (%.1f GiB)", d->name,
             prop->name, (double)prop->totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
}

/* The handles, in the order close undoes them. On failure errtext says what
 * went wrong; open turns any failure into FERRY_ENODEV (the device cannot be
 * used) but for memory. */
static int start(cuda_dev_t *d)
{
    int rc = 0;
    CUDA_RT_TRY(d, cudaSetDevice(d->index), out);
    struct cudaDeviceProp prop;
    CUDA_RT_TRY(d, cudaGetDeviceProperties(&prop, d->index), out);
    describe(d, &prop);
    d->cc_major = prop.major;
    d->cc_minor = prop.minor;
    int pools = 0;
    CUDA_RT_TRY(d,
                cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, d->index),
                out);
    d->pools = pools != 0;
    if (d->pools) {
        /* Keep freed memory in the pool across synchronisations (the
         * default gives it back at each), so a training step's allocations
         * do not go to the driver every time; close trims it. */
        uint64_t keep = UINT64_MAX;
        CUDA_RT_TRY(d, cudaDeviceGetDefaultMemPool(&d->mempool, d->index), out);
        CUDA_RT_TRY(
            d,
            cudaMemPoolSetAttribute(d->mempool, cudaMemPoolAttrReleaseThreshold, &keep),
            out);
    }
    /* Not synchronised with the legacy default stream: the device's work
     * runs in its own order only. */
    CUDA_RT_TRY(d, cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking), out);
    /* The staging copies' own stream, so they overlap the compute stream. */
    CUDA_RT_TRY(d, cudaStreamCreateWithFlags(&d->copy_stream, cudaStreamNonBlocking),
                out);
    CUDA_BLAS_TRY(d, cublasCreate(&d->blas), out);
    CUDA_BLAS_TRY(d, cublasSetStream(d->blas, d->stream), out);
    /* A workspace of cuBLAS's own, fixed for the device's life, so that a
     * captured graph's products use the kernels an uncaptured step uses and
     * cuBLAS allocates nothing during a capture: the sizes its guide gives
     * (32 MiB on Hopper, 4 MiB before). cublasSetStream would reset it. */
    size_t blas_ws = d->cc_major >= 9 ? 32u << 20 : 4u << 20;
    if ((rc = cuda_raw_alloc(d, &d->blas_ws, blas_ws)) != 0)
        goto out;
    CUDA_BLAS_TRY(d, cublasSetWorkspace(d->blas, d->blas_ws, blas_ws), out);
    CUDA_DNN_TRY(d, cudnnCreate(&d->dnn), out);
    CUDA_DNN_TRY(d, cudnnSetStream(d->dnn, d->stream), out);
    void *result = NULL;
    rc = cuda_raw_alloc(d, &result, sizeof(cuda_loss_t));
    d->result = result;
out:
    return rc;
}

static void stop(cuda_dev_t *d)
{
    if (d->stream) {
        /* Nothing may still run on memory that is about to go. */
        cudaSetDevice(d->index);
        cudaStreamSynchronize(d->stream);
    }
    if (d->copy_stream)
        cudaStreamSynchronize(d->copy_stream);
    cuda_dnn_fini(d);
    cuda_mem_fini(d);
    if (d->dnn)
        cudnnDestroy(d->dnn);
    if (d->blas)
        cublasDestroy(d->blas);
    if (d->copy_stream) {
        cudaStreamSynchronize(d->copy_stream);
        cudaStreamDestroy(d->copy_stream);
    }
    if (d->stream) {
        cudaStreamSynchronize(d->stream);
        cudaStreamDestroy(d->stream);
    }
    /* Gives back what this device freed; memory another open device holds
     * stays with it. */
    if (d->mempool)
        cudaMemPoolTrimTo(d->mempool, 0);
}

CUDA_EXPORT int ferry_cuda_open(int index, ferry_device_t **out, char *err, size_t errlen)
{
    *out = NULL;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        snprintf(err, errlen, "cuda:%d: no GPU visible: cudaGetDeviceCount: %s (%s)",
                 index, cudaGetErrorString(e), cudaGetErrorName(e));
        return FERRY_ENODEV;
    }
    if (count <= 0) {
        snprintf(err, errlen, "cuda:%d: no GPU visible: cudaGetDeviceCount found none",
                 index);
        return FERRY_ENODEV;
    }
    if (index < 0 || index >= count) {
        snprintf(err, errlen, "cuda:%d: no such GPU (%d visible: cuda:0 to cuda:%d)",
                 index, count, count - 1);
        return FERRY_ENODEV;
    }

    cuda_dev_t *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "cuda:%d: out of memory", index);
        return FERRY_ENOMEM;
    }
    d->index = index;
    snprintf(d->name, sizeof d->name, "cuda:%d", index);
    int rc = start(d);
    if (rc != 0) {
        snprintf(err, errlen, "%s", d->errtext);
        stop(d);
        free(d);
        return rc == FERRY_ENOMEM ? rc : FERRY_ENODEV;
    }
    d->pub = (ferry_device_t){
        .version = FERRY_DEVICE_ABI_VERSION,
        .size = sizeof(ferry_device_t),
        .kind = FERRY_DEVICE_CUDA,
        .name = d->name,
        .description = d->description,
        .ops = &cuda_ops,
        .stream = d->stream,
        .cublas = d->blas,
        .cudnn = d->dnn,
        .impl = d,
    };
    *out = &d->pub;
    return 0;
}

CUDA_EXPORT void ferry_cuda_close(ferry_device_t *dev)
{
    if (!dev)
        return;
    cuda_dev_t *d = cuda_dev(dev);
    stop(d);
    free(d);
}

/* The signatures device.c casts dlsym's results to. */
_Static_assert(__builtin_types_compatible_p(__typeof__(&ferry_cuda_open),
                                            rt_cuda_open_fn),
               "ferry_cuda_open does not match rt_cuda_open_fn");
_Static_assert(__builtin_types_compatible_p(__typeof__(&ferry_cuda_close),
                                            rt_cuda_close_fn),
               "ferry_cuda_close does not match rt_cuda_close_fn");

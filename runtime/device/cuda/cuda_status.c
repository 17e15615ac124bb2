/* A cuda device's failures: the three libraries' statuses turned into
 * FERRY_E* codes with their text kept on the device, and the refusals of
 * what a graph capture must not meet (see cuda_graph.c). Every other file
 * of the backend reports through these, and they call none of them. */
#include <stdio.h>

#include "runtime/device/device.h"

#include "cuda_int.h"

static int record(cuda_dev_t *d, int rc, const char *what, const char *text, long code)
{
    snprintf(d->errtext, sizeof d->errtext, "%s: %s: %s (%ld)", d->name, what, text,
             code);
    fprintf(stderr, "ferry-cuda: %s\n", d->errtext);
    return rc;
}

int cuda_rt_fail(cuda_dev_t *d, const char *what, cudaError_t e)
{
    int rc;
    switch (e) {
    case cudaErrorMemoryAllocation:
        rc = FERRY_ENOMEM;
        break;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidConfiguration:
    case cudaErrorInvalidDevicePointer:
        rc = FERRY_EINVAL;
        break;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
        rc = FERRY_ENODEV;
        break;
    default:
        rc = FERRY_EIO;
        break;
    }
    return record(d, rc, what, cudaGetErrorString(e), (long)e);
}

int cuda_blas_fail(cuda_dev_t *d, const char *what, cublasStatus_t s)
{
    int rc;
    switch (s) {
    case CUBLAS_STATUS_ALLOC_FAILED:
        rc = FERRY_ENOMEM;
        break;
    case CUBLAS_STATUS_INVALID_VALUE:
        rc = FERRY_EINVAL;
        break;
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
        rc = FERRY_ENOTSUP;
        break;
    default:
        rc = FERRY_EIO;
        break;
    }
    return record(d, rc, what, cublasGetStatusString(s), (long)s);
}

int cuda_dnn_fail(cuda_dev_t *d, const char *what, cudnnStatus_t s)
{
    int rc;
    /* cuDNN 9 groups its statuses in categories of a thousand. */
    switch (CUDNN_STATUS_CATEGORY(s)) {
    case CUDNN_STATUS_BAD_PARAM:
        rc = FERRY_EINVAL;
        break;
    case CUDNN_STATUS_NOT_SUPPORTED:
        rc = FERRY_ENOTSUP;
        break;
    default:
        rc = s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
                     s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
                 ? FERRY_ENOMEM
                 : FERRY_EIO;
        break;
    }
    return record(d, rc, what, cudnnGetErrorString(s), (long)s);
}

int cuda_einval(cuda_dev_t *d, const char *what)
{
    snprintf(d->errtext, sizeof d->errtext, "%s: %s", d->name, what);
    return FERRY_EINVAL;
}

void cuda_defer(cuda_dev_t *d, int rc)
{
    if (rc != 0 && d->err == 0)
        d->err = rc;
}

int cuda_enter(cuda_dev_t *d)
{
    int rc = 0;
    CUDA_RT_TRY(d, cudaSetDevice(d->index), out);
out:
    return rc;
}

int cuda_capture_fail(cuda_dev_t *d, const char *what)
{
    if (d->cap_rc == 0) {
        d->cap_rc = FERRY_EAGAIN;
        snprintf(d->errtext, sizeof d->errtext, "%s: cannot be captured in a graph: %s",
                 d->name, what);
    }
    return FERRY_EAGAIN;
}

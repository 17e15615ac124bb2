/* Staging for a set too large to hold on the GPU (runtime/data's
 * rt_stager): page-locked host buffers, copies on a stream of their own
 * (the copy stream, created with the device), and events that order it
 * against the compute stream. A copy from pinned memory is a DMA the copy
 * engine runs while the compute stream's kernels run; from pageable memory
 * cudaMemcpyAsync would stage it through a driver buffer and return only
 * once it had. */
#include "runtime/device/device.h"

#include "cuda_int.h"

static cudaStream_t queue_stream(cuda_dev_t *d, int queue)
{
    return queue == RT_QUEUE_COPY ? d->copy_stream : d->stream;
}

void *cuda_host_alloc(ferry_device_t *dev, size_t bytes)
{
    cuda_dev_t *d = cuda_dev(dev);
    void *p = NULL;
    int rc = cuda_enter(d);
    if (rc != 0)
        return NULL;
    /* Portable: pinned for every device of the process, not only this one. */
    CUDA_RT_TRY(d, cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocPortable), out);
out:
    return rc == 0 ? p : NULL;
}

void cuda_host_free(ferry_device_t *dev, void *p)
{
    cuda_dev_t *d = cuda_dev(dev);
    if (!p)
        return;
    /* cudaFreeHost waits for the device: no copy still reads it. */
    cudaError_t e = cudaFreeHost(p);
    if (e != cudaSuccess)
        cuda_defer(d, cuda_rt_fail(d, "cudaFreeHost", e));
}

int cuda_mark_create(ferry_device_t *dev, void **mark)
{
    cuda_dev_t *d = cuda_dev(dev);
    cudaEvent_t ev = NULL;
    *mark = NULL;
    int rc = cuda_enter(d);
    if (rc != 0)
        return rc;
    /* No timing: the cheapest event to record and wait on. */
    CUDA_RT_TRY(d, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), out);
    *mark = ev;
out:
    return rc;
}

void cuda_mark_destroy(ferry_device_t *dev, void *mark)
{
    if (mark && cuda_enter(cuda_dev(dev)) == 0)
        cudaEventDestroy((cudaEvent_t)mark);
}

int cuda_mark_record(ferry_device_t *dev, void *mark, int queue)
{
    cuda_dev_t *d = cuda_dev(dev);
    int rc = cuda_enter(d);
    if (rc != 0)
        return rc;
    CUDA_RT_TRY(d, cudaEventRecord((cudaEvent_t)mark, queue_stream(d, queue)), out);
out:
    return rc;
}

int cuda_mark_wait(ferry_device_t *dev, void *mark, int queue)
{
    cuda_dev_t *d = cuda_dev(dev);
    int rc = cuda_enter(d);
    if (rc != 0)
        return rc;
    CUDA_RT_TRY(d, cudaStreamWaitEvent(queue_stream(d, queue), (cudaEvent_t)mark, 0),
                out);
out:
    return rc;
}

int cuda_mark_sync(ferry_device_t *dev, void *mark)
{
    cuda_dev_t *d = cuda_dev(dev);
    int rc = cuda_enter(d);
    if (rc != 0)
        return rc;
    CUDA_RT_TRY(d, cudaEventSynchronize((cudaEvent_t)mark), out);
out:
    return rc;
}

int cuda_upload_async(ferry_device_t *dev, void *dst, const void *host, size_t bytes)
{
    cuda_dev_t *d = cuda_dev(dev);
    int rc = cuda_enter(d);
    if (rc != 0 || bytes == 0)
        return rc;
    CUDA_RT_TRY(d,
                cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, d->copy_stream),
                out);
out:
    return rc;
}

/* Device memory and copies. Allocation is stream-ordered (cudaMallocAsync)
 * where the device supports it: memory freed while earlier work on the
 * stream still reads it stays valid until that work is done, and the pool
 * makes the alloc/free of a training step cheap. Every allocation a model
 * makes is tracked, so closing the device frees what it forgot. */
#include <stdint.h>
#include <stdlib.h>

#include "cuda_int.h"

/* ---- the set of live allocations ---------------------------------------- */

#define TOMBSTONE ((void *)1)

static size_t slot_of(const cuda_ptrset_t *s, const void *p)
{
    /* cudaMalloc's pointers are 256-aligned: drop the zero bits, then mix. */
    uint64_t h = ((uint64_t)(uintptr_t)p >> 8) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (s->cap - 1);
}

static bool rehash(cuda_ptrset_t *s, size_t cap)
{
    void **slots = calloc(cap, sizeof *slots);
    if (!slots)
        return false;
    cuda_ptrset_t n = {.slots = slots, .cap = cap};
    for (size_t i = 0; i < s->cap; i++) {
        void *p = s->slots[i];
        if (!p || p == TOMBSTONE)
            continue;
        size_t j = slot_of(&n, p);
        while (n.slots[j])
            j = (j + 1) & (cap - 1);
        n.slots[j] = p;
        n.used++;
        n.live++;
    }
    free(s->slots);
    *s = n;
    return true;
}

static bool ptrset_add(cuda_ptrset_t *s, void *p)
{
    if ((s->used + 1) * 2 > s->cap) {
        size_t cap = 64;
        while (cap < (s->live + 1) * 4)
            cap *= 2;
        if (!rehash(s, cap))
            return false;
    }
    size_t j = slot_of(s, p);
    while (s->slots[j] && s->slots[j] != TOMBSTONE)
        j = (j + 1) & (s->cap - 1);
    if (!s->slots[j])
        s->used++;
    s->slots[j] = p;
    s->live++;
    return true;
}

static bool ptrset_remove(cuda_ptrset_t *s, const void *p)
{
    if (s->cap == 0)
        return false;
    for (size_t j = slot_of(s, p); s->slots[j]; j = (j + 1) & (s->cap - 1)) {
        if (s->slots[j] == p) {
            s->slots[j] = TOMBSTONE;
            s->live--;
            return true;
        }
    }
    return false;
}

/* ---- the backend's own buffers ------------------------------------------ */

int cuda_raw_alloc(cuda_dev_t *d, void **p, size_t bytes)
{
    int rc = 0;
    *p = NULL;
    if (bytes == 0)
        bytes = 1;
    if (d->pools)
        CUDA_RT_TRY(d, cudaMallocAsync(p, bytes, d->stream), out);
    else
        CUDA_RT_TRY(d, cudaMalloc(p, bytes), out);
out:
    return rc;
}

void cuda_raw_free(cuda_dev_t *d, void *p)
{
    if (!p)
        return;
    /* cudaFree waits for the device; cudaFreeAsync is ordered after the work
     * already on the stream. Either way nothing still running loses it. */
    cudaError_t e = d->pools ? cudaFreeAsync(p, d->stream) : cudaFree(p);
    if (e != cudaSuccess)
        cuda_defer(d, cuda_rt_fail(d, "cudaFree", e));
}

int cuda_grow(cuda_dev_t *d, void **buf, size_t *have, size_t bytes)
{
    if (*have >= bytes)
        return 0;
    if (d->capturing)
        return cuda_capture_fail(d, "a workspace would grow");
    d->bufgen++;
    size_t want = *have + *have / 2;
    if (want < bytes)
        want = bytes;
    cuda_raw_free(d, *buf);
    *buf = NULL;
    *have = 0;
    int rc = cuda_raw_alloc(d, buf, want);
    if (rc == 0)
        *have = want;
    return rc;
}

int cuda_bf16_copy(cuda_dev_t *d, int which, const float *src, size_t n, bool as_bf16,
                   const void **out)
{
    *out = NULL;
    int rc = cuda_grow(d, &d->bf[which], &d->bf_bytes[which],
                       n * (as_bf16 ? sizeof(uint16_t) : sizeof(float)));
    if (rc != 0)
        return rc;
    cudaError_t e = as_bf16 ? cuda_k_to_bf16(d->stream, d->bf[which], src, n)
                            : cuda_k_round_bf16(d->stream, d->bf[which], src, n);
    if (e != cudaSuccess)
        return cuda_rt_fail(d, "bf16 rounding kernel", e);
    *out = d->bf[which];
    return 0;
}

void cuda_mem_fini(cuda_dev_t *d)
{
    for (size_t i = 0; i < d->live.cap; i++) {
        void *p = d->live.slots[i];
        if (p && p != TOMBSTONE)
            cuda_raw_free(d, p);
    }
    free(d->live.slots);
    d->live = (cuda_ptrset_t){0};
    cuda_raw_free(d, d->ws);
    cuda_raw_free(d, d->scratch);
    cuda_raw_free(d, d->ones);
    cuda_raw_free(d, d->result);
    for (int i = 0; i < 3; i++) {
        cuda_raw_free(d, d->bf[i]);
        d->bf[i] = NULL;
        d->bf_bytes[i] = 0;
    }
    cuda_raw_free(d, d->blas_ws);
    if (d->cap_host)
        cudaFreeHost(d->cap_host);
    d->cap_host = NULL;
    d->blas_ws = NULL;
    d->ws = d->scratch = NULL;
    d->ones = NULL;
    d->result = NULL;
    d->ws_bytes = d->scratch_bytes = d->ones_n = 0;
}

/* ---- the ops ------------------------------------------------------------- */

void *cuda_alloc(ferry_device_t *dev, size_t bytes)
{
    cuda_dev_t *d = cuda_dev(dev);
    void *p = NULL;
    if (d->capturing) {
        cuda_capture_fail(d, "alloc");
        return NULL;
    }
    if (cuda_enter(d) != 0 || cuda_raw_alloc(d, &p, bytes) != 0)
        return NULL;
    if (!ptrset_add(&d->live, p)) {
        cuda_raw_free(d, p);
        return NULL;
    }
    return p;
}

void cuda_free(ferry_device_t *dev, void *p)
{
    cuda_dev_t *d = cuda_dev(dev);
    if (!p || cuda_enter(d) != 0)
        return;
    if (d->capturing) {
        /* Left allocated (close frees it): a free cannot be recorded. */
        cuda_capture_fail(d, "free");
        return;
    }
    /* Not ours (or freed twice): freeing it would corrupt the allocator. */
    if (!ptrset_remove(&d->live, p)) {
        cuda_defer(d, cuda_rt_fail(d, "free of a pointer this device did not allocate",
                                   cudaErrorInvalidDevicePointer));
        return;
    }
    cuda_raw_free(d, p);
}

static int memcpy_on_stream(cuda_dev_t *d, void *dst, const void *src, size_t bytes,
                            enum cudaMemcpyKind kind)
{
    int rc = cuda_enter(d);
    if (rc != 0 || bytes == 0)
        return rc;
    /* A copy to or from the host's pageable memory cannot be recorded. */
    if (d->capturing && kind != cudaMemcpyDeviceToDevice)
        return cuda_capture_fail(d,
                                 kind == cudaMemcpyHostToDevice ? "upload" : "download");
    CUDA_RT_TRY(d, cudaMemcpyAsync(dst, src, bytes, kind, d->stream), out);
out:
    return rc;
}

int cuda_upload(ferry_device_t *dev, void *dst, const void *host, size_t bytes)
{
    /* From pageable memory the copy is staged before this returns, so the
     * caller may reuse `host` at once. */
    return memcpy_on_stream(cuda_dev(dev), dst, host, bytes, cudaMemcpyHostToDevice);
}

int cuda_copy(ferry_device_t *dev, void *dst, const void *src, size_t bytes)
{
    return memcpy_on_stream(cuda_dev(dev), dst, src, bytes, cudaMemcpyDeviceToDevice);
}

int cuda_sync(ferry_device_t *dev)
{
    cuda_dev_t *d = cuda_dev(dev);
    int rc = cuda_enter(d);
    if (rc != 0)
        return rc;
    if (d->capturing)
        return cuda_capture_fail(d, "sync");
    CUDA_RT_TRY(d, cudaStreamSynchronize(d->stream), out);
    /* "Every operation issued" includes the staging copies. */
    CUDA_RT_TRY(d, cudaStreamSynchronize(d->copy_stream), out);
out:
    /* The first failure since the last sync: an earlier op's, if any. */
    if (d->err != 0) {
        rc = d->err;
        d->err = 0;
    }
    return rc;
}

int cuda_download(ferry_device_t *dev, void *host, const void *src, size_t bytes)
{
    cuda_dev_t *d = cuda_dev(dev);
    int rc = memcpy_on_stream(d, host, src, bytes, cudaMemcpyDeviceToHost);
    int synced = cuda_sync(dev);
    /* What the host reads was computed after a failure: say so. */
    return rc != 0 ? rc : synced;
}

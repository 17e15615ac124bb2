/* The cpu device: host memory, OpenBLAS, and the table that names every
 * operation of the backend. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ferry/error.h>

#include "runtime/device/device.h"
#include "runtime/runtime.h"
#include "cpu_int.h"

/* Each block starts with a header that links it into its device's list, so
 * that closing a device frees what its user did not; 64 bytes keep the
 * caller's pointer 64-byte aligned. */
typedef struct block {
    struct block *prev, *next;
} block;
#define BLOCK_HEAD 64
_Static_assert(sizeof(block) <= BLOCK_HEAD, "block header too large");

typedef struct cpu_device {
    ferry_device_t dev;
    cpu_impl impl;
    block blocks; /* sentinel of a circular list */
} cpu_device;

static cpu_device *of(ferry_device_t *dev)
{
    return (cpu_device *)dev;
}

static void *cpu_alloc(ferry_device_t *dev, size_t bytes)
{
    if (bytes > SIZE_MAX - 2 * BLOCK_HEAD)
        return NULL;
    size_t total = (BLOCK_HEAD + bytes + BLOCK_HEAD - 1) / BLOCK_HEAD * BLOCK_HEAD;
    block *b = aligned_alloc(BLOCK_HEAD, total);
    if (!b)
        return NULL;
    block *head = &of(dev)->blocks;
    b->next = head->next;
    b->prev = head;
    head->next->prev = b;
    head->next = b;
    return (char *)b + BLOCK_HEAD;
}

static void cpu_free(ferry_device_t *dev, void *p)
{
    (void)dev;
    if (!p)
        return;
    block *b = (block *)((char *)p - BLOCK_HEAD);
    b->prev->next = b->next;
    b->next->prev = b->prev;
    free(b);
}

/* memmove, not memcpy: nothing in the contract forbids overlapping copies,
 * and a zero-length copy may come with NULL pointers. */
static int cpu_upload(ferry_device_t *dev, void *dst, const void *host, size_t bytes)
{
    (void)dev;
    if (bytes)
        memmove(dst, host, bytes);
    return 0;
}

static int cpu_download(ferry_device_t *dev, void *host, const void *src, size_t bytes)
{
    (void)dev;
    if (bytes)
        memmove(host, src, bytes);
    return 0;
}

static int cpu_copy(ferry_device_t *dev, void *dst, const void *src, size_t bytes)
{
    (void)dev;
    if (bytes)
        memmove(dst, src, bytes);
    return 0;
}

static int cpu_sync(ferry_device_t *dev)
{
    (void)dev;
    return 0;
}

static const ferry_device_ops_t cpu_ops = {
    .version = FERRY_DEVICE_ABI_VERSION,
    .size = sizeof(ferry_device_ops_t),
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_upload,
    .download = cpu_download,
    .copy = cpu_copy,
    .sync = cpu_sync,
    .fill = cpu_fill,
    .scale = cpu_scale,
    .axpy = cpu_axpy,
    .gemm = cpu_gemm,
    .bias_add = cpu_bias_add,
    .bias_grad = cpu_bias_grad,
    .relu = cpu_relu,
    .relu_grad = cpu_relu_grad,
    .softmax_xent = cpu_softmax_xent,
    .mse = cpu_mse,
    .conv2d = cpu_conv2d,
    .conv2d_grad = cpu_conv2d_grad,
    .maxpool = cpu_maxpool,
    .maxpool_grad = cpu_maxpool_grad,
    .sgd_step = cpu_sgd_step,
    .adam_step = cpu_adam_step,
    .bias_relu = cpu_bias_relu,
    .activation = cpu_activation,
    .activation_grad = cpu_activation_grad,
    .mul = cpu_mul,
    .dropout_mask = cpu_dropout_mask,
    .avgpool = cpu_avgpool,
    .avgpool_grad = cpu_avgpool_grad,
    .bce_logits = cpu_bce_logits,
    .layernorm = cpu_layernorm,
    .layernorm_grad = cpu_layernorm_grad,
    .batchnorm = cpu_batchnorm,
    .batchnorm_infer = cpu_batchnorm_infer,
    .batchnorm_grad = cpu_batchnorm_grad,
};

/* "cpu: AMD EPYC (2 cores), OpenBLAS 0.3.21 (2 threads)": the first two
 * words of openblas_get_config() are its name and version. */
static void describe(char *buf, size_t len)
{
    char cpu[160];
    rt_cpu_describe(cpu, sizeof cpu);
    char blas[64] = "OpenBLAS";
    const char *config = openblas_get_config();
    if (config) {
        const char *sp = strchr(config, ' ');
        size_t words = sp ? (size_t)(strchrnul(sp + 1, ' ') - config) : strlen(config);
        snprintf(blas, sizeof blas, "%.*s", (int)words, config);
    }
    int threads = openblas_get_num_threads();
    snprintf(buf, len, "%s, %s (%d thread%s)", cpu, blas, threads,
             threads == 1 ? "" : "s");
}

int rt_cpu_open(ferry_device_t **out, char *err, size_t errlen)
{
    *out = NULL;
    cpu_device *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "cpu: out of memory");
        return FERRY_ENOMEM;
    }
    d->blocks.prev = d->blocks.next = &d->blocks;
    snprintf(d->impl.name, sizeof d->impl.name, "cpu");
    describe(d->impl.desc, sizeof d->impl.desc);
    d->dev.version = FERRY_DEVICE_ABI_VERSION;
    d->dev.size = sizeof(ferry_device_t);
    d->dev.kind = FERRY_DEVICE_CPU;
    d->dev.name = d->impl.name;
    d->dev.description = d->impl.desc;
    d->dev.ops = &cpu_ops;
    d->dev.impl = &d->impl;
    *out = &d->dev;
    return 0;
}

void rt_cpu_close(ferry_device_t *dev)
{
    if (!dev)
        return;
    cpu_device *d = of(dev);
    while (d->blocks.next != &d->blocks)
        cpu_free(dev, (char *)d->blocks.next + BLOCK_HEAD);
    free(d->impl.scratch);
    free(d);
}

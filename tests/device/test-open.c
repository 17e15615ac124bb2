/* rt_device_open: which device each name gives, and the errors of names
 * that cannot be opened here. */
#include <stdio.h>
#include <string.h>

#include <ferry/error.h>

#include "runtime/device/device.h"
#include "tcommon.h"
#include "tdevice.h"

/* A 2x2 product on `dev`, checked: the device computes. */
static void assert_computes(ferry_device_t *dev)
{
    const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
    float c[4];
    float *da = dev->ops->alloc(dev, sizeof a), *db = dev->ops->alloc(dev, sizeof b);
    float *dc = dev->ops->alloc(dev, sizeof c);
    cr_assert(da && db && dc);
    cr_assert_eq(dev->ops->upload(dev, da, a, sizeof a), 0);
    cr_assert_eq(dev->ops->upload(dev, db, b, sizeof b), 0);
    dev->ops->gemm(dev, false, false, 2, 2, 2, 1.f, da, db, 0.f, dc);
    cr_assert_eq(dev->ops->download(dev, c, dc, sizeof c), 0);
    cr_assert_eq(dev->ops->sync(dev), 0);
    cr_assert(c[0] == 19 && c[1] == 22 && c[2] == 43 && c[3] == 50, "%s: %g %g %g %g",
              dev->name, c[0], c[1], c[2], c[3]);
    dev->ops->free(dev, da);
    dev->ops->free(dev, db);
    dev->ops->free(dev, dc);
}

static void assert_complete(const ferry_device_t *dev)
{
    cr_assert_eq(dev->version, FERRY_DEVICE_ABI_VERSION);
    cr_assert_eq(dev->size, sizeof(ferry_device_t));
    cr_assert_eq(dev->ops->version, FERRY_DEVICE_ABI_VERSION);
    cr_assert_eq(dev->ops->size, sizeof(ferry_device_ops_t));
    /* every member after version/size is a function */
    const char *base = (const char *)dev->ops;
    for (size_t off = offsetof(ferry_device_ops_t, alloc);
         off < sizeof(ferry_device_ops_t); off += sizeof(void (*)(void))) {
        void (*fn)(void);
        memcpy(&fn, base + off, sizeof fn);
        cr_assert_not_null(fn, "%s: ops member at offset %zu is NULL", dev->name, off);
    }
}

Test(open, cpu_gives_the_cpu_device_described_with_its_blas)
{
    char err[256] = "";
    ferry_device_t *dev = NULL;
    cr_assert_eq(rt_device_open("cpu", &dev, err, sizeof err), 0, "%s", err);
    cr_assert_eq(dev->kind, FERRY_DEVICE_CPU);
    cr_assert_str_eq(dev->name, "cpu");
    cr_assert(strncmp(dev->description, "cpu: ", 5) == 0, "%s", dev->description);
    cr_assert(strstr(dev->description, "OpenBLAS"), "%s", dev->description);
    cr_assert_null(dev->stream);
    cr_assert_null(dev->cublas);
    cr_assert_null(dev->cudnn);
    assert_complete(dev);
    assert_computes(dev);
    rt_device_close(dev);
    rt_device_close(NULL);
    tcom_assert_no_leaks();
}

Test(open, auto_gives_a_working_device)
{
    char err[256] = "";
    ferry_device_t *dev = NULL;
    cr_assert_eq(rt_device_open("auto", &dev, err, sizeof err), 0, "%s", err);
    cr_assert_not_null(dev);
    cr_log_info("auto chose %s (%s)", dev->name, dev->description);
    if (dev->kind == FERRY_DEVICE_CPU)
        cr_assert_str_eq(dev->name, "cpu");
    else
        cr_assert_eq(dev->kind, FERRY_DEVICE_CUDA);
    assert_complete(dev);
    assert_computes(dev);
    rt_device_close(dev);
    cr_assert_eq(rt_device_open(NULL, &dev, err, sizeof err), 0, "NULL is auto: %s", err);
    rt_device_close(dev);
}

Test(open, cuda_without_a_gpu_is_a_clear_error_not_a_crash)
{
    char err[512] = "";
    ferry_device_t *dev = (ferry_device_t *)&err; /* must be cleared */
    int rc = rt_device_open("cuda", &dev, err, sizeof err);
    if (rc == 0) {
        fprintf(stderr, "a GPU is visible: %s (%s)\n", dev->name, dev->description);
        cr_assert_eq(dev->kind, FERRY_DEVICE_CUDA);
        assert_complete(dev);
        assert_computes(dev);
        rt_device_close(dev);
        return;
    }
    cr_assert_eq(rc, FERRY_ENODEV, "rc %d (%s): %s", rc, ferry_err_name(rc), err);
    cr_assert_null(dev);
    cr_assert(strlen(err) > 10, "the error says why: '%s'", err);
    cr_assert(strstr(err, "cuda"), "the error names cuda: '%s'", err);
    fprintf(stderr, "cuda: %s\n", err);
    /* and again: the outcome is remembered, not a second crash-prone load */
    cr_assert_eq(rt_device_open("cuda:0", &dev, err, sizeof err), FERRY_ENODEV);
}

Test(open, an_unknown_name_is_refused_by_name)
{
    const char *bad[] = {"tpu", "", "CPU", "cuda:", "cuda:x", "cuda:-1", "cpu0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[256] = "";
        ferry_device_t *dev = NULL;
        int rc = rt_device_open(bad[i], &dev, err, sizeof err);
        cr_assert_eq(rc, FERRY_EINVAL, "'%s': rc %d (%s)", bad[i], rc, err);
        cr_assert_null(dev);
        cr_assert(strstr(err, bad[i]), "'%s' is named in '%s'", bad[i], err);
    }
    tcom_assert_no_leaks();
}

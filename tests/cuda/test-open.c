/* Opening a cuda device: with no GPU (this machine, CI) a clear FERRY_ENODEV,
 * never a crash; with a GPU a device that names it. These run everywhere.
 * device.c loads the backend once per process, and Criterion runs each test
 * in a process of its own, so a test may set FERRY_CUDA_BACKEND before its
 * first open. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ferry/error.h>

#include "runtime/device/device.h"
#include "tcommon.h"
#include "tcuda.h"

Test(cuda_open, gives_a_named_device_or_enodev_with_the_reason)
{
    ferry_device_t *dev = NULL;
    char err[512] = "";
    int rc = rt_device_open("cuda", &dev, err, sizeof err);
    if (rc == 0) {
        cr_assert_not_null(dev);
        cr_assert_eq(dev->kind, FERRY_DEVICE_CUDA);
        cr_assert_eq(dev->version, FERRY_DEVICE_ABI_VERSION);
        cr_assert_eq(dev->size, sizeof(ferry_device_t));
        cr_assert_str_eq(dev->name, "cuda:0");
        cr_assert(strncmp(dev->description, "cuda:0 ", 7) == 0 &&
                      strstr(dev->description, " GiB)"),
                  "description: %s", dev->description);
        cr_assert(dev->stream && dev->cublas && dev->cudnn);
        cr_assert_eq(dev->ops->version, FERRY_DEVICE_ABI_VERSION);
        cr_assert_eq(dev->ops->size, sizeof(ferry_device_ops_t));
        fprintf(stderr, "opened %s\n", dev->description);
        rt_device_close(dev);
    } else {
        cr_assert_eq(rc, FERRY_ENODEV, "rc %d (%s): %s", rc, ferry_err_name(rc), err);
        cr_assert_null(dev);
        cr_assert(strncmp(err, "cuda:0: ", 8) == 0 && strlen(err) > 8, "reason: '%s'",
                  err);
        fprintf(stderr, "no GPU: %s\n", err);
    }
    tcom_assert_no_leaks();
}

/* No machine has 1025 GPUs: with none visible the reason says so, with some
 * it says there is no such one. */
Test(cuda_open, an_index_past_the_last_gpu_is_enodev)
{
    ferry_device_t *dev = NULL;
    char err[512] = "";
    int rc = rt_device_open("cuda:1024", &dev, err, sizeof err);
    cr_assert_eq(rc, FERRY_ENODEV, "rc %d: %s", rc, err);
    cr_assert_null(dev);
    cr_assert(strncmp(err, "cuda:1024: ", 11) == 0, "reason: '%s'", err);
    cr_assert(strstr(err, "no GPU visible") || strstr(err, "no such GPU") ||
                  strstr(err, "cuda support"),
              "reason: '%s'", err);
    tcom_assert_no_leaks();
}

Test(cuda_open, a_backend_that_will_not_load_is_named_in_the_error)
{
    cr_assert_eq(setenv("FERRY_CUDA_BACKEND", "/nonexistent.so", 1), 0);
    ferry_device_t *dev = NULL;
    char err[512] = "";
    int rc = rt_device_open("cuda", &dev, err, sizeof err);
    cr_assert_eq(rc, FERRY_ENODEV, "rc %d: %s", rc, err);
    cr_assert_null(dev);
    cr_assert(strstr(err, "cannot load the cuda backend") &&
                  strstr(err, "/nonexistent.so"),
              "reason: '%s'", err);
    /* Loaded once per process: the second open says the same. */
    char again[512] = "";
    cr_assert_eq(rt_device_open("cuda:0", &dev, again, sizeof again), FERRY_ENODEV);
    cr_assert_str_eq(again, err);
    tcom_assert_no_leaks();
}

Test(cuda_open, a_library_that_is_not_a_backend_is_refused)
{
    cr_assert_eq(setenv("FERRY_CUDA_BACKEND", "libm.so.6", 1), 0);
    ferry_device_t *dev = NULL;
    char err[512] = "";
    int rc = rt_device_open("cuda", &dev, err, sizeof err);
    cr_assert_eq(rc, FERRY_ENODEV, "rc %d: %s", rc, err);
    cr_assert(strstr(err, "libm.so.6") && strstr(err, "not a ferry cuda backend"),
              "reason: '%s'", err);
    tcom_assert_no_leaks();
}

/* The built module, dlopened as device.c does: only the two entry points are
 * visible, and they have the signatures device.c calls them with. */
Test(cuda_open, the_backend_exports_only_its_entry_points_and_extension_table)
{
    const char *path = getenv("FERRY_TEST_CUDA_BACKEND");
    if (!path || !path[0]) {
        fprintf(stderr, "skipped: the cuda backend was not built\n");
        cr_skip_test("the cuda backend was not built");
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(h, "dlopen %s: %s", path, dlerror());
    rt_cuda_open_fn open = (rt_cuda_open_fn)(uintptr_t)dlsym(h, RT_CUDA_OPEN_SYMBOL);
    rt_cuda_close_fn close = (rt_cuda_close_fn)(uintptr_t)dlsym(h, RT_CUDA_CLOSE_SYMBOL);
    cr_assert(open && close);
    const rt_device_ext_t *ext = dlsym(h, RT_CUDA_EXT_SYMBOL);
    cr_assert_not_null(ext, "no %s", RT_CUDA_EXT_SYMBOL);
    cr_assert_eq(ext->version, RT_DEVICE_EXT_VERSION);
    cr_assert_eq(ext->size, sizeof(rt_device_ext_t));
    cr_assert(ext->mem_info && ext->gather && ext->set_precision);
    const char *hidden[] = {"cuda_ops",     "cuda_gemm",    "cuda_alloc",
                            "cuda_k_fill",  "cuda_rt_fail", "cuda_k_gather",
                            "cuda_gather",  "cuda_conv_choose"};
    for (size_t i = 0; i < sizeof hidden / sizeof hidden[0]; i++)
        cr_assert_null(dlsym(h, hidden[i]), "%s is exported", hidden[i]);

    /* A negative index is never a GPU, whether or not one is visible. */
    ferry_device_t *dev = (ferry_device_t *)1;
    char err[512] = "";
    cr_assert_eq(open(-1, &dev, err, sizeof err), FERRY_ENODEV, "%s", err);
    cr_assert_null(dev);
    cr_assert(strncmp(err, "cuda:-1: ", 9) == 0, "reason: '%s'", err);
    close(NULL);
    /* Kept loaded, as device.c keeps it: the CUDA libraries do not unload
     * cleanly. */
    tcom_assert_no_leaks();
}

/* Picks a backend by name. The cuda one lives in ferry-cuda.so, loaded here
 * the first time a cuda device is asked for and kept for the process's
 * life: the CUDA libraries are large, and a process that never asks for a
 * GPU should not pay for loading them. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ferry/error.h>

#include "base/base.h"

#include "cuda_backend.h"
#include "device.h"

/* Overrides where ferry-cuda.so is looked for (tests, relocated installs). */
#define CUDA_BACKEND_ENV "FERRY_CUDA_BACKEND"

static struct {
    pthread_once_t once;
    rt_cuda_open_fn open;
    rt_cuda_close_fn close;
    const rt_device_ext_t *ext;
    char why[512]; /* why it could not be loaded */
} cuda = {.once = PTHREAD_ONCE_INIT};

static bool try_load(const char *path)
{
    if (!path || !path[0])
        return false;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(cuda.why, sizeof cuda.why, "cannot load the cuda backend: %s",
                 dlerror());
        return false;
    }
    cuda.open = (rt_cuda_open_fn)(uintptr_t)dlsym(h, RT_CUDA_OPEN_SYMBOL);
    cuda.close = (rt_cuda_close_fn)(uintptr_t)dlsym(h, RT_CUDA_CLOSE_SYMBOL);
    cuda.ext = dlsym(h, RT_CUDA_EXT_SYMBOL);
    if (cuda.ext && (cuda.ext->version != RT_DEVICE_EXT_VERSION ||
                     cuda.ext->size != sizeof(rt_device_ext_t))) {
        snprintf(cuda.why, sizeof cuda.why,
                 "%s: a cuda backend of another ferry (extension version %u size %u)",
                 path, cuda.ext->version, cuda.ext->size);
        cuda.open = NULL;
        cuda.ext = NULL;
        dlclose(h);
        return false;
    }
    if (!cuda.open || !cuda.close || !cuda.ext) {
        snprintf(cuda.why, sizeof cuda.why, "%s: not a ferry cuda backend (no %s, %s or %s)",
                 path, RT_CUDA_OPEN_SYMBOL, RT_CUDA_CLOSE_SYMBOL, RT_CUDA_EXT_SYMBOL);
        cuda.open = NULL;
        cuda.ext = NULL;
        dlclose(h);
        return false;
    }
    return true;
}

static void load_cuda(void)
{
    const char *env = getenv(CUDA_BACKEND_ENV);
    if (env && env[0]) {
        try_load(env);
        return;
    }
    if (!FERRY_CUDA_BACKEND_BUILT[0]) {
        snprintf(cuda.why, sizeof cuda.why,
                 "this ferry was built without cuda support (the CUDA toolkit was not "
                 "found, or -Dcuda=disabled)");
        return;
    }
    /* The build tree's copy first: a build that is run uninstalled must not
     * pick up an older installed backend. */
    if (!try_load(FERRY_CUDA_BACKEND_BUILT))
        try_load(FERRY_CUDA_BACKEND_INSTALLED);
}

/* "cuda" -> 0, "cuda:N" -> N; -1 for anything else. */
static int cuda_index(const char *want)
{
    if (strcmp(want, "cuda") == 0)
        return 0;
    if (strncmp(want, "cuda:", 5) != 0)
        return -1;
    long idx;
    if (!base_parse_long(want + 5, 0, 1024, &idx))
        return -1;
    return (int)idx;
}

static int open_cuda(int index, ferry_device_t **out, char *err, size_t errlen)
{
    pthread_once(&cuda.once, load_cuda);
    if (!cuda.open)
        return base_errf(err, errlen, FERRY_ENODEV, "cuda:%d: %.400s", index, cuda.why);
    return cuda.open(index, out, err, errlen);
}

bool rt_device_name_ok(const char *name)
{
    return name && (strcmp(name, "cpu") == 0 || strcmp(name, "auto") == 0 ||
                    cuda_index(name) >= 0);
}

/* Without the NVIDIA driver's control node no GPU can be visible: "auto"
 * then skips loading the CUDA libraries, which costs a noticeable part of a
 * second at every worker start. */
static bool nvidia_driver_present(void)
{
    return access("/dev/nvidiactl", F_OK) == 0;
}

int rt_device_open(const char *want, ferry_device_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!want || strcmp(want, "auto") == 0) {
        char why[512];
        if (nvidia_driver_present() && open_cuda(0, out, why, sizeof why) == 0)
            return 0;
        return rt_cpu_open(out, err, errlen);
    }
    if (strcmp(want, "cpu") == 0)
        return rt_cpu_open(out, err, errlen);
    int idx = cuda_index(want);
    if (idx >= 0)
        return open_cuda(idx, out, err, errlen);
    return base_errf(err, errlen, FERRY_EINVAL,
                     "unknown device '%s' (expected cpu, cuda, cuda:N or auto)", want);
}

const rt_device_ext_t *rt_device_ext(const ferry_device_t *dev)
{
    /* A cuda device exists only once the backend loaded, ext with it. */
    return dev->kind == FERRY_DEVICE_CUDA && cuda.ext ? cuda.ext : &rt_cpu_ext;
}

static const char *const precision_names[] = {
    [RT_PREC_FP32] = "fp32", [RT_PREC_TF32] = "tf32", [RT_PREC_BF16] = "bf16"};

int rt_precision_parse(const char *name, rt_precision *out)
{
    for (int i = 0; i < (int)(sizeof precision_names / sizeof *precision_names); i++)
        if (name && strcmp(name, precision_names[i]) == 0) {
            *out = (rt_precision)i;
            return 0;
        }
    return FERRY_EINVAL;
}

const char *rt_precision_name(rt_precision p)
{
    return (unsigned)p < sizeof precision_names / sizeof *precision_names
               ? precision_names[p]
               : "?";
}

void rt_device_close(ferry_device_t *dev)
{
    if (!dev)
        return;
    if (dev->kind == FERRY_DEVICE_CUDA && cuda.close)
        cuda.close(dev);
    else
        rt_cpu_close(dev);
}

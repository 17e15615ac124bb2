/* runtime/data — the loader's device side. A GPU worker's steps would each
 * wait on a host-to-device copy of their batch (the loader gathers it on
 * the host, the trainer uploads it); with the set held on the device, the
 * loader hands out positions only and the batch is gathered there by the
 * epoch's permutation, which crosses once per epoch (240 KB for
 * Fashion-MNIST's 60,000 samples). The gather copies the same bytes the
 * host gather would, so training is bit for bit what it was. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <ferry/error.h>

#include "data_int.h"
#include "runtime/device/device.h"

struct rt_devset {
    ferry_device_t *dev;
    const rt_dataset *ds;
    float *x;
    int32_t *labels;
    float *targets;
    uint32_t *perm;      /* device: the epoch's permutation */
    uint64_t epoch_id;   /* whose permutation perm holds */
    const uint32_t *src; /* ... and from which host array */
    bool have_perm;
};

static size_t x_bytes(const rt_dataset *ds)
{
    return ds->n * (size_t)ds->features * sizeof(float);
}

static size_t label_bytes(const rt_dataset *ds)
{
    return ds->labels ? ds->n * sizeof(int32_t) : 0;
}

static size_t target_bytes(const rt_dataset *ds)
{
    return ds->targets ? ds->n * (size_t)ds->outputs * sizeof(float) : 0;
}

size_t rt_devset_bytes(const rt_dataset *ds)
{
    if (!ds->x) /* read in place from its file: staged, never copied whole */
        return SIZE_MAX;
    return x_bytes(ds) + label_bytes(ds) + target_bytes(ds) + ds->n * sizeof(uint32_t);
}

int rt_devset_budget(size_t free_bytes, const char *limit, size_t *budget)
{
    if (!limit || !limit[0]) {
        *budget = free_bytes / 2;
        return 0;
    }
    if (*limit < '0' || *limit > '9')
        return FERRY_EINVAL;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(limit, &end, 10);
    if (errno == ERANGE)
        return FERRY_EINVAL;
    unsigned shift = 0;
    switch (*end) {
    case '\0':
        break;
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'M':
        shift = 20;
        break;
    case 'G':
        shift = 30;
        break;
    default:
        return FERRY_EINVAL;
    }
    if (shift && end[1] != '\0')
        return FERRY_EINVAL;
    if (v > (SIZE_MAX >> shift))
        return FERRY_EINVAL;
    *budget = (size_t)v << shift;
    return 0;
}

rt_data_place rt_data_place_choose(int kind, bool host_batches, size_t need,
                                   size_t budget)
{
    if (kind == FERRY_DEVICE_CPU)
        return RT_DATA_IN_PLACE;
    if (host_batches)
        return RT_DATA_UPLOADED;
    return need <= budget ? RT_DATA_ON_DEVICE : RT_DATA_STAGED;
}

const char *rt_data_place_name(rt_data_place p)
{
    switch (p) {
    case RT_DATA_IN_PLACE:
        return "in place";
    case RT_DATA_ON_DEVICE:
        return "on the device";
    case RT_DATA_STAGED:
        return "staged";
    case RT_DATA_UPLOADED:
        return "uploaded";
    }
    return "?";
}

static const char *budget_source(void)
{
    const char *limit = getenv(RT_DEVSET_LIMIT_ENV);
    return limit && limit[0] ? RT_DEVSET_LIMIT_ENV : "half the free memory";
}

/* The budget of `dev` from its free memory and the environment. */
static int device_budget(ferry_device_t *dev, size_t *budget, char *err, size_t errlen)
{
    size_t free_b = 0, total_b = 0;
    int rc = rt_device_ext(dev)->mem_info(dev, &free_b, &total_b);
    if (rc)
        return base_errf(err, errlen, rc, "%s: cannot read its free memory: %s",
                         dev->name, ferry_strerror(rc));
    const char *limit = getenv(RT_DEVSET_LIMIT_ENV);
    if (rt_devset_budget(free_b, limit, budget))
        return base_errf(err, errlen, FERRY_EINVAL,
                         "%s=%s: not a number of bytes (digits, then k, M or G at most)",
                         RT_DEVSET_LIMIT_ENV, limit);
    return 0;
}

int rt_data_place_for(ferry_device_t *dev, const rt_dataset *ds, bool host_batches,
                      rt_data_place *out, char *why, size_t whylen)
{
    size_t need = rt_devset_bytes(ds), budget = 0;
    if (dev->kind == FERRY_DEVICE_CPU || host_batches) {
        *out = rt_data_place_choose(dev->kind, host_batches, need, 0);
        base_errf(why, whylen, 0, "%s", host_batches ? "host batches asked for" : "");
        return 0;
    }
    int rc = device_budget(dev, &budget, why, whylen);
    if (rc)
        return rc;
    *out = rt_data_place_choose(dev->kind, host_batches, need, budget);
    base_errf(why, whylen, 0, "%.1f MB, %s %.1f MB (%s)", need / 1e6,
              need <= budget ? "within" : "more than", budget / 1e6, budget_source());
    return 0;
}

void rt_devset_destroy(rt_devset *s)
{
    if (!s)
        return;
    const ferry_device_ops_t *o = s->dev->ops;
    o->free(s->dev, s->x);
    o->free(s->dev, s->labels);
    o->free(s->dev, s->targets);
    o->free(s->dev, s->perm);
    free(s);
}

static int upload(ferry_device_t *dev, void **dst, const void *src, size_t bytes)
{
    if (bytes == 0)
        return 0;
    if (!(*dst = dev->ops->alloc(dev, bytes)))
        return FERRY_ENOMEM;
    return dev->ops->upload(dev, *dst, src, bytes);
}

int rt_devset_create(ferry_device_t *dev, const rt_dataset *ds, rt_devset **out,
                     char *err, size_t errlen)
{
    *out = NULL;
    if (!dev || !ds || ds->n == 0 || ds->n > UINT32_MAX || (!ds->labels && !ds->targets))
        return base_errf(err, errlen, FERRY_EINVAL, "no set to copy to the device");
    size_t need = rt_devset_bytes(ds), budget = 0;
    int rc = device_budget(dev, &budget, err, errlen);
    if (rc)
        return rc;
    if (need > budget)
        return base_errf(err, errlen, FERRY_ENOSPC,
                         "%s: the set takes %.1f MB, more than the %.1f MB it may (%s)",
                         dev->name, need / 1e6, budget / 1e6, budget_source());
    rt_devset *s = calloc(1, sizeof *s);
    if (!s)
        return FERRY_ENOMEM;
    s->dev = dev;
    s->ds = ds;
    void *x = NULL, *labels = NULL, *targets = NULL;
    rc = upload(dev, &x, ds->x, x_bytes(ds));
    s->x = x;
    if (rc == 0)
        rc = upload(dev, &labels, ds->labels, label_bytes(ds));
    s->labels = labels;
    if (rc == 0)
        rc = upload(dev, &targets, ds->targets, target_bytes(ds));
    s->targets = targets;
    if (rc == 0 && !(s->perm = dev->ops->alloc(dev, ds->n * sizeof(uint32_t))))
        rc = FERRY_ENOMEM;
    /* The uploads are queued: a failure shows at the sync. */
    if (rc == 0)
        rc = dev->ops->sync(dev);
    if (rc) {
        rt_devset_destroy(s);
        return base_errf(err, errlen, rc, "%s: copying %.1f MB of samples: %s", dev->name,
                         need / 1e6, ferry_strerror(rc));
    }
    *out = s;
    return 0;
}

bool rt_devset_serves(const rt_devset *s, const rt_batch_host *hb)
{
    return s && hb && hb->set == s->ds && hb->perm;
}

int rt_devset_batch(rt_devset *s, const rt_batch_host *hb, float *x, int32_t *labels,
                    float *targets)
{
    if (!rt_devset_serves(s, hb) || hb->perm_n != s->ds->n || hb->pos > hb->perm_n ||
        (size_t)hb->n > hb->perm_n - hb->pos)
        return FERRY_EINVAL;
    ferry_device_t *dev = s->dev;
    int rc = 0;
    if (!s->have_perm || s->epoch_id != hb->epoch_id || s->src != hb->perm) {
        /* The upload is staged before it returns: the loader may rewrite
         * its permutation at the next epoch's begin. */
        rc = dev->ops->upload(dev, s->perm, hb->perm, hb->perm_n * sizeof(uint32_t));
        if (rc)
            return rc;
        s->have_perm = true;
        s->epoch_id = hb->epoch_id;
        s->src = hb->perm;
    }
    if (hb->n == 0)
        return 0;
    const rt_device_ext_t *ext = rt_device_ext(dev);
    const uint32_t *idx = s->perm + hb->pos;
    size_t rows = (size_t)hb->n;
    const rt_dataset *ds = s->ds;
    rc = ext->gather(dev, x, s->x, idx, rows, (size_t)ds->features * sizeof(float));
    if (rc == 0 && ds->labels && labels)
        rc = ext->gather(dev, labels, s->labels, idx, rows, sizeof(int32_t));
    if (rc == 0 && ds->targets && targets)
        rc = ext->gather(dev, targets, s->targets, idx, rows,
                         (size_t)ds->outputs * sizeof(float));
    return rc;
}

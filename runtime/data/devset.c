/* runtime/data — the loader's device side. A GPU worker's steps would each
 * wait on a host-to-device copy of their batch (the loader gathers it on
 * the host, the trainer uploads it); with the set held on the device, the
 * loader hands out positions only and the batch is gathered there by the
 * epoch's permutation, which crosses once per epoch (240 KB for
 * Fashion-MNIST's 60,000 samples). The gather copies the same bytes the
 * host gather would, so training is bit for bit what it was. */
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
    return x_bytes(ds) + label_bytes(ds) + target_bytes(ds) + ds->n * sizeof(uint32_t);
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

int rt_devset_create(ferry_device_t *dev, const rt_dataset *ds, rt_devset **out, char *err,
                     size_t errlen)
{
    *out = NULL;
    if (!dev || !ds || ds->n == 0 || ds->n > UINT32_MAX || (!ds->labels && !ds->targets))
        return rt_data_fail(err, errlen, FERRY_EINVAL, "no set to copy to the device");
    size_t free_b = 0, total_b = 0, need = rt_devset_bytes(ds);
    int rc = rt_device_ext(dev)->mem_info(dev, &free_b, &total_b);
    if (rc)
        return rt_data_fail(err, errlen, rc, "%s: cannot read its free memory: %s",
                            dev->name, ferry_strerror(rc));
    if (need > free_b / 2)
        return rt_data_fail(err, errlen, FERRY_ENOSPC,
                            "%s: the set takes %.1f MB, more than half the %.1f MB free",
                            dev->name, need / 1e6, free_b / 1e6);
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
        return rt_data_fail(err, errlen, rc, "%s: copying %.1f MB of samples: %s",
                            dev->name, need / 1e6, ferry_strerror(rc));
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

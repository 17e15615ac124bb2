/* runtime/data — the device side of a set too large to hold on the device.
 * Without it each step's batch went up with a plain upload: from the
 * loader's pageable buffers, which the driver copies through a staging
 * buffer of its own before the call returns, on the compute queue, so the
 * GPU waited on every copy. Here the loader gathers into page-locked
 * buffers and the copy engine moves them on the device's copy queue.
 *
 * Step k uses lane k % STAGE_LANES:
 *   1. the compute queue records `consumed` for the lane of step k-1 (the
 *      work issued since that batch is its step);
 *   2. the host waits for this lane's `consumed` (step k-LANES is done with
 *      its device buffers: with two lanes, long since);
 *   3. the copy queue copies the batch and records `copied`; the compute
 *      queue waits for it, the host too (the loader reuses its buffer after
 *      the caller's next rt_loader_next). The copy overlaps what the compute
 *      queue still runs of step k-1: its backward pass and optimizer step. */
#include <stdlib.h>

#include <ferry/error.h>

#include "data_int.h"
#include "runtime/device/device.h"

#define STAGE_LANES 2

typedef struct lane {
    float *x, *targets;
    int32_t *labels;
    void *copied, *consumed; /* marks; NULL without a copy queue */
    bool in_use;             /* consumed was recorded since the lane's last batch */
} lane;

struct rt_stager {
    ferry_device_t *dev;
    const rt_device_ext_t *ext;
    bool async;
    int rows_max, features, outputs; /* outputs 0: labels */
    lane lanes[STAGE_LANES];
    int next, prev; /* the lane of the next batch, of the last (-1: none) */
};

static bool has_queue(const rt_device_ext_t *e)
{
    return e->size >= sizeof(rt_device_ext_t) && e->host_alloc && e->host_free &&
           e->mark_create && e->mark_destroy && e->mark_record && e->mark_wait &&
           e->mark_sync && e->upload_async;
}

void rt_stager_destroy(rt_stager *s)
{
    if (!s)
        return;
    ferry_device_t *dev = s->dev;
    /* No copy is in flight (each batch waits for its own), and the frees are
     * ordered after the compute queue's work. */
    for (int i = 0; i < STAGE_LANES; i++) {
        lane *ln = &s->lanes[i];
        dev->ops->free(dev, ln->x);
        dev->ops->free(dev, ln->labels);
        dev->ops->free(dev, ln->targets);
        if (s->async) {
            s->ext->mark_destroy(dev, ln->copied);
            s->ext->mark_destroy(dev, ln->consumed);
        }
    }
    free(s);
}

int rt_stager_create(ferry_device_t *dev, const rt_dataset *ds, int rows_max,
                     rt_stager **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!dev || !ds || rows_max < 1 || ds->features < 1 ||
        (!ds->labels && ds->outputs < 1))
        return base_errf(err, errlen, FERRY_EINVAL, "staging: no batch shape");
    rt_stager *s = calloc(1, sizeof *s);
    if (!s)
        return base_errf(err, errlen, FERRY_ENOMEM, "staging: out of memory");
    s->dev = dev;
    s->ext = rt_device_ext(dev);
    s->async = has_queue(s->ext);
    s->rows_max = rows_max;
    s->features = ds->features;
    s->outputs = ds->labels ? 0 : ds->outputs;
    s->prev = -1;
    size_t rows = (size_t)rows_max;
    int rc = 0;
    for (int i = 0; i < STAGE_LANES && rc == 0; i++) {
        lane *ln = &s->lanes[i];
        ln->x = dev->ops->alloc(dev, rows * (size_t)s->features * sizeof(float));
        if (s->outputs)
            ln->targets = dev->ops->alloc(dev, rows * (size_t)s->outputs * sizeof(float));
        else
            ln->labels = dev->ops->alloc(dev, rows * sizeof(int32_t));
        if (!ln->x || (!ln->targets && !ln->labels))
            rc = base_errf(err, errlen, FERRY_ENOMEM,
                           "%s: cannot allocate staging buffers for %d samples",
                           dev->name, rows_max);
        else if (s->async && ((rc = s->ext->mark_create(dev, &ln->copied)) ||
                              (rc = s->ext->mark_create(dev, &ln->consumed))))
            base_errf(err, errlen, rc, "%s: cannot create the staging marks: %s",
                      dev->name, ferry_strerror(rc));
    }
    if (rc) {
        rt_stager_destroy(s);
        return rc;
    }
    *out = s;
    return 0;
}

bool rt_stager_async(const rt_stager *s)
{
    return s && s->async;
}

static void *stager_host_alloc(void *arg, size_t bytes)
{
    rt_stager *s = arg;
    return s->async ? s->ext->host_alloc(s->dev, bytes) : rt_data_alloc(bytes);
}

static void stager_host_free(void *arg, void *p)
{
    rt_stager *s = arg;
    if (s->async)
        s->ext->host_free(s->dev, p);
    else
        free(p);
}

void rt_stager_loader_opts(rt_stager *s, rt_loader_opts *o)
{
    o->host_alloc = stager_host_alloc;
    o->host_free = stager_host_free;
    o->host_arg = s;
}

/* One array of the batch into a lane: on the copy queue, or uploaded. */
static int put(rt_stager *s, void *dst, const void *src, size_t bytes)
{
    if (bytes == 0)
        return 0;
    if (s->async)
        return s->ext->upload_async(s->dev, dst, src, bytes);
    return s->dev->ops->upload(s->dev, dst, src, bytes);
}

int rt_stager_batch(rt_stager *s, const rt_batch_host *hb, ferry_batch_t *b)
{
    if (!s || !hb || !b || hb->n < 0 || hb->n > s->rows_max || !hb->x ||
        (s->outputs ? !hb->targets : !hb->labels))
        return FERRY_EINVAL;
    ferry_device_t *dev = s->dev;
    const rt_device_ext_t *e = s->ext;
    int rc = 0;
    int i = s->next;
    lane *ln = &s->lanes[i];
    if (s->async) {
        if (s->prev >= 0) {
            lane *last = &s->lanes[s->prev];
            if ((rc = e->mark_record(dev, last->consumed, RT_QUEUE_COMPUTE)))
                return rc;
            last->in_use = true;
        }
        if (ln->in_use && (rc = e->mark_sync(dev, ln->consumed)))
            return rc;
        ln->in_use = false;
    }
    size_t n = (size_t)hb->n;
    rc = put(s, ln->x, hb->x, n * (size_t)s->features * sizeof(float));
    if (rc == 0 && s->outputs)
        rc = put(s, ln->targets, hb->targets, n * (size_t)s->outputs * sizeof(float));
    else if (rc == 0)
        rc = put(s, ln->labels, hb->labels, n * sizeof(int32_t));
    if (rc == 0 && s->async) {
        if ((rc = e->mark_record(dev, ln->copied, RT_QUEUE_COPY)) == 0 &&
            (rc = e->mark_wait(dev, ln->copied, RT_QUEUE_COMPUTE)) == 0)
            rc = e->mark_sync(dev, ln->copied);
    }
    if (rc)
        return rc;
    s->prev = i;
    s->next = (i + 1) % STAGE_LANES;
    *b = (ferry_batch_t){.n = hb->n,
                         .x = ln->x,
                         .labels = s->outputs ? NULL : ln->labels,
                         .targets = s->outputs ? ln->targets : NULL};
    return 0;
}

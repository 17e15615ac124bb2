/* Synchronous data parallelism for the trainer: the gradient's all-reduce
 * in buckets that start while backward still runs, the initial parameters
 * from rank 0, and sums of host values (evaluation).
 *
 * The reduction buffer is the gradient itself on the cpu, with one 16-float
 * slot in front of it for the step's loss: the loss is summed with the
 * gradient, so every rank learns the global loss — and stops together on a
 * NaN — without a collective of its own. On another device the gradient is
 * copied bucket by bucket into a host buffer of the same layout, reduced
 * there and copied back (the gRPC ring works on host memory); the buffer
 * is page-locked where the device can give such memory, so that the
 * copies are DMA with no bounce through the driver's own staging.
 *
 * Buckets are cut at tensor boundaries from the last tensor backwards, the
 * order backward produces them, each at least bucket_bytes; a bucket starts
 * when all its tensors are ready and every bucket after it has started, so
 * every rank starts the same collectives in the same order. The bucket
 * holding the loss slot starts last, once loss_grad has returned. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timeline.h"
#include "train.h"

#define SLOT 16 /* floats in front of the gradient: [0] the loss, the rest 0 */
/* DDP's bucket_cap_mb. Every bucket is one collective, and each costs a
 * fixed ~0.2-0.3 ms of calls and thread hand-offs here whatever its size:
 * the mlp's 0.9 MB gradient in one bucket trained 18% faster on 2 workers
 * and 30% on 4 than in 256 KiB buckets (2 a step), which overlap backward
 * but pay that cost twice. Models with gradients of many such buckets
 * still start them while backward runs. */
#define DEFAULT_BUCKET ((size_t)PROTO_TRAIN_WORKER_BUCKET_BYTES)

typedef struct bucket {
    size_t lo, hi;        /* in the reduction buffer */
    int t_lo, t_hi;       /* tensors [t_lo, t_hi) */
    int ready;            /* tensors ready this step */
    rt_comm_op *op;       /* in flight */
} bucket;

struct rt_sync {
    ferry_device_t *dev;
    rt_comm *comm;
    size_t plen;
    float *red;       /* SLOT + plen floats */
    bool red_on_dev;  /* allocated with the cpu device: the model writes into it */
    bool red_pinned;  /* else from the device's host_alloc: page-locked */
    float *grad;      /* the model's gradient (device) this step */
    float weight;     /* this rank's share of the global batch */
    bucket *b;
    int nb, next;     /* buckets; the next to start */
    int *bucket_of;   /* tensor -> bucket */
    int failed;       /* a start failed: the rest wait for the error */
    rt_timeline *tl;  /* the trainer's (NULL: none) */
};

static bool has_host_alloc(const rt_device_ext_t *e)
{
    return e->size >= sizeof(rt_device_ext_t) && e->host_alloc && e->host_free;
}

int rt_sync_create(const ferry_model_t *m, ferry_device_t *dev, rt_comm *comm,
                   size_t bucket_bytes, rt_sync **out, char *err, size_t errlen)
{
    *out = NULL;
    rt_sync *s = calloc(1, sizeof *s);
    if (!s)
        return FERRY_ENOMEM;
    s->dev = dev;
    s->comm = comm;
    int nt = 0;
    while (m->params[nt].name)
        nt++;
    size_t *off = calloc((size_t)nt + 1, sizeof *off);
    s->b = calloc((size_t)nt, sizeof *s->b);
    s->bucket_of = calloc((size_t)nt, sizeof *s->bucket_of);
    if (!off || !s->b || !s->bucket_of)
        goto nomem;
    s->plen = off[nt] = ferry_model_layout(m, off);
    s->red_on_dev = dev->kind == FERRY_DEVICE_CPU;
    size_t red_bytes = (SLOT + s->plen) * sizeof(float);
    const rt_device_ext_t *ext = rt_device_ext(dev);
    if (s->red_on_dev)
        s->red = dev->ops->alloc(dev, red_bytes);
    else if (has_host_alloc(ext) && (s->red = ext->host_alloc(dev, red_bytes)))
        s->red_pinned = true;
    else /* no page-locked memory left: pageable still works, slower */
        s->red = aligned_alloc(64, (red_bytes + 63) / 64 * 64);
    if (!s->red)
        goto nomem;
    memset(s->red, 0, red_bytes);

    /* DDP's rule: a tensor that would overflow the bucket starts the next
     * one; a tensor larger than a bucket has one of its own. */
    size_t floats = (bucket_bytes ? bucket_bytes : DEFAULT_BUCKET) / sizeof(float);
    size_t hi = SLOT + s->plen;
    int t_hi = nt;
    for (int t = nt - 1; t >= 0; t--) {
        size_t lo = SLOT + off[t], end = SLOT + off[t + 1];
        if (t_hi > t + 1 && hi - lo > floats) {
            s->b[s->nb++] = (bucket){.lo = end, .hi = hi, .t_lo = t + 1, .t_hi = t_hi};
            hi = end;
            t_hi = t + 1;
        }
    }
    s->b[s->nb++] = (bucket){.lo = 0, .hi = hi, .t_lo = 0, .t_hi = t_hi};
    for (int k = 0; k < s->nb; k++)
        for (int t = s->b[k].t_lo; t < s->b[k].t_hi; t++)
            s->bucket_of[t] = k;
    free(off);
    *out = s;
    return 0;

nomem:
    free(off);
    rt_sync_destroy(s);
    snprintf(err, errlen, "no memory for the all-reduce buckets");
    return FERRY_ENOMEM;
}

void rt_sync_destroy(rt_sync *s)
{
    if (!s)
        return;
    if (s->red_on_dev)
        s->dev->ops->free(s->dev, s->red);
    else if (s->red_pinned)
        rt_device_ext(s->dev)->host_free(s->dev, s->red);
    else
        free(s->red);
    free(s->b);
    free(s->bucket_of);
    free(s);
}

float *rt_sync_model_grad(rt_sync *s)
{
    return s->red_on_dev ? s->red + SLOT : NULL;
}

int rt_sync_buckets(const rt_sync *s)
{
    return s->nb;
}

void rt_sync_step_begin(rt_sync *s, float *grad, float weight)
{
    s->grad = grad;
    s->weight = weight;
    s->next = 0;
    s->failed = 0;
    for (int k = 0; k < s->nb; k++) {
        s->b[k].ready = 0;
        s->b[k].op = NULL;
    }
}

static void start_bucket(rt_sync *s, bucket *b)
{
    if (s->failed)
        return;
    int rc = rt_comm_allreduce_start(s->comm, s->red + b->lo, b->hi - b->lo, &b->op);
    if (rc)
        s->failed = rc;
}

static void launch(rt_sync *s, bucket *b)
{
    size_t glo = b->lo > SLOT ? b->lo - SLOT : 0, ghi = b->hi - SLOT;
    if (!s->red_on_dev && ghi > glo) {
        int rc = s->dev->ops->download(s->dev, s->red + SLOT + glo, s->grad + glo,
                                       (ghi - glo) * sizeof(float));
        if (rc && !s->failed)
            s->failed = rc;
    }
    if (s->weight != 1.0f)
        for (size_t i = SLOT + glo; i < b->hi; i++)
            s->red[i] *= s->weight;
    start_bucket(s, b);
}

/* Starts the buckets that are ready, in order; the loss slot's waits for
 * rt_sync_step_end. */
static void launch_ready(rt_sync *s, bool all)
{
    while (s->next < s->nb) {
        bucket *b = &s->b[s->next];
        if (!all && (b->lo == 0 || b->ready < b->t_hi - b->t_lo))
            return;
        launch(s, b);
        s->next++;
    }
}

void rt_sync_grad_ready(void *arg, int tensor)
{
    rt_sync *s = arg;
    int nt = s->b[0].t_hi; /* the first bucket ends with the last tensor */
    if (tensor < 0 || tensor >= nt)
        return;
    s->b[s->bucket_of[tensor]].ready++;
    launch_ready(s, false);
}

int rt_sync_step_end(rt_sync *s, float loss, bool computed, float *global_loss,
                     bool (*cancelled)(void *), void *arg, char *err, size_t errlen)
{
    /* Each bucket's wait is timed from the end of the one before (the
     * first from here, with the starts of the buckets left): together they
     * are the step's all-reduce time. */
    double t0 = s->tl ? rt_timeline_now() : 0;
    if (computed) {
        s->red[0] = loss * s->weight;
        launch_ready(s, true);
    } else {
        /* No samples here this step (a last global batch smaller than the
         * world): nothing to add, but the collectives are everyone's. No
         * bucket has started: grad_ready comes only from loss_grad. */
        memset(s->red, 0, (SLOT + s->plen) * sizeof(float));
        for (; s->next < s->nb; s->next++)
            start_bucket(s, &s->b[s->next]);
    }
    int first = 0;
    char why[512] = "";
    for (int k = 0; k < s->nb; k++) {
        if (!s->b[k].op)
            continue;
        int rc = rt_comm_wait(s->comm, s->b[k].op, cancelled, arg, first ? NULL : why,
                              sizeof why);
        t0 = rt_timeline_since(s->tl, PROTO_TL_BUCKET, (uint32_t)k, t0);
        s->b[k].op = NULL;
        if (rc && !first)
            first = rc;
    }
    if (!first && s->failed) {
        first = s->failed;
        snprintf(why, sizeof why, "cannot start the all-reduce: %s", ferry_strerror(first));
    }
    if (first) {
        snprintf(err, errlen, "%s", why);
        return first;
    }
    *global_loss = s->red[0];
    if (!s->red_on_dev) {
        int rc = s->dev->ops->upload(s->dev, s->grad, s->red + SLOT, s->plen * sizeof(float));
        if (rc) {
            snprintf(err, errlen, "cannot copy the summed gradient to %s: %s",
                     s->dev->name, ferry_strerror(rc));
            return rc;
        }
    }
    return 0;
}

void rt_sync_step_abort(rt_sync *s, const char *why)
{
    rt_comm_abort(s->comm, why);
    for (int k = 0; k < s->nb; k++)
        if (s->b[k].op) {
            rt_comm_wait(s->comm, s->b[k].op, NULL, NULL, NULL, 0);
            s->b[k].op = NULL;
        }
}

int rt_sync_broadcast(rt_sync *s, float *params, bool (*cancelled)(void *), void *arg,
                      char *err, size_t errlen)
{
    float *host = s->red_on_dev ? params : s->red + SLOT;
    int rc = s->red_on_dev
                 ? 0
                 : s->dev->ops->download(s->dev, host, params, s->plen * sizeof(float));
    if (rc) {
        snprintf(err, errlen, "cannot read the parameters from %s", s->dev->name);
        return rc;
    }
    rc = rt_comm_broadcast(s->comm, host, s->plen, 0, cancelled, arg, err, errlen);
    /* Then a barrier: rank 0 is done sending long before the last rank has
     * loaded its data, and a rank that returned early would sit idle with a
     * session nobody may reclaim if the start failed meanwhile. So every
     * rank returns once all have the parameters, and a start cancelled on
     * one rank fails on every rank (the sum cannot complete). */
    float zero = 0;
    if (rc == 0)
        rc = rt_comm_allreduce(s->comm, &zero, 1, cancelled, arg, err, errlen);
    if (rc == 0 && !s->red_on_dev)
        rc = s->dev->ops->upload(s->dev, params, host, s->plen * sizeof(float));
    return rc;
}

void rt_sync_set_timeline(rt_sync *s, rt_timeline *tl)
{
    s->tl = tl;
    rt_comm_set_timeline(s->comm, tl);
}

int rt_sync_sum(rt_sync *s, float *host, size_t n, char *err, size_t errlen)
{
    return rt_comm_allreduce(s->comm, host, n, NULL, NULL, err, errlen);
}

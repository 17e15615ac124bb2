/* runtime/data — the loader: one epoch's permutation, this rank's slice of
 * each global batch, and a prefetch thread that gathers the next slices into
 * a ring of LOADER_SLOTS host buffers while the caller computes on the
 * current one (the tf.data lesson: input work overlaps compute).
 *
 * The ring: step k of an epoch goes into slot k % LOADER_SLOTS. The caller
 * holds the slot of the batch it was last given until its next call, so a
 * step p may be gathered once p < released + LOADER_SLOTS, where `released`
 * counts the steps the caller is done with. Steps are claimed in order
 * (`claimed`), by the thread, or by the caller itself when it wants a step
 * nobody has started: a thread starved of CPU (a busy machine, BLAS threads
 * on every core) then costs no more than loading without prefetch, never a
 * wait on the scheduler. rt_loader_begin writes the permutation itself,
 * once no gather of the old epoch is in flight.
 *
 * A sharded loader (shard.c) permutes its rank's shard only; a step's
 * slice is then the next run of that order, not a part of a global
 * permutation. */
#include "data_int.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "ferry/error.h"

/* Two is the double buffer; a third absorbs jitter in the caller's steps. */
#define LOADER_SLOTS 3

typedef struct slot {
    float *x;
    int32_t *labels;
    float *targets;
    rt_batch_host batch;
} slot;

struct rt_loader {
    const rt_dataset *ds;
    rt_loader_opts o;
    size_t steps;
    size_t rows_max; /* the largest slice a rank can get */
    slot slots[LOADER_SLOTS];
    uint32_t *perm; /* written by rt_loader_begin while no gather runs */
    /* A sharded loader's shard [lo, lo + len), its slice of a full global
     * batch, and its block shuffle's blocks and scratch. */
    size_t lo, len, slice_full, block_rows;
    uint32_t *blocks;

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t to_thread; /* a new epoch, room in the ring, or stop */
    pthread_cond_t to_caller; /* a batch is ready */
    /* Under mu: */
    uint64_t gen; /* bumped by every rt_loader_begin */
    bool begun, stop;
    bool thread_busy;           /* the thread is gathering, outside mu */
    size_t claimed;             /* steps of this epoch someone has started */
    size_t taken;               /* steps handed to the caller */
    size_t released;            /* steps the caller is done with */
    size_t ready[LOADER_SLOTS]; /* step + 1 whose gather into the slot ended */
};

static void make_perm(rt_loader *l, int epoch)
{
    if (l->o.shard) {
        rt_shard_order(l->perm, l->blocks, l->lo, l->len, l->block_rows, l->o.shuffle,
                       l->o.seed, l->o.rank, epoch);
        return;
    }
    size_t n = l->ds->n;
    for (size_t i = 0; i < n; i++)
        l->perm[i] = (uint32_t)i;
    if (!l->o.shuffle)
        return;
    rt_rng r;
    rt_rng_seed(&r, l->o.seed, (uint64_t)epoch);
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)rt_rng_below(&r, i);
        uint32_t t = l->perm[i - 1];
        l->perm[i - 1] = l->perm[j];
        l->perm[j] = t;
    }
}

static void gather(rt_loader *l, size_t step, slot *s)
{
    const rt_dataset *ds = l->ds;
    size_t gstart = step * (size_t)l->o.batch;
    size_t gsize =
        ds->n - gstart < (size_t)l->o.batch ? ds->n - gstart : (size_t)l->o.batch;
    size_t start, len;
    rt_rank_slice(gsize, l->o.rank, l->o.world, &start, &len);
    /* Every step before the last is a full batch: in a shard, this step's
     * slice follows theirs. */
    size_t pos = l->o.shard ? step * l->slice_full : gstart + start;
    s->batch.n = (int)len;
    s->batch.pos = pos;
    if (l->o.index_only)
        return;
    const uint32_t *idx = l->perm + pos;
    size_t f = (size_t)ds->features, out = (size_t)ds->outputs;
    if (ds->x)
        for (size_t i = 0; i < len; i++)
            memcpy(s->x + i * f, ds->x + (size_t)idx[i] * f, f * sizeof(float));
    else /* read in place from its file */
        for (size_t i = 0; i < len; i++)
            rt_dataset_row(ds, idx[i], s->x + i * f);
    if (ds->labels)
        for (size_t i = 0; i < len; i++)
            s->labels[i] = ds->labels[idx[i]];
    if (ds->targets)
        for (size_t i = 0; i < len; i++)
            memcpy(s->targets + i * out, ds->targets + (size_t)idx[i] * out,
                   out * sizeof(float));
}

static void *prefetch_main(void *arg)
{
    rt_loader *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!l->stop) {
        size_t p = l->claimed;
        if (!l->begun || p == l->steps || p >= l->released + LOADER_SLOTS) {
            pthread_cond_wait(&l->to_thread, &l->mu);
            continue;
        }
        l->claimed = p + 1;
        l->thread_busy = true;
        uint64_t gen = l->gen;
        pthread_mutex_unlock(&l->mu);
        gather(l, p, &l->slots[p % LOADER_SLOTS]);
        pthread_mutex_lock(&l->mu);
        l->thread_busy = false;
        if (gen == l->gen)
            l->ready[p % LOADER_SLOTS] = p + 1;
        /* The caller may wait for this step, or (in begin) for the thread
         * to be idle. */
        pthread_cond_signal(&l->to_caller);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static int check(const rt_dataset *ds, const rt_loader_opts *o)
{
    if (!ds || !o || o->batch < 1 || o->world < 1 || o->rank < 0 || o->rank >= o->world)
        return FERRY_EINVAL;
    if (!o->host_alloc != !o->host_free)
        return FERRY_EINVAL;
    if (ds->n > UINT32_MAX || ds->features < 1 || (ds->n && !ds->x && !ds->mapped))
        return FERRY_EINVAL;
    if (ds->n && !ds->labels && !(ds->targets && ds->outputs > 0))
        return FERRY_EINVAL;
    return 0;
}

/* A sample's bytes in its file (as floats for a set in memory): the unit
 * of a shard's blocks. */
static size_t row_bytes(const rt_dataset *ds)
{
    size_t elem = ds->mapped ? rt_dtype_size(ds->mapped->type) : sizeof(float);
    return (size_t)ds->features * elem;
}

/* The slots' memory: the caller's allocator (a stager's pinned memory) or
 * the data folder's own. */
static void *slot_alloc(rt_loader *l, size_t bytes)
{
    return l->o.host_alloc ? l->o.host_alloc(l->o.host_arg, bytes) : rt_data_alloc(bytes);
}

static void slot_free(rt_loader *l, void *p)
{
    if (!p)
        return;
    if (l->o.host_alloc)
        l->o.host_free(l->o.host_arg, p);
    else
        free(p);
}

static void free_loader(rt_loader *l)
{
    for (int i = 0; i < LOADER_SLOTS; i++) {
        slot_free(l, l->slots[i].x);
        slot_free(l, l->slots[i].labels);
        slot_free(l, l->slots[i].targets);
    }
    free(l->perm);
    free(l->blocks);
    free(l);
}

static int alloc_slots(rt_loader *l)
{
    const rt_dataset *ds = l->ds;
    size_t rows = l->rows_max ? l->rows_max : 1;
    size_t perm_n = l->o.shard ? l->len : ds->n;
    l->perm = malloc((perm_n ? perm_n : 1) * sizeof *l->perm);
    if (!l->perm)
        return FERRY_ENOMEM;
    if (l->o.shard) {
        size_t blocks = rt_shard_blocks(l->len, l->block_rows);
        if (!(l->blocks = malloc((blocks ? blocks : 1) * sizeof *l->blocks)))
            return FERRY_ENOMEM;
    }
    for (int i = 0; i < LOADER_SLOTS; i++) {
        slot *s = &l->slots[i];
        s->batch.set = ds;
        s->batch.perm = l->perm;
        s->batch.perm_n = perm_n;
        if (l->o.index_only)
            continue;
        s->x = slot_alloc(l, rows * (size_t)ds->features * sizeof(float));
        if (!s->x)
            return FERRY_ENOMEM;
        if (ds->labels && !(s->labels = slot_alloc(l, rows * sizeof(int32_t))))
            return FERRY_ENOMEM;
        if (ds->targets &&
            !(s->targets = slot_alloc(l, rows * (size_t)ds->outputs * sizeof(float))))
            return FERRY_ENOMEM;
        s->batch.x = s->x;
        s->batch.labels = s->labels;
        s->batch.targets = s->targets;
    }
    return 0;
}

/* The prefetch thread takes no asynchronous signal: those belong to the
 * threads that handle them (the worker's SIGTERM pipe). Faults still reach
 * the crash handler. */
static int start_thread(rt_loader *l)
{
    sigset_t all, old;
    sigfillset(&all);
    int sync_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};
    for (size_t i = 0; i < sizeof sync_sigs / sizeof *sync_sigs; i++)
        sigdelset(&all, sync_sigs[i]);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&l->thread, NULL, prefetch_main, l);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return rc == EAGAIN ? FERRY_EAGAIN : FERRY_ENOMEM;
    pthread_setname_np(l->thread, "ferry-prefetch");
    return 0;
}

int rt_loader_create(const rt_dataset *ds, const rt_loader_opts *o, rt_loader **out)
{
    if (!out)
        return FERRY_EINVAL;
    *out = NULL;
    int rc = check(ds, o);
    if (rc != 0)
        return rc;
    rt_loader *l = calloc(1, sizeof *l);
    if (!l)
        return FERRY_ENOMEM;
    l->ds = ds;
    l->o = *o;
    l->steps = (ds->n + (size_t)o->batch - 1) / (size_t)o->batch;
    size_t first = ds->n < (size_t)o->batch ? ds->n : (size_t)o->batch;
    l->rows_max = (first + (size_t)o->world - 1) / (size_t)o->world;
    if (o->shard) {
        size_t start;
        rt_shard_of(ds->n, (size_t)o->batch, o->rank, o->world, &l->lo, &l->len);
        rt_rank_slice((size_t)o->batch, o->rank, o->world, &start, &l->slice_full);
        l->block_rows = rt_shard_block_rows(row_bytes(ds));
    }
    if ((rc = alloc_slots(l)) != 0) {
        free_loader(l);
        return rc;
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->to_thread, NULL);
    pthread_cond_init(&l->to_caller, NULL);
    if ((rc = start_thread(l)) != 0) {
        pthread_cond_destroy(&l->to_caller);
        pthread_cond_destroy(&l->to_thread);
        pthread_mutex_destroy(&l->mu);
        free_loader(l);
        return rc;
    }
    *out = l;
    return 0;
}

size_t rt_loader_steps(const rt_loader *l)
{
    return l ? l->steps : 0;
}

int rt_loader_begin(rt_loader *l, int epoch)
{
    if (!l || epoch < 0)
        return FERRY_EINVAL;
    pthread_mutex_lock(&l->mu);
    l->gen++;
    l->begun = false; /* the thread starts nothing until perm is written */
    l->claimed = l->taken = l->released = 0;
    memset(l->ready, 0, sizeof l->ready);
    while (l->thread_busy) /* a gather of the old epoch still reads perm */
        pthread_cond_wait(&l->to_caller, &l->mu);
    pthread_mutex_unlock(&l->mu);

    make_perm(l, epoch);

    pthread_mutex_lock(&l->mu);
    l->begun = true;
    pthread_cond_signal(&l->to_thread);
    pthread_mutex_unlock(&l->mu);
    return 0;
}

const rt_batch_host *rt_loader_next(rt_loader *l)
{
    if (!l)
        return NULL;
    pthread_mutex_lock(&l->mu);
    if (!l->begun || l->taken == l->steps) {
        l->released = l->taken;
        pthread_mutex_unlock(&l->mu);
        return NULL;
    }
    l->released = l->taken;
    pthread_cond_signal(&l->to_thread); /* a slot is free again */
    size_t k = l->taken;
    slot *s = &l->slots[k % LOADER_SLOTS];
    if (l->claimed == k) {
        /* Nobody has started it: gathering it here beats waiting for a
         * thread the scheduler has not run. */
        l->claimed = k + 1;
        pthread_mutex_unlock(&l->mu);
        gather(l, k, s);
        pthread_mutex_lock(&l->mu);
        l->ready[k % LOADER_SLOTS] = k + 1;
    }
    while (l->ready[k % LOADER_SLOTS] != k + 1)
        pthread_cond_wait(&l->to_caller, &l->mu);
    l->taken = k + 1;
    s->batch.epoch_id = l->gen;
    pthread_mutex_unlock(&l->mu);
    return &s->batch;
}

void rt_loader_destroy(rt_loader *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_signal(&l->to_thread);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    pthread_cond_destroy(&l->to_caller);
    pthread_cond_destroy(&l->to_thread);
    pthread_mutex_destroy(&l->mu);
    free_loader(l);
}

/* cluster_train_run: how many workers train and in which mode, the begin on
 * each, one call an epoch (each reply an event as it happens), and the end
 * that reads the parameters back, checked to be the same on every rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "train_int.h"

/* Epoch calls run as long as an epoch takes; a dead or hung worker is found
 * by the heartbeat instead. */
#define TRAIN_CALL_TIMEOUT_MS (24LL * 3600 * 1000)

#define DATA_PATH_MAX 4096

/* The mode and how many workers train: 1 in single mode, else --workers or
 * them all. Returns 0, or FERRY_EINVAL (said). */
static int choose_workers(ct_run *run)
{
    const cluster_train_opts *o = run->o;
    int size = (int)cluster_size(run->cl);
    bool single = o->mode ? strcmp(o->mode, "single") == 0 : size == 1;
    bool async = !single && o->mode && strcmp(o->mode, "async") == 0;
    run->mode = single ? &ct_mode_single : async ? &ct_mode_async : &ct_mode_sync;
    run->k = 1;
    if (single)
        return 0;
    if (o->workers > size) {
        ct_fail(run, "--workers %ld: the cluster has %d worker%s", o->workers, size,
                size == 1 ? "" : "s");
        return FERRY_EINVAL;
    }
    int k = o->workers ? (int)o->workers : size;
    if (async && k < 2) {
        ct_fail(run, "--mode async needs 2 or more workers (it would train on %d)", k);
        return FERRY_EINVAL;
    }
    if (o->batch < k) {
        ct_fail(run,
                "the global batch of %ld is smaller than the %d workers: each needs at "
                "least one sample a step (raise --batch or lower --workers)",
                o->batch, k);
        return FERRY_EINVAL;
    }
    run->k = k;
    return 0;
}

/* A relative data directory names one where the caller is, not where the
 * supervisor (and so every worker) was started: sent absolute. A file
 * shipped to the workers' data caches is named as they hold it. */
static int absolute(ct_run *run, const char *flag, const char **path, char *buf,
                    size_t len)
{
    char cwd[DATA_PATH_MAX];
    const char *p = *path;
    if (!p || !p[0] || p[0] == '/' ||
        strncmp(p, PROTO_DATA_REF_PREFIX, strlen(PROTO_DATA_REF_PREFIX)) == 0)
        return 0;
    if (!getcwd(cwd, sizeof cwd) || (size_t)snprintf(buf, len, "%s/%s", cwd, p) >= len) {
        ct_fail(run, "--%s %s: cannot make it an absolute path", flag, p);
        return FERRY_EINVAL;
    }
    *path = buf;
    return 0;
}

/* The run's options with the files it names made absolute: each worker
 * reads them itself, from another working directory. */
static int absolute_paths(ct_run *run, proto_train_spec *spec,
                          char bufs[5][DATA_PATH_MAX])
{
    *spec = run->o->spec;
    int rc = absolute(run, "data", &spec->data_dir, bufs[0], DATA_PATH_MAX);
    if (rc == 0)
        rc = absolute(run, "test-data", &spec->test_data, bufs[1], DATA_PATH_MAX);
    if (rc == 0)
        rc = absolute(run, "labels", &spec->labels, bufs[2], DATA_PATH_MAX);
    if (rc == 0)
        rc = absolute(run, "test-labels", &spec->test_labels, bufs[3], DATA_PATH_MAX);
    if (rc == 0)
        rc = absolute(run, "checkpoint-dir", &spec->checkpoint_dir, bufs[4],
                      DATA_PATH_MAX);
    return rc;
}

/* Every epoch, each an event; the totals and the last one into *res. */
static int epochs(ct_run *run, cluster_train_result *res, proto_train_spec *spec,
                  proto_train_begin_reply **b)
{
    for (int e = run->next_epoch; e <= run->o->epochs; e++) {
        cluster_train_epoch ep;
        int rc = run->mode->epoch(run, e, &ep);
        if (rc && run->mode == &ct_mode_async && ct_async_restore(run, e, spec) == 0) {
            e--; /* the ranks that had not finished it run it again */
            continue;
        }
        if (rc && (rc = ct_recover(run, e, rc, spec, b)) == 0) {
            e = run->next_epoch - 1; /* every rank goes on from its checkpoint */
            continue;
        }
        if (rc)
            return rc;
        if (run->ev && run->ev->epoch)
            run->ev->epoch(run->ev->data, &ep);
        res->samples += (double)ep.samples;
        res->train_s += ep.train_s;
        res->allreduce_s += ep.allreduce_s;
        res->compute_s += ep.compute_s;
        res->ps_wait_s += ep.ps_wait_s;
        res->last = ep;
        if (run->mode == &ct_mode_async && (rc = ct_async_rejoin(run, e, spec)))
            return rc;
        int k = run->k;
        if (ep.checkpoint && ep.checkpoint[0] && (rc = ct_rejoin(run, e, spec, b)))
            return rc;
        if (run->k != k)
            e = run->next_epoch - 1; /* taken back in: from the checkpoint */
    }
    return 0;
}

/* Copies what *res borrows from the run (the device, the digest, the
 * metrics' names) into one block it owns. */
static int keep_strings(cluster_train_result *res, const char *sha)
{
    const char *from[3 + FERRY_MODEL_METRICS_MAX] = {res->started.device, sha,
                                                     res->started.data};
    const char **to[3 + FERRY_MODEL_METRICS_MAX] = {&res->started.device,
                                                    &res->params_sha256, &res->started.data};
    size_t n = 3, len = 0;
    for (size_t i = 0; i < res->last.n_metrics; i++, n++) {
        from[n] = res->last.metrics[i].name;
        to[n] = &res->last.metrics[i].name;
    }
    for (size_t i = 0; i < n; i++)
        len += strlen(from[i]) + 1;
    if (!(res->owned = malloc(len)))
        return FERRY_ENOMEM;
    char *p = res->owned;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(from[i]) + 1;
        memcpy(p, from[i], l);
        *to[i] = p;
        p += l;
    }
    return 0;
}

/* Copies rank 0's final tensors into one block *res owns. */
static int keep_tensors(ct_run *run, cluster_train_result *res,
                        const proto_train_end_reply *d)
{
    size_t n = d->n_tensor_names, floats = d->tensor_values.len / sizeof(float);
    if (d->n_tensor_shapes != 4 * n || d->tensor_values.len % sizeof(float)) {
        ct_fail(run,
                "%s: worker 0 sent back %zu tensor names with %zu dimensions and %zu "
                "bytes of values",
                run->module, n, d->n_tensor_shapes, d->tensor_values.len);
        return FERRY_EPROTO;
    }
    size_t strings = 0;
    for (size_t i = 0; i < n; i++)
        strings += strlen(d->tensor_names[i]) + 1;
    /* values, shapes, then the names' pointers on their own alignment */
    size_t vbytes = floats * sizeof(float), sbytes = 4 * n * sizeof(uint32_t);
    size_t pad = (vbytes + sbytes) % sizeof(char *);
    sbytes += pad ? sizeof(char *) - pad : 0;
    char *blk = malloc(vbytes + sbytes + n * sizeof(char *) + strings + 1);
    if (!blk)
        return FERRY_ENOMEM;
    float *values = memcpy(blk, d->tensor_values.data, vbytes);
    uint32_t *shapes = memcpy(blk + vbytes, d->tensor_shapes, sbytes);
    const char **names = (const char **)(void *)(blk + vbytes + sbytes);
    char *s = (char *)(names + n);
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(d->tensor_names[i]) + 1;
        names[i] = memcpy(s, d->tensor_names[i], l);
        s += l;
    }
    res->owned_tensors = blk;
    res->tensors = (cluster_tensors){n, names, shapes, values, floats};
    return 0;
}

/* Ends the sessions, checks the ranks agree, and fills the rest of *res. */
static int finish(ct_run *run, cluster_train_result *res)
{
    proto_train_end_reply *done[run->k];
    memset(done, 0, sizeof done);
    res->identical = true;
    int rc = run->mode->end(run, done, &res->identical);
    if (rc == 0 && !res->identical) {
        ct_fail(run, "%s: the workers ended with different parameters", run->module);
        rc = FERRY_EPROTO;
    }
    if (rc == 0) {
        res->lost = run->lost;
        res->pushes = run->pushes;
        ct_staleness(run, &res->staleness_min, &res->staleness_median,
                     &res->staleness_max);
        rc = keep_strings(res, done[0]->params_sha256);
    }
    if (rc == 0 && run->o->with_params)
        rc = keep_tensors(run, res, done[0]);
    ct_free_replies((void **)done, run->k);
    return rc;
}

static int train(ct_run *run, cluster_train_result *res)
{
    char paths[5][DATA_PATH_MAX];
    proto_train_spec spec;
    int rc = absolute_paths(run, &spec, paths);
    if (rc || (rc = ct_stall_start(run)))
        return rc;
    cluster_set_call_timeout(run->cl, TRAIN_CALL_TIMEOUT_MS);
    double t0 = (double)uv_hrtime() / 1e9;
    proto_train_begin_reply *b[run->cap];
    memset(b, 0, sizeof b);
    ct_recover_absent(run);
    if ((rc = ct_begin(run, &spec, b)))
        return rc;
    ct_recover_note(run);
    /* Rank 0's first reply describes the run, whatever begins after it. */
    proto_train_begin_reply *first = b[0];
    b[0] = NULL;
    const cluster_train_opts *o = run->o;
    run->shards = o->ps_shards ? (int)o->ps_shards : run->k;
    res->started = (cluster_train_started){.mode = run->mode->name,
                                           .workers = run->k,
                                           .shards = run->shards,
                                           .device = first->device,
                                           .params = first->params,
                                           .train_samples = first->train_samples,
                                           .test_samples = first->test_samples,
                                           .buckets = first->buckets,
                                           .data = first->data_about};
    if (run->ev && run->ev->started)
        run->ev->started(run->ev->data, &res->started);
    rc = epochs(run, res, &spec, b);
    if (rc == 0)
        rc = finish(run, res);
    if (rc == 0)
        res->begin = first;
    else
        proto_free(first);
    ct_stall_stop(run);
    /* Frees the workers' sessions now; they would be replaced anyway. */
    if (rc)
        ct_discard(run);
    ct_unhold(run);
    res->wall_s = (double)uv_hrtime() / 1e9 - t0;
    ct_free_replies((void **)b, run->cap);
    return rc;
}

int cluster_train_run(cluster *cl, const cluster_module *m, const char *module,
                      const cluster_train_opts *o, const cluster_train_events *events,
                      cluster_train_result *res)
{
    memset(res, 0, sizeof *res);
    ct_run run = {.cl = cl, .m = m, .module = module, .o = o, .ev = events};
    int rc = choose_workers(&run);
    if (rc)
        return rc;
    run.cap = ct_grow_cap(&run);
    run.size0 = (int)cluster_size(cl);
    run.alive = malloc((size_t)run.cap * sizeof *run.alive);
    run.steps = calloc((size_t)run.cap, sizeof *run.steps);
    if (!run.alive || !run.steps || ct_recover_init(&run)) {
        rc = FERRY_ENOMEM;
    } else {
        for (int r = 0; r < run.cap; r++)
            run.alive[r] = true;
        if ((rc = ct_timeline_open(&run)) == 0)
            rc = ct_timeline_close(&run, train(&run, res));
        ct_stall_stop(&run);
    }
    proto_free(run.reply);
    free(run.alive);
    ct_recover_fini(&run);
    ct_async_fini(&run);
    if (rc) {
        free(run.steps);
        cluster_train_result_fini(res);
        return rc;
    }
    res->steps_by_worker = run.steps;
    return 0;
}

void cluster_train_result_fini(cluster_train_result *res)
{
    proto_free(res->begin);
    free(res->owned);
    free(res->owned_tensors);
    free(res->steps_by_worker);
    memset(res, 0, sizeof *res);
}

/* Sync mode with --min-workers and --checkpoint-dir: a worker that joins
 * the cluster while the run trains (`ferry start --add`) is taken in at
 * the next checkpoint, as one that was left out is (ct_rejoin): every rank
 * begins anew from that checkpoint and the global batch is sliced over the
 * larger count. A run that names --workers keeps that many; otherwise it
 * grows with the cluster up to its global batch (each rank needs a sample
 * a step), never past PROTO_TRAIN_MAX_WORKERS ranks. */
#include <stdio.h>

#include "train_int.h"

int ct_grow_cap(const ct_run *run)
{
    const cluster_train_opts *o = run->o;
    int cap = run->k;
    bool grows = run->mode == &ct_mode_sync && o->min_workers && !o->workers &&
                 o->spec.checkpoint_dir && o->spec.checkpoint_dir[0];
    if (!grows)
        return cap;
    long most = o->batch < PROTO_TRAIN_MAX_WORKERS ? o->batch : PROTO_TRAIN_MAX_WORKERS;
    return most > cap ? (int)most : cap;
}

int ct_grow_scan(ct_run *run)
{
    if (!run->ev || !run->ev->joined)
        return 0;
    for (int w = (int)cluster_size(run->cl); w < run->cap; w++) {
        char target[CT_TARGET_MAX];
        if (!run->ev->joined(run->ev->data, w, target, sizeof target))
            return 0;
        int rc = cluster_add_worker(run->cl, target);
        if (rc) {
            ct_fail(run, "%s: %s", run->module, cluster_error(run->cl));
            return rc;
        }
        /* Taken in by ct_rejoin once it answers, as any left out; never
         * in the run yet. */
        run->out[run->n_out++] = w;
        run->absent[w] = true;
    }
    return 0;
}

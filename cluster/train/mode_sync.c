/* Single and sync mode at the master: every rank steps together, the
 * workers reduce the losses, accuracy and samples among themselves, so rank
 * 0's reply speaks for all; a failure on one rank fails the step on all. */
#include <stdio.h>
#include <string.h>

#include "train_int.h"

static int sync_epoch(ct_run *run, int e, cluster_train_epoch *out)
{
    int k = run->k;
    proto_bytes ep;
    proto_train_epoch_reply *rep[k];
    int rc = proto_train_epoch_pack(&(proto_train_epoch){.session = run->session}, &ep);
    if (rc == 0)
        rc = ct_call_all(run, "ferry.train.epoch", &ep, &ct_epoch_reply, (void **)rep);
    proto_bytes_fini(&ep);
    if (rc) {
        /* Said by ct_recover() unless a rollback undoes it. */
        snprintf(run->why, sizeof run->why, "%s: epoch %d failed%s: %s", run->module, e,
                 k > 1 ? " (sync mode, where rank N is worker N: every worker stops "
                         "with the step)"
                       : "",
                 cluster_error(run->cl));
        return rc;
    }
    for (int r = 0; r < k; r++)
        ct_timeline_take(run, r, rep[r]);
    proto_free(run->reply);
    run->reply = rep[0];
    rep[0] = NULL;
    ct_free_replies((void **)rep, k);

    const proto_train_epoch_reply *r = run->reply;
    *out = (cluster_train_epoch){.epoch = r->epoch,
                                 .train_loss = r->train_loss,
                                 .test_loss = r->test_loss,
                                 .test_accuracy = r->test_accuracy,
                                 .samples = r->samples,
                                 .samples_per_s = r->samples_per_s,
                                 .train_s = r->train_s,
                                 .eval_s = r->eval_s,
                                 .allreduce_s = r->allreduce_s,
                                 .compute_s = r->compute_s,
                                 .ps_wait_s = r->ps_wait_s,
                                 .pushes = r->pushes,
                                 .live_workers = k,
                                 .loss_curve = r->loss_curve,
                                 .n_loss_curve = r->n_loss_curve,
                                 .loss_curve_every = r->loss_curve_every,
                                 .checkpoint = r->checkpoint ? r->checkpoint : ""};
    if (r->n_lr_curve == r->n_loss_curve)
        out->lr_curve = r->lr_curve;
    for (size_t i = 0; i < r->n_metrics && i < FERRY_MODEL_METRICS_MAX; i++)
        out->metrics[out->n_metrics++] = (cluster_train_metric){
            .name = r->metrics[i].name, .value = r->metrics[i].value};
    return 0;
}

static int sync_end(ct_run *run, proto_train_end_reply **done, bool *identical)
{
    int k = run->k;
    proto_bytes end;
    int rc = proto_train_end_pack(
        &(proto_train_end){.session = run->session, .with_params = run->o->with_params},
        &end);
    if (rc == 0)
        rc = ct_call_all(run, "ferry.train.end", &end, &ct_end_reply, (void **)done);
    proto_bytes_fini(&end);
    if (rc)
        ct_fail(run, "%s: cannot end training: %s", run->module, cluster_error(run->cl));
    for (int r = 1; rc == 0 && r < k; r++)
        *identical &= strcmp(done[r]->params_sha256, done[0]->params_sha256) == 0;
    return rc;
}

const ct_mode ct_mode_single = {.name = "single", .epoch = sync_epoch, .end = sync_end};
const ct_mode ct_mode_sync = {.name = "sync", .epoch = sync_epoch, .end = sync_end};

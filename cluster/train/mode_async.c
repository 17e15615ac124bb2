/* Async mode's epochs at the master. Nothing is reduced between the
 * workers, so every rank reports its own losses, samples and staleness and
 * the master adds them up. A worker lost mid-epoch does not cancel the
 * others: when it held no shard of the parameter server the shards are
 * told to stop waiting for it (the staleness bound would otherwise hold the
 * survivors back for good) and the run goes on without it until its
 * restart takes it back in (rejoin_async.c); when it held one, the others'
 * epoch fails on that shard, which is restored from its newest checkpoint
 * on the restarted worker, and the epoch is run again by the ranks that
 * had not finished it; without a checkpoint the run stops, saying which
 * shard and why. */
#include <stdlib.h>
#include <string.h>

#include "train_int.h"

static int leave_arg(int failed, ferry_bytes_t *in, void *arg)
{
    ct_run *run = arg;
    proto_bytes b;
    int rc = proto_train_leave_pack(
        &(proto_train_leave){.session = run->session, .rank = (uint32_t)failed}, &b);
    in->data = b.data;
    in->len = b.len;
    return rc;
}

static bool holds_shard(const ct_run *run, int rank)
{
    return rank < run->shards;
}

/* Adds rank r's reply into the sums (accumulated as totals, divided at the
 * end). */
static void add(proto_train_epoch_reply *sum, const proto_train_epoch_reply *r,
                ct_run *run)
{
    sum->epoch = r->epoch;
    sum->train_loss += r->train_loss * (double)r->local_samples;
    sum->test_loss += r->test_loss * (double)r->eval_samples;
    sum->test_accuracy += r->test_accuracy * (double)r->eval_samples;
    sum->samples += r->samples;
    sum->local_samples += r->local_samples;
    sum->eval_samples += r->eval_samples;
    if (r->train_s > sum->train_s)
        sum->train_s = r->train_s;
    if (r->eval_s > sum->eval_s)
        sum->eval_s = r->eval_s;
    sum->compute_s += r->compute_s;
    sum->ps_wait_s += r->ps_wait_s;
    sum->pushes += r->pushes;
    sum->steps += r->steps;
    for (size_t b = 0; b < r->n_staleness && b < CT_STALE_BUCKETS; b++)
        run->staleness[b] += r->staleness[b];
    if (r->n_staleness > run->buckets)
        run->buckets =
            r->n_staleness < CT_STALE_BUCKETS ? r->n_staleness : CT_STALE_BUCKETS;
}

/* What the replies of one epoch came to. */
typedef struct epoch_calls {
    ct_each each;
    int failed_own, lost_holder; /* -1: none */
} epoch_calls;

/* Adds up the replies of the live ranks into *sum; a rank the cluster saw
 * die leaves the run unless it held a shard (then lost_holder), one that
 * failed otherwise is failed_own. */
static void gather(ct_run *run, int e, epoch_calls *c, proto_train_epoch_reply *sum)
{
    int n = run->k;
    for (int r = 0; r < n; r++) {
        if (!run->alive[r])
            continue;
        if (c->each.rcs[r]) {
            /* A worker the cluster saw die, or one whose link dropped. */
            bool lost = c->each.rcs[r] == FERRY_EUNAVAIL ||
                        c->each.rcs[r] == FERRY_ECONNRESET ||
                        (c->each.errs[r] && strstr(c->each.errs[r], "worker crashed"));
            if (lost && holds_shard(run, r)) {
                if (c->lost_holder < 0)
                    c->lost_holder = r;
            } else if (lost) {
                if (run->ev && run->ev->worker_lost)
                    run->ev->worker_lost(run->ev->data, r, cluster_target(run->cl, r), e,
                                         c->each.errs[r] ? c->each.errs[r]
                                                         : ferry_strerror(c->each.rcs[r]),
                                         n - run->lost - 1);
                run->alive[r] = false;
                run->lost++;
                ct_async_lost(run, r, e);
            } else if (c->failed_own < 0) {
                c->failed_own = r;
            }
            continue;
        }
        proto_train_epoch_reply *rep;
        int bad =
            proto_train_epoch_reply_unpack(c->each.out[r].data, c->each.out[r].len, &rep);
        cluster_free_bytes(&c->each.out[r]);
        if (bad) {
            if (c->failed_own < 0)
                c->failed_own = r;
            continue;
        }
        add(sum, rep, run);
        ct_timeline_take(run, r, rep);
        ct_scores_add(&run->scores, rep);
        run->steps[r] += rep->steps;
        proto_free(rep);
    }
}

/* The epoch's verdict: a lost shard ends the run, as does a rank's own
 * failure. Returns 0 or FERRY_E* (said). */
static int verdict(ct_run *run, int e, const epoch_calls *c)
{
    int n = run->k;
    if (c->lost_holder >= 0) {
        int h = c->lost_holder;
        const char *stop = ct_async_holder_lost(run, h, e, c->each.rcs);
        snprintf(
            run->why, sizeof run->why,
            "%s: epoch %d failed (async mode): worker %d (%s) was lost while it held "
            "shard%s %d%s of %d of the parameters: %s%s%s",
            run->module, e, h, cluster_target(run->cl, h), run->shards > n ? "s" : "", h,
            run->shards > n ? ", ..." : "", run->shards,
            c->each.errs[h] ? c->each.errs[h] : "", stop ? "; " : "", stop ? stop : "");
        if (stop) {
            ct_fail(run, "%s", run->why);
            run->why[0] = '\0';
        }
        return FERRY_EPIPE;
    }
    if (c->failed_own >= 0) {
        int f = c->failed_own;
        ct_fail(
            run, "%s: epoch %d failed (async mode) on worker %d: %s", run->module, e, f,
            c->each.errs[f] ? c->each.errs[f] : "a reply that is not a TrainEpochReply");
        return c->each.rcs[f] ? c->each.rcs[f] : FERRY_EPROTO;
    }
    return 0;
}

/* The sums made means, and the epoch as the caller sees it. */
static void describe(ct_run *run, const proto_train_epoch_reply *sum,
                     cluster_train_epoch *out)
{
    *out = (cluster_train_epoch){.epoch = sum->epoch,
                                 .train_loss = sum->train_loss,
                                 .test_loss = sum->test_loss,
                                 .test_accuracy = sum->test_accuracy,
                                 .samples = sum->samples,
                                 .samples_per_s = sum->samples_per_s,
                                 .train_s = sum->train_s,
                                 .eval_s = sum->eval_s,
                                 .allreduce_s = sum->allreduce_s,
                                 .compute_s = sum->compute_s,
                                 .ps_wait_s = sum->ps_wait_s,
                                 .pushes = sum->pushes,
                                 .live_workers = run->k - run->lost};
    ct_scores_mean(&run->scores, out);
    ct_staleness(run, &out->staleness_min, &out->staleness_median, &out->staleness_max);
    out->staleness_saturated = run->buckets && out->staleness_max + 1 == run->buckets;
}

static int async_epoch(ct_run *run, int e, cluster_train_epoch *out)
{
    proto_bytes ep;
    epoch_calls c = {.failed_own = -1, .lost_holder = -1};
    cluster_each_follow follow = {
        .function = "ferry.train.leave", .arg_for = leave_arg, .arg = run};
    int rc = proto_train_epoch_pack(&(proto_train_epoch){.session = run->session}, &ep);
    bool again = ct_async_rerun_begin(run);
    if (rc == 0)
        rc = ct_call_each(run, "ferry.train.epoch", &ep, &follow, &c.each);
    proto_bytes_fini(&ep);
    if (rc) {
        ct_async_rerun_end(run);
        ct_fail(run, "%s: epoch %d: %s", run->module, e, cluster_error(run->cl));
        ct_each_free(run, &c.each);
        return rc;
    }
    proto_train_epoch_reply sum = {0};
    memset(&run->scores, 0, sizeof run->scores);
    if (again)
        ct_async_partial(run, &sum, false);
    gather(run, e, &c, &sum);
    rc = verdict(run, e, &c);
    if (rc && run->why[0]) /* a shard to restore: the epoch may run again */
        ct_async_partial(run, &sum, true);
    ct_async_rerun_end(run);
    ct_each_free(run, &c.each);
    if (rc)
        return rc;
    /* The shards end an epoch on the samples pushes claim (each checked
     * against what its sender can have computed); one that ended with none
     * computed anywhere ended on a count that had reached its end before
     * it began. */
    /* (An epoch run again after a shard's restore may find it ended, as
     * may a continued run's first when its checkpoint was written as the
     * shards' count reached that epoch's end.) */
    bool ended_in_checkpoint =
        run->o->resume && run->o->resume[0] && e == run->o->first_epoch;
    if (sum.local_samples == 0 && !again && !ended_in_checkpoint) {
        ct_fail(run,
                "%s: epoch %d ended (async mode) with no training sample computed on any "
                "worker: the shards' count had reached its end before the epoch began "
                "(fewer epochs, or fewer --push-every batches, would each compute some)",
                run->module, e);
        return FERRY_EPROTO;
    }
    sum.train_loss /= sum.local_samples ? (double)sum.local_samples : 1;
    if (sum.eval_samples) {
        sum.test_loss /= (double)sum.eval_samples;
        sum.test_accuracy /= (double)sum.eval_samples;
    }
    sum.samples_per_s = sum.train_s > 0 ? (double)sum.samples / sum.train_s : 0;
    run->pushes += sum.pushes;
    describe(run, &sum, out);
    return 0;
}

/* The lost ranks are out of it; the others read the shards' final values,
 * the same for all of them. */
static int async_end(ct_run *run, proto_train_end_reply **done, bool *identical)
{
    int k = run->k;
    proto_bytes end;
    ct_each each = {0};
    int rc = proto_train_end_pack(
        &(proto_train_end){.session = run->session, .with_params = run->o->with_params},
        &end);
    if (rc == 0)
        rc = ct_call_each(run, "ferry.train.end", &end, NULL, &each);
    proto_bytes_fini(&end);
    for (int r = 0; rc == 0 && r < k; r++) {
        ferry_bytes_t *o = &each.out[r];
        if (run->alive[r] && each.rcs[r] == 0 &&
            proto_train_end_reply_unpack(o->data, o->len, &done[r]))
            each.rcs[r] = FERRY_EPROTO;
        if (run->alive[r] && each.rcs[r]) {
            ct_fail(run, "%s: cannot end training on worker %d: %s", run->module, r,
                    each.errs[r] ? each.errs[r] : "its reply is not a TrainEndReply");
            rc = each.rcs[r];
        }
    }
    ct_each_free(run, &each);
    int first = 0;
    while (first < k && !run->alive[first])
        first++;
    for (int r = first + 1; rc == 0 && r < k; r++)
        *identical &= !run->alive[r] ||
                      strcmp(done[r]->params_sha256, done[first]->params_sha256) == 0;
    if (rc == 0 && first > 0) {
        done[0] = done[first];
        done[first] = NULL;
    }
    return rc;
}

const ct_mode ct_mode_async = {.name = "async", .epoch = async_epoch, .end = async_end};

/* Async mode's epochs at the master. Nothing is reduced between the
 * workers, so every rank reports its own losses, samples and staleness and
 * the master adds them up. A worker lost mid-epoch does not cancel the
 * others: when it held no shard of the parameter server the shards are
 * told to stop waiting for it (the staleness bound would otherwise hold the
 * survivors back for good) and the run goes on without it; when it held
 * one, that slice of the model is gone with it and the run stops, saying
 * which (shards are not re-homed: see the README). */
#include <stdlib.h>
#include <string.h>

#include "train_int.h"

static int leave_arg(int failed, ferry_bytes_t *in, void *arg)
{
    cli_async_run *run = arg;
    Ferry__TrainLeave l = FERRY__TRAIN_LEAVE__INIT;
    l.session = run->session;
    l.rank = (uint32_t)failed;
    return cli_pack(&l.base, in);
}

static bool holds_shard(const cli_async_run *run, int rank)
{
    return rank < run->shards;
}

void cli_async_staleness(const cli_async_run *run, uint64_t *min, uint64_t *median,
                         uint64_t *max)
{
    uint64_t total = 0;
    for (size_t b = 0; b < run->buckets; b++)
        total += run->staleness[b];
    *min = *median = *max = 0;
    bool first = true;
    uint64_t seen = 0;
    bool med = false;
    for (size_t b = 0; b < run->buckets; b++) {
        if (!run->staleness[b])
            continue;
        if (first)
            *min = b;
        first = false;
        seen += run->staleness[b];
        if (!med && 2 * seen >= total) {
            *median = b;
            med = true;
        }
        *max = b;
    }
}

/* Adds rank r's reply into the sums (accumulated as totals, divided at the
 * end). */
static void add(Ferry__TrainEpochReply *sum, const Ferry__TrainEpochReply *r,
                cli_async_run *run)
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
    for (size_t b = 0; b < r->n_staleness && b < 64; b++)
        run->staleness[b] += r->staleness[b];
    if (r->n_staleness > run->buckets)
        run->buckets = r->n_staleness < 64 ? r->n_staleness : 64;
}

int cli_async_epoch(cluster *cl, const cluster_module *m, const char *module,
                    const cli_train_opts *o, int e, cli_async_run *run, FILE *progress,
                    Ferry__TrainEpochReply *sum)
{
    int n = run->world;
    Ferry__TrainEpoch ep = FERRY__TRAIN_EPOCH__INIT;
    ep.session = run->session;
    ferry_bytes_t in[n], out[n];
    int rcs[n];
    char *errs[n];
    memset(in, 0, sizeof in);
    memset(out, 0, sizeof out);
    memset(errs, 0, sizeof errs);
    int rc = 0;
    for (int r = 0; r < n && rc == 0; r++)
        rc = cli_pack(&ep.base, &in[r]);
    cluster_each_follow follow = {.function = "ferry.train.leave", .arg_for = leave_arg,
                                  .arg = run};
    if (rc == 0)
        rc = cluster_call_each(cl, m, "ferry.train.epoch", (size_t)n, run->alive, in, out,
                               rcs, errs, &follow);
    for (int r = 0; r < n; r++)
        free(in[r].data);
    if (rc) {
        cli_err("submit", "%s: epoch %d: %s", module, e, cluster_error(cl));
        return rc;
    }
    ferry__train_epoch_reply__init(sum);
    memset(&run->scores, 0, sizeof run->scores);
    int failed_own = -1, lost_holder = -1;
    for (int r = 0; r < n; r++) {
        if (!run->alive[r])
            continue;
        if (rcs[r]) {
            /* A worker the cluster saw die, or one whose link dropped. */
            bool lost = rcs[r] == FERRY_EUNAVAIL || rcs[r] == FERRY_ECONNRESET ||
                        (errs[r] && strstr(errs[r], "worker crashed"));
            if (lost && holds_shard(run, r)) {
                if (lost_holder < 0)
                    lost_holder = r;
            } else if (lost) {
                fprintf(progress,
                        "worker %d (%s) lost in epoch %d: %s; async training goes on with "
                        "%d worker%s\n",
                        r, cluster_target(cl, r), e, errs[r] ? errs[r] : ferry_strerror(rcs[r]),
                        n - run->lost - 1, n - run->lost - 1 == 1 ? "" : "s");
                run->alive[r] = false;
                run->lost++;
            } else if (failed_own < 0) {
                failed_own = r;
            }
            continue;
        }
        Ferry__TrainEpochReply *rep =
            ferry__train_epoch_reply__unpack(NULL, out[r].len, out[r].data);
        cluster_free_bytes(&out[r]);
        if (!rep) {
            if (failed_own < 0)
                failed_own = r;
            continue;
        }
        add(sum, rep, run);
        cli_scores_add(&run->scores, rep);
        run->steps[r] += rep->steps;
        ferry__train_epoch_reply__free_unpacked(rep, NULL);
    }
    if (lost_holder >= 0) {
        cli_err("submit",
                "%s: epoch %d failed (async mode): worker %d (%s) was lost while it held "
                "shard%s %d%s of %d of the parameters: %s; shards are not re-homed, so the "
                "run stops",
                module, e, lost_holder, cluster_target(cl, lost_holder),
                run->shards > n ? "s" : "", lost_holder, run->shards > n ? ", ..." : "",
                run->shards, errs[lost_holder] ? errs[lost_holder] : "");
        rc = FERRY_EPIPE;
    } else if (failed_own >= 0) {
        cli_err("submit", "%s: epoch %d failed (async mode) on worker %d: %s", module, e,
                failed_own, errs[failed_own] ? errs[failed_own] : "a reply that is not a "
                                                                  "TrainEpochReply");
        rc = rcs[failed_own] ? rcs[failed_own] : FERRY_EPROTO;
    }
    for (int r = 0; r < n; r++) {
        free(errs[r]);
        cluster_free_bytes(&out[r]);
    }
    if (rc)
        return rc;
    /* The shards end an epoch on the samples pushes claim (each checked
     * against what its sender can have computed); one that ended with none
     * computed anywhere ended on a count that had reached its end before
     * it began. */
    if (sum->local_samples == 0) {
        cli_err("submit",
                "%s: epoch %d ended (async mode) with no training sample computed on any "
                "worker: the shards' count had reached its end before the epoch began "
                "(fewer epochs, or fewer --push-every batches, would each compute some)",
                module, e);
        return FERRY_EPROTO;
    }
    sum->train_loss /= (double)sum->local_samples;
    if (sum->eval_samples) {
        sum->test_loss /= (double)sum->eval_samples;
        sum->test_accuracy /= (double)sum->eval_samples;
    }
    sum->samples_per_s = sum->train_s > 0 ? (double)sum->samples / sum->train_s : 0;
    cli_scores_mean(&run->scores, sum);
    run->pushes += sum->pushes;
    uint64_t smin, smed, smax;
    cli_async_staleness(run, &smin, &smed, &smax);
    fprintf(progress, "epoch %u/%d  loss %.4f  test_loss %.4f", sum->epoch, o->epochs,
            sum->train_loss, sum->test_loss);
    cli_scores_print(progress, o, sum);
    fprintf(progress,
            "  %.0f samples/s  "
            "%.2f s  pushes %llu  staleness %llu/%llu/%llu%s  waiting on the shards %.0f%%\n",
            sum->samples_per_s, sum->train_s + sum->eval_s, (unsigned long long)sum->pushes,
            (unsigned long long)smin, (unsigned long long)smed, (unsigned long long)smax,
            run->buckets && smax + 1 == run->buckets ? "+" : "",
            sum->train_s > 0 ? 100.0 * sum->ps_wait_s / (sum->train_s * (n - run->lost))
                             : 0.0);
    fflush(progress);
    return 0;
}

/* Async mode when a worker that held no shard is lost: the others keep
 * training (mode_async.c tells the shards to stop waiting for it), and at
 * the end of the epoch its supervisor's restart is waited for, bounded.
 * The restarted worker is begun again in the same session (the module
 * shipped to it anew by the call), as the same rank with the session's
 * secret, and its first pull takes it back in from the shards' current
 * values (runtime/ps: its clock the slowest live rank's). --max-restarts
 * bounds how often; a worker that does not come back stays out and the
 * run goes on without it, as before. */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "runtime/train/ckpt_file.h"
#include "train_int.h"

#define RJ_SUBMITTER "ferry submit (a restarted rank taken back in)"

struct ct_rejoin {
    int *lost_in;  /* by rank: the epoch its worker was lost in (0: none) */
    bool *done;    /* by rank: finished the epoch a lost shard interrupted */
    bool *masked;  /* by rank: left out of that epoch's run again (done) */
    bool *pending; /* by rank: a restored holder, in from the next epoch */
    int holder;    /* the rank whose shard is to be restored (-1: none) */
    int holder_in; /* the epoch it was lost in */
    bool rerun;    /* the next epoch call runs that epoch again */
    /* What the ranks that finished that epoch reported, added to its run
     * again's (sums and scores, as mode_async.c gathers them). */
    proto_train_epoch_reply partial;
    ct_scores scores;
};

/* The run's record of lost ranks, made on first use; NULL without memory
 * (a lost rank is then left out for good, as without restarts). */
static struct ct_rejoin *rj_of(ct_run *run)
{
    struct ct_rejoin *rj = run->rj;
    size_t k = (size_t)run->k;
    if (rj || !(rj = calloc(1, sizeof *rj)))
        return rj;
    rj->lost_in = calloc(k, sizeof *rj->lost_in);
    rj->done = calloc(k, sizeof *rj->done);
    rj->masked = calloc(k, sizeof *rj->masked);
    rj->pending = calloc(k, sizeof *rj->pending);
    rj->holder = -1;
    run->rj = rj;
    if (!rj->lost_in || !rj->done || !rj->masked || !rj->pending) {
        ct_async_fini(run);
        return NULL;
    }
    return rj;
}

void ct_async_lost(ct_run *run, int r, int e)
{
    if (rj_of(run))
        run->rj->lost_in[r] = e;
}

void ct_async_fini(ct_run *run)
{
    if (run->rj) {
        free(run->rj->lost_in);
        free(run->rj->done);
        free(run->rj->masked);
        free(run->rj->pending);
    }
    free(run->rj);
    run->rj = NULL;
    OPENSSL_cleanse(run->secret, sizeof run->secret);
}

const char *ct_async_holder_lost(ct_run *run, int h, int e, const int *rcs)
{
    const cluster_train_opts *o = run->o;
    if (o->spec.staleness >= 0)
        return "a run with --staleness cannot take a shard restored mid-epoch (every "
               "rank's clock would start again at it), so the run stops";
    if (!o->spec.checkpoint_dir || !o->spec.checkpoint_dir[0])
        return "without --checkpoint-dir there is nothing to restore it from, so the run "
               "stops (with one, the shard is restored from its newest checkpoint on the "
               "restarted worker and the run goes on)";
    if (run->restarts >= o->max_restarts)
        return "the run's restarts (--max-restarts) are spent, so the run stops";
    struct ct_rejoin *rj = rj_of(run);
    if (!rj)
        return "no memory to restore it, so the run stops";
    for (int r = 0; r < run->k; r++)
        rj->done[r] = rj->masked[r] || (run->alive[r] && rcs[r] == 0);
    rj->holder = h;
    rj->holder_in = e;
    return NULL;
}

void ct_async_partial(ct_run *run, proto_train_epoch_reply *sum, bool keep)
{
    struct ct_rejoin *rj = run->rj;
    if (!rj)
        return;
    if (keep) {
        rj->partial = *sum;
        rj->scores = run->scores;
    } else {
        *sum = rj->partial;
        run->scores = rj->scores;
    }
}

bool ct_async_rerun_begin(ct_run *run)
{
    struct ct_rejoin *rj = run->rj;
    for (int r = 0; rj && rj->rerun && r < run->k; r++)
        if (rj->done[r] && run->alive[r]) {
            run->alive[r] = false;
            rj->masked[r] = true;
        }
    return rj && rj->rerun;
}

void ct_async_rerun_end(ct_run *run)
{
    struct ct_rejoin *rj = run->rj;
    for (int r = 0; rj && r < run->k; r++)
        if (rj->masked[r]) {
            run->alive[r] = true;
            rj->masked[r] = false;
        }
    if (rj)
        rj->rerun = false;
}

/* Rank *arg's worker answers as a new process. */
static bool is_new(const ct_run *run, const cluster_worker *w, void *arg)
{
    int r = *(const int *)arg;
    const proto_ping_reply *p = w[run->node[r]].ping;
    return p && p->pid && p->pid != run->pids[r];
}

/* Waits until rank r's worker answers as a new process; its ping (owned by
 * the cluster) or NULL when it did not come back in time. */
static const proto_ping_reply *restarted(ct_run *run, int r)
{
    const cluster_worker *w = ct_wait_survey(run, is_new, &r);
    return is_new(run, w, &r) ? w[run->node[r]].ping : NULL;
}

/* Holds rank r's session again: its worker's earlier holds ended with it. */
static void hold_again(ct_run *run, int r)
{
    proto_bytes b;
    proto_train_hold_req h = {.session = run->session,
                              .secret = {run->secret, sizeof run->secret}};
    if (!run->holds || proto_train_hold_req_pack(&h, &b))
        return; /* unheld: the worker's idle time frees the session */
    for (int i = 2 * r; i < 2 * r + 2; i++) {
        cluster_close_call(run->holds[i]);
        run->holds[i] = NULL;
        cluster_open_call(run->cl, run->node[r], PROTO_METHOD_TRAIN_HOLD, b.data, b.len,
                          &run->holds[i]);
    }
    OPENSSL_cleanse(b.data, b.len);
    proto_bytes_fini(&b);
}

/* Begins rank r's session again on its restarted worker, after epoch e,
 * its shards from `resume` (NULL: it holds none). Returns 0 or FERRY_E*
 * (said). */
static int begin_again(ct_run *run, int r, int e, const proto_train_spec *spec,
                       const char *resume)
{
    proto_bytes in = {0};
    ferry_bytes_t out = {0};
    proto_train_begin_reply *reply = NULL;
    proto_train_spec with = *spec;
    if (resume)
        with.resume = resume;
    int rc = ct_begin_pack(&in, run, r, &with, RJ_SUBMITTER, run->secret,
                           sizeof run->secret, e);
    if (rc == 0) {
        ferry_bytes_t a = {.data = in.data, .len = in.len};
        rc = cluster_call(run->cl, run->m, run->node[r], "ferry.train.begin", &a, &out);
        OPENSSL_cleanse(in.data, in.len);
    }
    proto_bytes_fini(&in);
    if (rc == 0 && proto_train_begin_reply_unpack(out.data, out.len, &reply))
        rc = FERRY_EPROTO;
    proto_free(reply);
    cluster_free_bytes(&out);
    if (rc)
        ct_fail(run,
                "%s: worker %d (%s) was restarted but could not take its place in "
                "the async run again: %s",
                run->module, r, cluster_target(run->cl, run->node[r]),
                cluster_error(run->cl));
    else
        hold_again(run, r);
    return rc;
}

/* Rank r's worker, lost in epoch run->rj->lost_in[r]: back after epoch e,
 * or out for good. Returns 0 or FERRY_E* (said). */
static int take_back(ct_run *run, int r, int e, const proto_train_spec *spec)
{
    const cluster_train_opts *o = run->o;
    int lost_in = run->rj->lost_in[r];
    run->rj->lost_in[r] = 0;
    const proto_ping_reply *p =
        run->restarts < o->max_restarts ? restarted(run, r) : NULL;
    char how[256];
    snprintf(how, sizeof how, "%s", p && p->last_crash ? p->last_crash : "");
    int pid = p ? (int)p->pid : 0;
    int rc = p ? begin_again(run, r, e, spec, NULL) : 0;
    if (rc)
        return rc;
    if (p) {
        run->restarts++;
        run->pids[r] = pid;
        run->alive[r] = true;
        run->lost--;
    }
    if (run->ev && run->ev->worker_back)
        run->ev->worker_back(run->ev->data, r, cluster_target(run->cl, run->node[r]),
                             lost_in, how, p != NULL, e, run->restarts,
                             (int)o->max_restarts, "");
    return 0;
}

int ct_async_rejoin(ct_run *run, int e, const proto_train_spec *spec)
{
    for (int r = 0; run->rj && r < run->k; r++)
        if (run->rj->pending[r]) { /* a restored holder: in from now on */
            run->rj->pending[r] = false;
            run->alive[r] = true;
            run->lost--;
        }
    if (!run->rj || e >= run->o->epochs || run->o->max_restarts <= 0)
        return 0;
    for (int r = 0; r < run->k; r++) {
        int rc = run->rj->lost_in[r] ? take_back(run, r, e, spec) : 0;
        if (rc)
            return rc;
    }
    return 0;
}

/* The newest file of shard h in `dir` that reads back whole, into path. */
static bool newest_shard(ct_run *run, const char *dir, int h, char *path, size_t len)
{
    char **names;
    int n = rt_ckpt_list_shards(dir, &names);
    bool found = false;
    for (int i = 0; i < n && !found; i++) { /* newest first */
        uint64_t steps;
        int shard, shards;
        if (!rt_ckpt_is_shard_name(names[i], &steps, &shard, &shards) || shard != h ||
            shards != run->shards)
            continue;
        rt_ckpt_file f;
        char why[256];
        snprintf(path, len, "%s/%s", dir, names[i]);
        if (rt_ckpt_read(path, &f, why, sizeof why) == 0) {
            found = true;
            rt_ckpt_file_free(&f);
        }
    }
    rt_ckpt_names_free(names, n > 0 ? n : 0);
    return found;
}

/* Adds why the lost shard stays lost to the epoch's failure. */
static int lost_for_good(ct_run *run, const char *why)
{
    size_t n = strlen(run->why);
    snprintf(run->why + n, sizeof run->why - n, "; %s, so the shard is lost", why);
    return FERRY_EPIPE;
}

int ct_async_restore(ct_run *run, int e, const proto_train_spec *spec)
{
    struct ct_rejoin *rj = run->rj;
    if (!rj || rj->holder < 0)
        return FERRY_EPIPE;
    int h = rj->holder;
    rj->holder = -1;
    const proto_ping_reply *p = restarted(run, h);
    char why[64], how[256], file[4400];
    snprintf(why, sizeof why, "its worker did not come back within %d s",
             CT_RESTART_WAIT_MS / 1000);
    if (!p)
        return lost_for_good(run, why);
    snprintf(how, sizeof how, "%s", p->last_crash ? p->last_crash : "");
    int pid = (int)p->pid;
    if (!newest_shard(run, spec->checkpoint_dir, h, file, sizeof file))
        return lost_for_good(run, "--checkpoint-dir holds no checkpoint of it yet");
    if (begin_again(run, h, e, spec, file))
        return lost_for_good(run, "it could not be restored on the restarted worker");
    run->restarts++;
    run->pids[h] = pid;
    run->alive[h] = false; /* it sits out the rest of epoch e */
    run->lost++;
    rj->pending[h] = true;
    rj->rerun = true;
    run->why[0] = '\0';
    if (run->ev && run->ev->worker_back)
        run->ev->worker_back(run->ev->data, h, cluster_target(run->cl, run->node[h]),
                             rj->holder_in, how, true, e, run->restarts,
                             (int)run->o->max_restarts, file);
    return 0;
}

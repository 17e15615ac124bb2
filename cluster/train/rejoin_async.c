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
#include <unistd.h>

#include <openssl/crypto.h>
#include <uv.h>

#include "train_int.h"

/* As recover.c's: a restart takes about a second; one not done by then
 * has a host or a binary that is gone, or is in a crash loop's pause. */
#define RJ_RESTART_WAIT_MS 20000
#define RJ_SURVEY_EVERY_US 100000
#define RJ_SUBMITTER       "ferry submit (a restarted rank taken back in)"

struct ct_rejoin {
    int *lost_in; /* by rank: the epoch its worker was lost in (0: none) */
};

void ct_async_lost(ct_run *run, int r, int e)
{
    if (!run->rj && (run->rj = calloc(1, sizeof *run->rj)) &&
        !(run->rj->lost_in = calloc((size_t)run->k, sizeof *run->rj->lost_in))) {
        free(run->rj);
        run->rj = NULL;
    }
    if (run->rj) /* without memory: left out for good, as without restarts */
        run->rj->lost_in[r] = e;
}

void ct_async_fini(ct_run *run)
{
    if (run->rj)
        free(run->rj->lost_in);
    free(run->rj);
    run->rj = NULL;
    OPENSSL_cleanse(run->secret, sizeof run->secret);
}

/* Waits until rank r's worker answers as a new process; its ping (owned by
 * the cluster) or NULL when it did not come back in time. */
static const proto_ping_reply *restarted(ct_run *run, int r)
{
    uint64_t until = uv_hrtime() + (uint64_t)RJ_RESTART_WAIT_MS * 1000000u;
    for (;;) {
        const cluster_worker *w = NULL;
        cluster_survey(run->cl, false, &w);
        const proto_ping_reply *p = w[run->node[r]].ping;
        if (p && p->pid && p->pid != run->pids[r])
            return p;
        if (uv_hrtime() >= until ||
            (run->ev && run->ev->give_up && run->ev->give_up(run->ev->data)))
            return NULL;
        usleep(RJ_SURVEY_EVERY_US);
    }
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

/* Begins rank r's session again on its restarted worker, after epoch e.
 * Returns 0 or FERRY_E* (said). */
static int begin_again(ct_run *run, int r, int e, const proto_train_spec *spec)
{
    int k = run->k;
    const char *peers[k];
    for (int i = 0; i < k; i++)
        peers[i] = cluster_target(run->cl, run->node[i]);
    proto_bytes in = {0};
    ferry_bytes_t out = {0};
    proto_train_begin_reply *reply = NULL;
    run->rejoin_epoch = e;
    int rc = ct_begin_pack(&in, run, r, spec, peers, RJ_SUBMITTER, run->secret,
                           sizeof run->secret);
    run->rejoin_epoch = 0;
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
        ct_fail(run, "%s: worker %d (%s) was restarted but could not take its place in "
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
    const proto_ping_reply *p = run->restarts < o->max_restarts ? restarted(run, r) : NULL;
    char how[256];
    snprintf(how, sizeof how, "%s", p && p->last_crash ? p->last_crash : "");
    int pid = p ? (int)p->pid : 0;
    int rc = p ? begin_again(run, r, e, spec) : 0;
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
                             (int)o->max_restarts);
    return 0;
}

int ct_async_rejoin(ct_run *run, int e, const proto_train_spec *spec)
{
    if (!run->rj || e >= run->o->epochs || run->o->max_restarts <= 0)
        return 0;
    for (int r = 0; r < run->k; r++) {
        int rc = run->rj->lost_in[r] ? take_back(run, r, e, spec) : 0;
        if (rc)
            return rc;
    }
    return 0;
}

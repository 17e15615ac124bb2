/* Sync mode when a worker is lost mid-run: the run does not end. Every
 * rank's session is discarded and a new one begins on every rank from the
 * newest checkpoint of --checkpoint-dir (the start when there is none yet),
 * once the lost worker's supervisor has brought it back; with --min-workers
 * one that does not come back, or does not answer as the run begins, is
 * left out and the global batch is sliced over the others, until it
 * answers at a checkpoint. --max-restarts bounds how often. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "runtime/train/ckpt_file.h"
#include "train_int.h"

/* A worker's crash record, as its Ping carries it. */
#define CT_HOW_LEN 256

int ct_recover_init(ct_run *run)
{
    run->node = malloc((size_t)run->cap * sizeof *run->node);
    run->pids = calloc((size_t)run->cap, sizeof *run->pids);
    run->out = malloc((size_t)run->cap * sizeof *run->out);
    run->absent = calloc((size_t)run->cap, sizeof *run->absent);
    if (!run->node || !run->pids || !run->out || !run->absent)
        return FERRY_ENOMEM;
    for (int r = 0; r < run->k; r++)
        run->node[r] = r;
    run->next_epoch = run->o->first_epoch > 0 ? run->o->first_epoch : 1;
    return 0;
}

void ct_recover_fini(ct_run *run)
{
    free(run->node);
    free(run->pids);
    free(run->out);
    free(run->absent);
    run->absent = NULL;
    run->node = NULL;
    run->pids = NULL;
    run->out = NULL;
}

void ct_recover_note(ct_run *run)
{
    const cluster_worker *w;
    if (run->k < 2 || run->o->max_restarts <= 0)
        return;
    cluster_survey(run->cl, false, &w);
    for (int r = 0; r < run->k; r++)
        run->pids[r] = w[run->node[r]].ping ? w[run->node[r]].ping->pid : 0;
}

const cluster_worker *ct_wait_survey(ct_run *run,
                                     bool (*done)(const ct_run *run,
                                                  const cluster_worker *w, void *arg),
                                     void *arg)
{
    uint64_t until = uv_hrtime() + (uint64_t)CT_RESTART_WAIT_MS * 1000000u;
    const cluster_worker *w = NULL;
    for (;;) {
        cluster_survey(run->cl, false, &w);
        if (done(run, w, arg) || uv_hrtime() >= until ||
            (run->ev && run->ev->give_up && run->ev->give_up(run->ev->data)))
            return w;
        usleep(CT_SURVEY_EVERY_US);
    }
}

static bool all_answer(const ct_run *run, const cluster_worker *w, void *arg)
{
    (void)arg;
    for (int r = 0; r < run->k; r++)
        if (!w[run->node[r]].ping)
            return false;
    return true;
}

/* What became of each rank's worker since the session began: back[r] a
 * new process answers, gone[r] none does after the wait. Returns how many
 * were lost (back or gone); `how` gets each one's crash record. */
static int survey_lost(ct_run *run, bool *back, bool *gone, char (*how)[CT_HOW_LEN])
{
    const cluster_worker *w = ct_wait_survey(run, all_answer, NULL);
    int lost = 0;
    for (int r = 0; r < run->k; r++) {
        const proto_ping_reply *p = w[run->node[r]].ping;
        gone[r] = !p;
        back[r] = p && run->pids[r] && p->pid != run->pids[r]; /* 0: not known */
        snprintf(how[r], CT_HOW_LEN, "%s", p && p->last_crash ? p->last_crash : "");
        lost += gone[r] || back[r];
    }
    return lost;
}

/* The newest checkpoint of the run's directory that reads back whole into
 * run->from, and the epoch after it; false when there is none. */
static bool newest_checkpoint(ct_run *run, const char *dir, int *next_epoch)
{
    char **names;
    if (!dir || !dir[0])
        return false;
    int n = rt_ckpt_list(dir, &names);
    bool found = false;
    for (int i = 0; i < n && !found; i++) {
        rt_ckpt_file f;
        char why[256];
        snprintf(run->from, sizeof run->from, "%s/%s", dir, names[i]);
        if (rt_ckpt_read(run->from, &f, why, sizeof why) == 0) {
            *next_epoch = (int)f.h.epoch + 1;
            found = true;
            rt_ckpt_file_free(&f);
        }
    }
    rt_ckpt_names_free(names, n > 0 ? n : 0);
    return found;
}

/* Drops the ranks in gone[], the others keeping their order. */
static void leave_out(ct_run *run, const bool *gone)
{
    int k = 0;
    for (int r = 0; r < run->k; r++) {
        if (!gone[r])
            run->node[k++] = run->node[r];
        else
            run->out[run->n_out++] = run->node[r];
    }
    run->k = k;
}

void ct_recover_absent(ct_run *run)
{
    const cluster_train_opts *o = run->o;
    if (run->mode != &ct_mode_sync || run->k < 2 || !o->min_workers)
        return;
    const cluster_worker *w;
    cluster_survey(run->cl, false, &w);
    int k = run->k, up = 0;
    bool gone[k];
    for (int r = 0; r < k; r++) {
        gone[r] = !w[r].ping;
        up += !gone[r];
    }
    if (up == k || up < o->min_workers || up < 2)
        return; /* all here, or too few: begin says which does not answer */
    for (int r = 0; r < k; r++)
        run->absent[r] = gone[r];
    leave_out(run, gone);
    for (int r = 0; r < k && run->ev && run->ev->worker_absent; r++)
        if (gone[r])
            run->ev->worker_absent(run->ev->data, r, cluster_target(run->cl, r), up);
}

/* Ends the session on the run's ranks: the survivors' sessions go, a
 * restarted worker knows none. */
static void end_session(ct_run *run, proto_train_begin_reply **b)
{
    ct_discard(run);
    ct_unhold(run);
    ct_free_replies((void **)b, run->k);
    memset(b, 0, (size_t)run->cap * sizeof *b);
}

/* Begins a new session on run->node's ranks from spec->resume, at epoch
 * `next`. */
static int begin_session(ct_run *run, int next, proto_train_spec *spec,
                         proto_train_begin_reply **b)
{
    run->next_epoch = next;
    int rc = ct_begin(run, spec, b);
    if (rc == 0)
        ct_recover_note(run);
    return rc;
}

/* Says each rank lost, with where the run was (the others' records). */
static void say_lost(ct_run *run, int e, const bool *back, const bool *gone,
                     char (*how)[CT_HOW_LEN])
{
    int k = run->k, n_gone = 0;
    bool lost[k];
    cluster_train_lost l[k];
    for (int r = 0; r < k; r++) {
        lost[r] = back[r] || gone[r];
        n_gone += gone[r];
    }
    if (!run->ev || !run->ev->worker_restarted)
        return;
    ct_lost_where(run, e, lost, l);
    for (int r = 0; r < k; r++) {
        if (!lost[r])
            continue;
        l[r] = (cluster_train_lost){.rank = r,
                                    .worker = run->node[r],
                                    .target = cluster_target(run->cl, run->node[r]),
                                    .pid = (int)run->pids[r],
                                    .epoch = e,
                                    .how = how[r],
                                    .back = back[r],
                                    .left = k - n_gone,
                                    .from = run->from,
                                    .restart = run->restarts,
                                    .max = (int)run->o->max_restarts,
                                    .step = l[r].step,
                                    .phase = l[r].phase,
                                    .waited = l[r].waited};
        run->ev->worker_restarted(run->ev->data, &l[r]);
    }
}

/* The epoch's failure, said: nothing undoes it. */
static int stands(ct_run *run, int rc)
{
    if (run->why[0])
        ct_fail(run, "%s", run->why);
    run->why[0] = '\0';
    return rc;
}

int ct_recover(ct_run *run, int e, int rc, proto_train_spec *spec,
               proto_train_begin_reply **b)
{
    const cluster_train_opts *o = run->o;
    /* A run the stall inspector ended stays ended: its silent worker is
     * stopped, not lost, and the report is the run's error. */
    if (run->mode != &ct_mode_sync || run->k < 2 || o->max_restarts <= 0 ||
        ct_stall_aborted(run))
        return stands(run, rc);
    int k = run->k;
    bool back[k], gone[k];
    char how[k][CT_HOW_LEN];
    int lost = survey_lost(run, back, gone, how);
    if (lost == 0 || (run->ev && run->ev->give_up && run->ev->give_up(run->ev->data)))
        return stands(run, rc); /* not a worker lost, or none to wait for */
    int n_gone = 0;
    for (int r = 0; r < k; r++)
        n_gone += gone[r];
    if (run->restarts >= o->max_restarts) {
        stands(run, rc);
        ct_fail(run,
                "%s: a worker was lost again after %d restart%s (--max-restarts %ld): "
                "the run ends",
                run->module, run->restarts, run->restarts == 1 ? "" : "s",
                o->max_restarts);
        return rc;
    }
    if (n_gone && (!o->min_workers || k - n_gone < o->min_workers)) {
        stands(run, rc);
        for (int r = 0; r < k; r++)
            if (gone[r])
                ct_fail(run, "%s: worker %d (%s) did not come back within %d s%s%s; %s",
                        run->module, run->node[r], cluster_target(run->cl, run->node[r]),
                        CT_RESTART_WAIT_MS / 1000, how[r][0] ? ": " : "", how[r],
                        o->min_workers ? "too few workers are left for --min-workers"
                                       : "--min-workers M lets a run go on without it");
        return rc;
    }
    run->restarts++;
    run->why[0] = '\0';
    int next = o->first_epoch > 0 ? o->first_epoch : 1;
    spec->resume = o->resume;
    run->from[0] = '\0';
    if (newest_checkpoint(run, spec->checkpoint_dir, &next))
        spec->resume = run->from;
    else
        snprintf(run->from, sizeof run->from, "%s", o->resume ? o->resume : "");
    say_lost(run, e, back, gone, how);
    end_session(run, b);
    leave_out(run, gone);
    run->lost += n_gone;
    return begin_session(run, next, spec, b);
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* Says each worker taken in: back, there at last, or new to the cluster. */
static void say_rejoined(ct_run *run, int e, const int *back, int n_back)
{
    const cluster_train_events *ev = run->ev;
    for (int i = 0; ev && i < n_back; i++) {
        int w = back[i], n = run->k + n_back;
        const char *t = cluster_target(run->cl, w);
        bool joined = w >= run->size0 && run->absent[w];
        if (joined && ev->worker_joined)
            ev->worker_joined(ev->data, w, t, e, run->from, n);
        else if (!joined && ev->worker_rejoined)
            ev->worker_rejoined(ev->data, w, t, e, run->from, n, run->absent[w]);
    }
}

int ct_rejoin(ct_run *run, int e, proto_train_spec *spec, proto_train_begin_reply **b)
{
    if (e >= run->o->epochs)
        return 0;
    int rc = run->cap > run->k + run->n_out ? ct_grow_scan(run) : 0;
    if (rc || run->n_out == 0)
        return rc;
    const cluster_worker *w;
    cluster_survey(run->cl, false, &w);
    int back[run->n_out], n_back = 0, n = 0;
    for (int i = 0; i < run->n_out; i++)
        if (w[run->out[i]].ping)
            back[n_back++] = run->out[i];
        else
            run->out[n++] = run->out[i];
    int next = e + 1;
    if (n_back == 0 || !newest_checkpoint(run, spec->checkpoint_dir, &next)) {
        for (int i = 0; i < n_back; i++) /* none to begin from: later */
            run->out[n++] = back[i];
        return 0;
    }
    run->n_out = n;
    spec->resume = run->from;
    say_rejoined(run, e, back, n_back);
    for (int i = 0; i < n_back; i++)
        run->absent[back[i]] = false;
    end_session(run, b);
    for (int i = 0; i < n_back; i++)
        run->node[run->k++] = back[i];
    run->lost -= n_back;
    /* Rank order is the cluster's, as at the start. */
    qsort(run->node, (size_t)run->k, sizeof *run->node, cmp_int);
    return begin_session(run, next, spec, b);
}

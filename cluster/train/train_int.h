/* cluster/train — private header shared by the files of the master-side
 * driver (train.h says which file does what). */
#ifndef FERRY_CLUSTER_TRAIN_INT_H
#define FERRY_CLUSTER_TRAIN_INT_H

#include "cluster/train/train.h"
#include "proto/proto.h"

/* Buckets of the staleness histograms merged at most (the workers' count). */
#define CT_STALE_BUCKETS 64

/* Async mode's metrics, averaged over the ranks by their test samples. */
typedef struct ct_scores {
    size_t n;
    char name[FERRY_MODEL_METRICS_MAX][32];
    double sum[FERRY_MODEL_METRICS_MAX];
    uint64_t samples;
} ct_scores;

struct ct_mode;
typedef struct ct_timeline ct_timeline;
typedef struct ct_stall ct_stall;

/* One run, as its files share it. */
typedef struct ct_run {
    cluster *cl;
    const cluster_module *m;
    const char *module;
    const cluster_train_opts *o;
    const cluster_train_events *ev;
    const struct ct_mode *mode;
    int k;     /* ranks */
    int cap;   /* the most ranks it may grow to (grow.c) */
    int size0; /* the cluster's workers as it began: those after joined */
    uint64_t session;
    bool *alive;     /* by rank: async mode loses ranks that held no shard */
    uint64_t *steps; /* by rank: local steps over the run (async) */
    int shards;      /* async: the parameter server's */
    int lost;        /* ranks lost so far */
    uint64_t pushes; /* over every rank and epoch */
    uint64_t staleness[CT_STALE_BUCKETS]; /* merged histograms */
    size_t buckets;
    ct_scores scores;               /* async: the last epoch's */
    proto_train_epoch_reply *reply; /* sync: the last epoch's, rank 0's */
    cluster_open **holds;           /* two a rank (hold.c); NULL: none */
    ct_timeline *tl;                /* --timeline's (timeline.c); NULL: none */
    ct_stall *stall;                /* the stall inspector's (stall.c); NULL: none */
    int *node;       /* by rank: the cluster's worker it runs on (recover.c) */
    int next_epoch;  /* the epoch to run next (a rollback moves it back) */
    int32_t *pids;   /* by rank: its worker's process when the session began */
    int restarts;    /* rollbacks so far */
    char from[4096]; /* the checkpoint the ranks began from ("": none) */
    char why[2048];  /* an epoch's failure, said unless a rollback undoes it */
    int *out;        /* the cluster's workers left out (--min-workers) */
    int n_out;
    bool *absent; /* by worker: never in the run yet (left out as it began, or
                     joined the cluster since) */
    uint8_t secret[32];   /* the session's (begin.c), cleansed at the run's end */
    struct ct_rejoin *rj; /* async: the lost ranks' restarts (rejoin_async.c) */
} ct_run;

/* What a mode does differently: an epoch over its ranks, and the end that
 * reads the final parameters back. */
typedef struct ct_mode {
    const char *name;
    /* Runs epoch e (1-based) and describes it in *out (strings borrowed
     * from run until the next epoch). Returns 0, or FERRY_E* after saying
     * why. */
    int (*epoch)(ct_run *run, int e, cluster_train_epoch *out);
    /* Ends the sessions; done[0] holds the parameters' digest, *identical
     * whether every live rank has the same. Returns 0 or FERRY_E* (said). */
    int (*end)(ct_run *run, proto_train_end_reply **done, bool *identical);
} ct_mode;

extern const ct_mode ct_mode_single, ct_mode_sync, ct_mode_async;

/* ---- calls.c ---- */

/* Says why the run failed, through events->error. */
void ct_fail(ct_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* What a built-in function's result is: its view's unpack behind one
 * signature, and the message's name for the error that refuses it. */
typedef struct ct_reply {
    const char *what;
    int (*unpack)(const void *buf, size_t len, void **out);
} ct_reply;

extern const ct_reply ct_begin_reply, ct_epoch_reply, ct_end_reply;

/* Frees each non-NULL reply[0..n). */
void ct_free_replies(void *const *reply, int n);

/* Calls the built-in `fn` on ranks 0..k-1 at once, in[r] (packed) to rank
 * r; on success reply[r] holds each result's view, as `kind` unpacks it
 * (free with ct_free_replies). */
int ct_call(ct_run *run, const char *fn, const proto_bytes *in, const ct_reply *kind,
            void **reply);

/* The same packed message to every rank: ct_call with in for each. */
int ct_call_all(ct_run *run, const char *fn, const proto_bytes *in, const ct_reply *kind,
                void **reply);

/* What each rank's call of ct_call_each came to, by rank: its result, its
 * error text (NULL on success) and its reply. */
typedef struct ct_each {
    int *rcs;
    char **errs;
    ferry_bytes_t *out;
} ct_each;

/* Calls `fn` with the packed `in` on every live rank, each alone (a failure
 * cancels nothing), as cluster_call_each. Returns 0 with *each filled, or an
 * error before anything started; free *each with ct_each_free() either way. */
int ct_call_each(ct_run *run, const char *fn, const proto_bytes *in,
                 const cluster_each_follow *follow, ct_each *each);
void ct_each_free(ct_run *run, ct_each *each);

/* Asks every live rank to end the session without reading its parameters
 * back: a failed run frees the workers for the next one at once. A worker
 * that died answers nothing: each is asked alone. */
void ct_discard(ct_run *run);

/* ---- recover.c: a lost worker's restart ---- */

/* How long a lost worker's supervisor gets to bring it back: a restart
 * takes about a second; a worker that is not back by then has a host or a
 * binary that is gone, or is in a crash loop's pause. */
#define CT_RESTART_WAIT_MS 20000
/* How often the wait asks the workers. */
#define CT_SURVEY_EVERY_US 100000

/* Pings every worker until done(run, survey, arg) holds, CT_RESTART_WAIT_MS
 * pass or the run's events->give_up says to stop. Returns the last survey
 * (cluster_survey's, owned by the cluster). */
const cluster_worker *ct_wait_survey(ct_run *run,
                                     bool (*done)(const ct_run *run,
                                                  const cluster_worker *w, void *arg),
                                     void *arg);

/* ---- begin.c ---- */

/* Begins the session on ranks 0..k-1; b[r] holds each reply. On failure it
 * says why and discards what began. */
int ct_begin(ct_run *run, const proto_train_spec *spec, proto_train_begin_reply **b);

/* Packs rank r's TrainBegin: the session, who asks, the secret, the run's
 * options and every rank's address; rejoin_epoch > 0: the rank is begun
 * again on its restarted worker after that epoch (0: a run's begin). */
int ct_begin_pack(proto_bytes *b, const ct_run *run, int r, const proto_train_spec *given,
                  const char *submitter, const uint8_t *secret, size_t secret_len,
                  int rejoin_epoch);

/* ---- rejoin_async.c ---- */

/* Async mode: rank r's worker was lost mid-epoch `e` (`why`): noted, for
 * the restart to wait for. */
void ct_async_lost(ct_run *run, int r, int e);
/* After async epoch `e`: each lost rank whose worker its supervisor
 * restarted (waited for, bounded) begins again in the session and takes
 * its place from the shards' current values, said through the events;
 * one that does not come back stays out. Returns 0, or FERRY_E* (said)
 * when --max-restarts is spent. */
int ct_async_rejoin(ct_run *run, int e, const proto_train_spec *spec);
void ct_async_fini(ct_run *run);
/* Async epoch `e` lost rank h, a shard's holder (`rcs`: each rank's
 * result): NULL when its shard is to be restored (ct_async_restore), else
 * why it cannot be and the run stops. */
const char *ct_async_holder_lost(ct_run *run, int h, int e, const int *rcs);
/* After epoch `e` failed: restores the lost holder's shard from its newest
 * checkpoint on its restarted worker, and returns 0 for the ranks that had
 * not finished the epoch to run it again (the restored rank in from the
 * next); else FERRY_EPIPE with run->why saying why the shard is lost. */
int ct_async_restore(ct_run *run, int e, const proto_train_spec *spec);
/* Around an epoch call: an epoch run again leaves out the ranks that had
 * finished it (begin returns whether this is one). */
bool ct_async_rerun_begin(ct_run *run);
/* An epoch a lost shard interrupted: `keep` the sums of the ranks that
 * finished it, or (its run again) take them back into *sum and the scores. */
void ct_async_partial(ct_run *run, proto_train_epoch_reply *sum, bool keep);
void ct_async_rerun_end(ct_run *run);

/* ---- hold.c ---- */

/* Holds the begun session on every rank with the run's `secret` (`len`
 * bytes) and waits, a round trip, until each worker has taken its hold. A
 * hold that cannot start leaves its rank unheld: nothing fails. */
void ct_hold(ct_run *run, const uint8_t *secret, size_t len);
/* Lets go of the holds (each ended by its session's end already, or
 * cancelled here). */
void ct_unhold(ct_run *run);

/* ---- recover.c ---- */

/* Gives each rank its worker (rank r on worker r); FERRY_ENOMEM. */
int ct_recover_init(ct_run *run);
/* Just before the first begin, in sync mode with --min-workers: leaves
 * out the workers that do not answer while M or more do (a worker that
 * comes up later, its host still starting or an engine that starts it
 * late, is taken in by ct_rejoin at a checkpoint). What is sized by rank
 * was sized for them all before. */
void ct_recover_absent(ct_run *run);
void ct_recover_fini(ct_run *run);
/* Notes which process each rank's worker is, once the session began. */
void ct_recover_note(ct_run *run);
/* After epoch `e` failed with `rc` in sync mode: when a worker was lost
 * and restarts are left, waits for it (or, with --min-workers, goes on
 * without it), discards the session, and begins a new one on every rank
 * from the newest checkpoint of --checkpoint-dir (or from the start),
 * setting run->next_epoch. Returns 0 to go on, or rc / FERRY_E* (said). */
int ct_recover(ct_run *run, int e, int rc, proto_train_spec *spec,
               proto_train_begin_reply **b);

/* After epoch `e` wrote a checkpoint, in a run that left workers out:
 * takes back in each that answers again, every rank beginning anew from
 * that checkpoint. Returns 0 (run->next_epoch set when it did), or
 * FERRY_E* (said) when the new session could not begin. */
int ct_rejoin(ct_run *run, int e, proto_train_spec *spec, proto_train_begin_reply **b);

/* ---- grow.c ---- */

/* A worker's address, as the joined event gives it. */
#define CT_TARGET_MAX 1024

/* The most ranks the run may grow to: run->k unless workers that join
 * the cluster are taken in (sync, --min-workers, --checkpoint-dir, no
 * --workers). Set before anything is sized by rank. */
int ct_grow_cap(const ct_run *run);
/* At a checkpoint: adds the workers that joined the cluster since (the
 * joined event) to it and to run->out, where ct_rejoin takes them in.
 * Returns 0, or FERRY_E* (said) when one cannot be added. */
int ct_grow_scan(ct_run *run);

/* ---- lost_where.c ---- */

/* Where the run was in epoch e when the ranks in lost[] were lost: one
 * Stats round of the others, their records of that epoch into each lost
 * rank's out[r].step, .phase and .waited (0, "" and false when none
 * recorded one). Strings are the cluster's, valid until its next survey. */
void ct_lost_where(ct_run *run, int e, const bool *lost, cluster_train_lost *out);

/* ---- timeline.c ---- */

/* With --timeline: opens its file (refused, said, when it cannot be
 * written) and measures each rank's clock against ours, before the run
 * begins. 0 without one. */
int ct_timeline_open(ct_run *run);
/* Writes rank r's events of an epoch (its reply's) into the file. */
void ct_timeline_take(ct_run *run, int r, const proto_train_epoch_reply *rep);
/* Ends the file, with the clocks' uncertainty, whatever the run came to
 * (`rc`); returns rc, or FERRY_EIO (said) when the file could not be
 * written after a run that succeeded. */
int ct_timeline_close(ct_run *run, int rc);

/* ---- stall.c ---- */

/* Starts watching the run's calls for stalls (the thresholds refused,
 * said, when they are not durations). Returns 0 or FERRY_E*. */
int ct_stall_start(ct_run *run);
/* Stops watching and frees. */
void ct_stall_stop(ct_run *run);
/* The report the run was ended with, once the abort threshold passed,
 * the first time it is asked; NULL otherwise. */
const char *ct_stall_abort_report(ct_run *run);
/* Whether the stall inspector ended the run: nothing to recover then. */
bool ct_stall_aborted(const ct_run *run);
/* Parses a duration ("500ms", "30s", "2m", "1h", or seconds) into *ms.
 * Returns 0 or FERRY_EINVAL. */
int ct_stall_parse(const char *text, int64_t *ms);

/* ---- scores.c ---- */

/* Adds a rank's metrics, weighted by its test samples. */
void ct_scores_add(ct_scores *s, const proto_train_epoch_reply *r);
/* Points e's metrics at the means (names in `s`, which must outlive it). */
void ct_scores_mean(const ct_scores *s, cluster_train_epoch *e);

/* "min/median/max" of the run's merged staleness histogram. */
void ct_staleness(const ct_run *run, uint64_t *min, uint64_t *median, uint64_t *max);

#endif

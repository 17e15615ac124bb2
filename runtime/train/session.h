/* runtime/train — the one training session a worker runs (session.c), as
 * the built-in functions (train_fn.c) take, hold and give it back.
 *
 * A worker trains one session at a time, and the session has an owner: the
 * submitter that began it (named by the begin's `submitter` and the peer
 * address it called from). A second begin while the session lives is
 * refused with a message naming both. A session whose owner is gone is
 * reclaimed by the next begin: one left idle (no call of its own) for its
 * `idle_ms`, or one whose last epoch failed or was cancelled (a submitter
 * never goes on with a session after that). A begin for the same session id
 * is its owner's and replaces it. A session whose master holds it (a
 * TrainHold parked for the run, hold.c) is reclaimed as soon as that hold's
 * caller is gone: the master's process died between two of its calls. */
#ifndef FERRY_RUNTIME_TRAIN_SESSION_H
#define FERRY_RUNTIME_TRAIN_SESSION_H

#include <stdatomic.h>

#include "runtime/runtime_int.h"
#include "train.h"

typedef struct rt_train_session {
    uint64_t id;
    const rt_module *m;
    rt_trainer *t;
    rt_comm *comm; /* sync mode: the collectives between the ranks */
    bool busy;     /* a begin or an epoch is running; under the worker's train_lock */
    bool starting; /* that call is its begin; under train_lock */
    ferry_ctx_t *holder; /* the call that holds it busy; under train_lock */
    atomic_bool stop;    /* an end asked the call that holds it to stop */
    /* Ownership, under train_lock: who began it, when it last finished a
     * call of its own, how long it may idle, whether its owner hung up. */
    char owner[512];
    uint64_t idle_since_ns, started_ns;
    uint32_t idle_ms;
    bool abandoned;
    /* The master's hold (hold.c), parked for the run, or NULL; and the
     * secret a hold must carry (the begin's), under train_lock. */
    rpc_srv_call *hold;
    bool held; /* a hold was ever parked */
    bool has_secret;
    uint8_t secret[RT_COMM_SECRET_BYTES];
} rt_train_session;

/* How long a session that its master never held may go without a call of
 * its own before the next begin takes it: a master holds its sessions a
 * round trip after their begins return, so one that never did died in
 * between. Generous, for a loaded machine and for callers that drive the
 * built-in functions without a hold (those keep their session while they
 * call it at least this often). */
#define RT_HOLD_GRACE_MS 10000

/* Keeps the begin's `secret` (RT_COMM_SECRET_BYTES; NULL: none) in `s`,
 * which a hold must match. */
void rt_session_set_secret(rt_train_session *s, const uint8_t *secret);

/* Whether the master's hold on `s` was parked and its caller has gone.
 * Under train_lock. */
bool rt_session_hold_gone(const rt_train_session *s);

/* Answers the session's hold, if any: OK (the session ended), or `err`
 * with `why`. Takes it off `s`, which must be off the worker or under
 * train_lock. */
void rt_session_end_hold(rt_train_session *s, int err, const char *why);

/* Frees the session's collectives, then its trainer (ops a failed step
 * left running use the trainer's reduction buffer until they are gone). */
void rt_session_free(rt_train_session *s);

/* A begin's claim on the worker for session `id`, begun by `submitter`
 * (escaped): waits for a call whose caller hung up to end, refuses (the
 * call failed with the reason) while another submitter's session lives,
 * and otherwise installs a new session, busy with this call, whose
 * predecessor comes back in *old for the caller to free. The session has
 * the run's `secret` (RT_COMM_SECRET_BYTES; NULL: none), which the
 * master's hold must carry, from the moment it is installed. */
int rt_session_claim(ferry_ctx_t *ctx, uint64_t id, const char *submitter,
                     uint32_t idle_ms, const uint8_t *secret, rt_train_session **out,
                     rt_train_session **old);
/* The end of the begin that claimed `s` with outcome `rc`: not busy any
 * more, and on failure removed from the worker and freed. */
void rt_session_started(ferry_ctx_t *ctx, rt_train_session *s, int rc);

/* The session `id`, marked busy with this call; NULL with the call failed
 * (*rc) when there is none or it is busy. */
rt_train_session *rt_session_take(ferry_ctx_t *ctx, uint64_t id, int *rc);
/* Ends the call's hold; a failed or cancelled call abandons the session. */
void rt_session_give_back(ferry_ctx_t *ctx, rt_train_session *s, bool failed);
/* An end for session `id` while a begin or an epoch holds it: that call is
 * asked to stop and waited for (a few seconds at most), so that the end
 * frees the session instead of being refused as busy. */
void rt_session_stop_holder(rt_worker *w, uint64_t id);
/* Takes session `s` (taken by this call) off the worker. */
void rt_session_detach(rt_worker *w, rt_train_session *s);

/* What a begin or an epoch polls while it waits: its caller gone, or an
 * end for its session. `arg` is an rt_holder_check. */
typedef struct rt_holder_check {
    ferry_ctx_t *ctx;
    rt_train_session *s;
} rt_holder_check;

bool rt_holder_cancelled(void *arg);

#endif

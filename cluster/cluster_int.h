/* cluster — private header shared by the files of this folder (but cli/). */
#ifndef FERRY_CLUSTER_INT_H
#define FERRY_CLUSTER_INT_H

#include <uv.h>

#include "base/base.h"
#include "cluster.h"
#include "proxyworker/proxyworker.h"
#include "runtime/runtime.h"

/* Consecutive missed heartbeat pings that mark a worker dead. */
#define CL_MISSED_PINGS_DEAD 2
/* How long a lost connection is probed for a restarted worker, at most. */
#define CL_DIAG_MAX_MS 5000
/* Pause between two probes of an unreachable worker. */
#define CL_RETRY_MS 100

typedef struct cl_node cl_node;
typedef struct cl_req cl_req;

/* How a request failed, as far as a work queue cares. */
typedef enum {
    CL_OK = 0,
    CL_FAIL_OWN,   /* the request's own failure: the function, the module, a deadline */
    CL_FAIL_LOST,  /* the worker died or stopped answering: the work may go elsewhere */
    CL_FAIL_CRASH, /* the function crashed its worker */
} cl_fail;

typedef enum {
    CL_REQ_PING,
    CL_REQ_LOAD,
    CL_REQ_CALL,
    CL_REQ_STATS,
    CL_REQ_SHUTDOWN
} cl_kind;

typedef void (*cl_req_cb)(cl_req *r);

/* One request to one worker, tracked so that a worker's death can fail it
 * and so that its error text names worker, module and function. */
struct cl_req {
    rpc_call call; /* call.data points back here */
    cluster *cl;
    cl_node *node;
    cl_kind kind;
    const char *module;   /* borrowed, for texts */
    const char *function; /* borrowed, for texts */
    int result;
    cl_fail fail;
    char *err; /* malloc'd text when result != 0 */
    cl_req_cb cb;
    void *data;
    size_t index;
    uint64_t start; /* uv_now() when prepared: a call ends by start + call_timeout_ms */
    bool busy;      /* started, its cb not yet run */
    bool killed;    /* cancelled because its worker was marked dead */
    cl_req *prev, *next; /* the node's list: in flight, or waiting on a diagnosis */
};

/* One worker as the cluster tracks it. */
struct cl_node {
    cluster *cl;
    int rank;
    char *target;
    pw *pw;

    bool dead;
    char *dead_why; /* why it is dead, for the texts of later failures */
    bool shut;      /* asked to shut down */
    cl_req *inflight;

    /* Identity seen when the cluster last looked on purpose (wait_ready,
     * survey, a diagnosis) or, before that, first heard of the worker at
     * all: a change since means a restart. */
    bool known;
    int32_t pid;
    uint64_t crash_id;

    /* Modules loaded in the worker's process `loaded_pid` (0: not known yet), in
     * our view. */
    int32_t loaded_pid;
    char (*loaded)[RT_SHA256_HEX];
    size_t n_loaded, cap_loaded;

    /* Heartbeat. */
    rpc_call hb_call;
    bool hb_busy;
    int missed;

    /* Crash diagnosis after a lost connection. */
    bool diag;
    bool diag_busy; /* diag_call in flight */
    rpc_call diag_call;
    uv_timer_t diag_timer;
    uint64_t diag_since;    /* uv_now() ms */
    uint64_t diag_deadline; /* uv_now() ms; no later than any waiter's own deadline */
    bool diag_cut;          /* the deadline is a waiting call's */
    char *diag_cause;       /* the rpc text of the first lost call */
    cl_req *diag_waiters;
};

/* A module's bytes, kept for re-shipping to a worker that restarted. */
typedef struct cl_stored {
    char sha256[RT_SHA256_HEX];
    char name[256];
    void *bytes;
    size_t len;
    struct cl_stored *next;
} cl_stored;

typedef struct cl_tasklog cl_tasklog;
typedef struct cl_watch cl_watch;

struct cluster {
    uv_loop_t loop;
    rpc_client *client;
    cl_node *nodes; /* room for cap: a node's handles never move */
    size_t n, cap;
    char *token;
    int64_t call_timeout_ms, ping_timeout_ms, heartbeat_ms;
    size_t max_payload;

    uv_timer_t hb_timer;
    uv_timer_t wait_timer; /* cl_run_for's */
    uv_timer_t gather_timer; /* cluster_call_first's, after a failure */
    bool wait_fired;
    int run_depth;
    bool closing;
    uint64_t nonce;

    char *err;
    cl_stored *modules;
    cluster_worker *survey;
    size_t n_survey;     /* its entries: the cluster may have grown since */
    cl_tasklog *tasklog; /* tasklog.c's; NULL: task log lines not shown */
    cl_watch *watch;     /* watch.c's; NULL: nobody watches */
};

/* ---- core.c: texts and requests; calls nothing else here ------------------ */

/* Replaces the cluster's error text. */
void cl_set_error(cluster *cl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void cl_set_error_text(cluster *cl, char *owned);
/* Appends printf-style text to the malloc'd string *s (NULL: empty). */
void cl_append(char **s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepares `r` for a request of `kind` to `node`; `cb` runs once it ended
 * (after a diagnosis, when one is needed). */
void cl_req_prepare(cl_req *r, cluster *cl, cl_node *node, cl_kind kind,
                    const char *module, const char *function, cl_req_cb cb, void *data);
/* After the pw_* start: links the request in flight, or, when the start
 * failed with `start_rc`, completes it at once (cb runs before this
 * returns) with a text naming the worker. */
void cl_req_started(cl_req *r, int start_rc);
/* Takes `r` off its node's list of requests in flight: its rpc ended. */
void cl_req_unlink(cl_node *node, cl_req *r);
/* Ends `r` with `result`/`fail` and the text (taken) and runs its cb. */
void cl_req_finish(cl_req *r, int result, cl_fail fail, char *err);
/* Frees the reply and error text; the request may be prepared again. */
void cl_req_fini(cl_req *r);
/* "worker R (ADDR): module M function F" (or what the request was) */
char *cl_req_label(const cl_req *r);
/* Ends the prepared `r` at once (cb runs before this returns): its node is
 * marked dead. */
void cl_req_down(cl_req *r);

/* Starts the pw_* request for the prepared `r`, with cl_req_rpc_done;
 * returns the start's result. */
typedef int (*cl_send_fn)(cl_req *r, void *ctx);

/* The callback of requests only waited for: counts down the size_t at
 * r->data. Their results are looked at once all ended. */
void cl_count_done(cl_req *r);
/* Prepares reqs[rank] as a request of `kind` to each node where which[rank]
 * (NULL: every node), counted in *pending (cl_count_done), and sends it. */
void cl_fanout_start(cluster *cl, cl_req *reqs, const bool *which, cl_kind kind,
                     cl_send_fn send, void *ctx, size_t *pending);
/* The first failure among reqs[0..n) in order, but those where skip[i]:
 * moves its text into the cluster's error and returns its result; 0 when
 * none failed. */
int cl_first_error(cluster *cl, cl_req *reqs, size_t n, const bool *skip);
/* cl_req_fini on each of reqs[0..n), then frees the array (NULL: nothing). */
void cl_reqs_free(cl_req *reqs, size_t n);

/* ---- node.c: a worker's state; builds on core ------------------------------ */

/* Marks `node` dead with `why` (taken) and cancels its requests in flight. */
void cl_node_kill(cluster *cl, cl_node *node, char *why);
/* Notes a ping reply: revives the node, forgets its modules if its process
 * changed; with `baseline`, or when the node had no reference yet,
 * remembers pid and crash id as the reference. */
void cl_node_seen(cluster *cl, cl_node *node, const proto_ping_reply *rep, bool baseline);
/* cl_node_seen with baseline for the reply of the ping `r`, when it
 * succeeded; returns whether it did. */
bool cl_ping_seen(cl_req *r);
bool cl_node_has(const cl_node *node, const char *sha256);
void cl_node_add(cl_node *node, const char *sha256);
void cl_node_forget_modules(cl_node *node);

/* ---- health.c: heartbeat, ends, diagnosis; builds on core, node ------------ */

void cl_health_init(cluster *cl);
/* The timer of node i, once it exists. */
void cl_health_init_node(cluster *cl, size_t i);
void cl_health_close(cluster *cl);
void cl_heartbeat_start(cluster *cl);
void cl_heartbeat_stop(cluster *cl);
/* The rpc callback every request uses: judges how it ended (a lost Call
 * waits for a diagnosis first) and finishes it. */
void cl_req_rpc_done(rpc_call *call);
/* A Call lost its connection: holds `r` until the node is known to be back
 * (restarted, with or without a crash record) or gone. */
void cl_diag_enqueue(cluster *cl, cl_node *node, cl_req *r);
/* A cl_send_fn: Ping, waiting *(int64_t *)timeout_ms. */
int cl_send_ping(cl_req *r, void *timeout_ms);

/* ---- run.c: the loop from blocking code; builds on core, health ------------ */

/* Runs the loop until *pending reaches 0, with the heartbeat going. */
void cl_run(cluster *cl, const size_t *pending);
/* Runs the loop until `ms` passed (heartbeat going) or *stop became true. */
void cl_run_for(cluster *cl, int64_t ms, const bool *stop);
/* cl_fanout_start, then runs the loop until all those requests ended. */
void cl_fanout(cluster *cl, cl_req *reqs, const bool *which, cl_kind kind,
               cl_send_fn send, void *ctx);

/* ---- probe.c: builds on all of the above ----------------------------------- */

/* Pings the dead nodes among `which` (NULL: all) once; revives those that
 * answer. Blocking. */
void cl_probe_dead(cluster *cl, const bool *which);

/* ---- modules.c, admin.c: what cluster.c frees ------------------------------ */

/* Loads `m` on each node in `which` (NULL: all) that does not have it in our
 * view. Returns 0 or the first failure in rank order (text set). */
int cl_ensure_loaded(cluster *cl, const cluster_module *m, const bool *which);
void cl_modules_free(cluster *cl);
void cl_survey_free(cluster *cl);

/* ---- tasklog.c: what tasks logged, shown as their replies arrive ------------ */

/* The worker's count of lines it did not keep starts with this (see
 * proto/ferry.proto's CallReply.log_lines). */
#define CL_TASKLOG_DROPPED '\x1f'

/* Shows the log lines of a Call, rate-limited per rank: its reply's, or
 * those a failed one sent with its error (rpc_call.detail). */
void cl_tasklog_show(cluster *cl, const cl_node *node, const rpc_call *call);
void cl_tasklog_free(cluster *cl);

/* ---- watch.c: a watcher's timer and Stats requests -------------------------- */

/* Closes the timer (before the loop's last run); frees after it. */
void cl_watch_close(cluster *cl);
void cl_watch_free(cluster *cl);

#endif

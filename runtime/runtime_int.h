/* runtime — private header shared by the files of this folder. */
#ifndef FERRY_RUNTIME_INT_H
#define FERRY_RUNTIME_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "proto/proto.h"
#include "runtime.h"
#include "runtime/collective/collective.h"
#include "runtime/ps/ps.h"

/* ---- module cache (modcache.c) -------------------------------------------- */

typedef struct rt_modcache rt_modcache;

/* Opens the cache in `dir` (created, mode 0700). Returns 0 or -errno. */
int rt_modcache_create(const char *dir, rt_modcache **out);

/* dlcloses every module and frees. No call may be running. NULL: no-op. */
void rt_modcache_destroy(rt_modcache *c);

/* Makes the module with hex digest `sha` available. With `len` > 0, `bytes`
 * must hash to `sha` (FERRY_ECORRUPT otherwise); with no bytes the module
 * must be loaded already or lie verified in the cache directory from an
 * earlier run (FERRY_ENOENT otherwise). A module that fails to load is
 * removed and not kept (FERRY_EINVAL). On success *out lives until
 * rt_modcache_destroy() and *cached tells whether it was there before.
 * `err` names the module. Thread-safe. */
int rt_modcache_load(rt_modcache *c, const char *sha, const char *name, const void *bytes,
                     size_t len, const rt_module **out, bool *cached, char *err,
                     size_t errlen);

/* The loaded module with digest `sha`, or NULL; lives until
 * rt_modcache_destroy(). Thread-safe. */
const rt_module *rt_modcache_find(rt_modcache *c, const char *sha);

/* How many modules are loaded. Thread-safe. */
size_t rt_modcache_count(rt_modcache *c);

/* ---- the worker (worker.c) ------------------------------------------------ */

/* Counters of Call requests; updated by call.c, read by Stats. */
typedef struct rt_stats {
    atomic_uint_fast64_t calls_served; /* ended, failed ones included */
    atomic_uint_fast64_t calls_failed;
    atomic_uint in_flight;
    /* Training on this rank, for the metrics endpoint: steps and samples
     * of the epochs done, and the last epoch's samples a second (a
     * double's bits). */
    atomic_uint_fast64_t train_steps, train_samples, train_epochs;
    atomic_uint_fast64_t train_rate_bits;
} rt_stats;

/* Built-in function sets a worker may have (rt_call_register). */
#define RT_BUILTIN_SETS 4

/* Longest module name kept, escaped (base_escape), with its cut mark. */
#define RT_MODULE_NAME_MAX 160

/* Methods that need the token (rpc checks it before reading the request). */
/* LoadModule, Call, Stats, Shutdown, ReduceChunk, Push, Pull, TrainHold,
 * Rendezvous, PutData */
#define RT_GUARDED_METHODS 10

/* datacache.c: the data files shipped to this worker. */
typedef struct rt_datacache rt_datacache;
#define RT_DATACACHE_DEFAULT_CAP (10ull << 30)
/* How a training names a shipped file: "ferry-data:<sha256>/<name>". */
#define RT_DATA_REF_PREFIX PROTO_DATA_REF_PREFIX
/* A shipped directory is the file of this name listing its files, one
 * "<sha256> <name>" a line: its reference resolves to a directory. */
#define RT_DATA_DIR_LISTING ".ferry-dir"

/* rendezvous.c: the world rank 0 of a launcher's workers keeps. */
typedef struct rt_rendezvous rt_rendezvous;

struct rt_worker {
    /* Drains the server's queue and the collective sessions' calls: one
     * thread for both (rpc.h). */
    rpc_poller *poller;
    rpc_server *srv;
    rt_modcache *cache;
    rt_identity id;
    rt_stats stats;
    char *token; /* rpc checks callers' (rpc_server_opts.token); peers get it */
    size_t token_len;
    int stop_pipe[2]; /* rt_worker_stop() writes a byte; rt_worker_wait() reads */
    atomic_bool stopped;
    atomic_llong shutdown_grace_ms; /* from a Shutdown call; -1: none came */
    ferry_device_t *device;         /* what ctx->device points at */
    rt_hub *hub;                    /* collective sessions, fed by ReduceChunk */
    rt_ps_store *ps;                /* parameter-server shards, fed by Push and Pull */
    /* The one training session this worker runs (train/session.c), NULL when
     * none; train_lock guards the pointer, not the session's work. */
    pthread_mutex_t train_lock;
    struct rt_train_session *session;
    bool train_closed; /* shutting down: holds refused; under train_lock */
    /* Built-in function sets Call consults (rt_call_register). */
    const struct rt_builtins *builtins[RT_BUILTIN_SETS];
    int n_builtins;
    rt_rendezvous *rendezvous; /* rank 0 of a launcher's world; else NULL */
    rt_datacache *datacache;   /* <state_dir>/data */
};

/* rt_worker_wait() that also returns once `fd` is readable (-1: none), for
 * `ferry worker`'s signal pipe. Returns whether `fd` woke it (false: the
 * worker was stopped, or poll failed). The byte in `fd` is left unread. */
bool rt_worker_wait_or(rt_worker *w, int fd);

/* The method handlers below take the rt_worker as `data`; rpc checks the
 * token before they run. */
void rt_call_handler(rpc_srv_call *sc, rpc_msg *req, void *data);

/* Answers LoadModule for module `sha` (hex, as sent) named `name`, escaped
 * already ("" for a module sent without one); its bytes are `req`'s
 * payload, if any. worker.c decodes the request and calls this. */
void rt_load_module(rpc_srv_call *sc, rt_worker *w, const char *sha, const char *name,
                    const rpc_msg *req);

/* Replies with the head `rc` says was packed into `head` (and frees it), or
 * fails the call with `rc` if packing failed: "<method>: out of memory". */
static inline void rt_reply_packed(rpc_srv_call *sc, int rc, proto_bytes *head,
                                   const char *method)
{
    if (rc) {
        rpc_srv_fail(sc, rc, "%s: out of memory", method);
        return;
    }
    rpc_msg_out reply = {.head_bytes = head->data, .head_len = head->len};
    rpc_srv_reply(sc, &reply);
    proto_bytes_fini(head);
}

/* ---- rendezvous.c ------------------------------------------------------------ */
/* A world of `world_size` ranks whose rank 0 is reached at `self`
 * (host:port, as the launcher says). Returns 0 or FERRY_ENOMEM. */
int rt_rendezvous_create(int world_size, const char *self, rt_rendezvous **out);
void rt_rendezvous_free(rt_rendezvous *rv); /* NULL: no-op */
/* Rendezvous's handler; `data` is the rt_worker. Inline: never blocks. */
void rt_rendezvous_handler(rpc_srv_call *sc, rpc_msg *req, void *data);

/* ---- datacache.c --------------------------------------------------------------- */
/* The cache in `dir` (created), holding at most `cap` bytes (0: the
 * default), the least recently used going first. */
int rt_datacache_create(const char *dir, uint64_t cap, rt_datacache **out);
void rt_datacache_destroy(rt_datacache *c); /* NULL: no-op */
/* PutData's handler; `data` is the rt_worker. On the pool: it writes. */
void rt_put_data_handler(rpc_srv_call *sc, rpc_msg *req, void *data);
/* The path in the cache of `ref` ("ferry-data:<sha256>/<name>"), marked
 * used; FERRY_ENOENT, with `why`, when the cache does not hold it. */
int rt_datacache_resolve(rt_datacache *c, const char *ref, char *out, size_t len,
                         char *why, size_t whylen);

/* ---- built-in functions ---------------------------------------------------- */
/* A set of functions the runtime itself provides to the modules it serves,
 * which Call consults when a module has no function of the name: the
 * trainers' "ferry.train.*" (train/train_fn.c) for a module with a model. */
typedef struct rt_builtins {
    bool (*serves)(const rt_module *m); /* whether module m gets them; NULL: all */
    const ferry_function_t *functions;
    size_t n;
} rt_builtins;

extern const rt_builtins rt_train_builtins;

/* Adds `set` to the worker's built-in functions; rt_worker_create does, before
 * it serves. `set` must outlive the worker. Returns 0, or FERRY_ENOSPC when
 * RT_BUILTIN_SETS are registered already. */
int rt_call_register(rt_worker *w, const rt_builtins *set);
/* The worker and the module of the call a built-in function runs in. */
rt_worker *rt_call_worker(ferry_ctx_t *ctx);
const rt_module *rt_call_module(ferry_ctx_t *ctx);
/* The caller's address, "ipv4:127.0.0.1:41234"; valid during the call. */
const char *rt_call_peer(ferry_ctx_t *ctx);
/* Ends the worker's training session, if any. No call may be running. */
void rt_train_session_free(rt_worker *w);
/* TrainHold (train/hold.c): a master's hold on its session, parked until
 * the session ends; the rt_worker is its data. */
void rt_train_hold_handler(rpc_srv_call *sc, rpc_msg *req, void *data);
/* Answers the parked hold and refuses new ones: the server is about to
 * wait for its calls. */
void rt_train_holds_close(rt_worker *w);

/* ---- tasklog.c: a call's log lines, for its reply ----------------------------- */
#define RT_TASKLOG_LINES    200       /* kept for one reply; the rest counted */
#define RT_TASKLOG_BYTES    (64 << 10)
#define RT_TASKLOG_LINE_MAX 1024      /* a longer line is cut */
#define RT_TASKLOG_DROPPED  '\x1f'    /* starts the count that ends a list */
#define RT_TASKLOG_TAIL     64        /* the last lines past the bound, for a failure */

typedef struct rt_tasklog {
    pthread_mutex_t mu; /* a task may log from threads of its own */
    char **lines;
    size_t n, cap, bytes;
    uint64_t dropped; /* neither kept nor in the tail */
    /* The latest lines past the bound, a ring: a failed call sends the
     * lines just before its failure, which a reply's bound would cut. */
    char *tail[RT_TASKLOG_TAIL];
    size_t tail_n, tail_at; /* tail_at: where the oldest lies once full */
} rt_tasklog;

void rt_tasklog_init(rt_tasklog *l);
/* Keeps one line (copied, made safe for a terminal), or counts it. */
void rt_tasklog_add(rt_tasklog *l, const char *line);
/* The lines kept, then the count of those not kept if any: the list to
 * send, owned by `l`. No add may follow. */
size_t rt_tasklog_list(rt_tasklog *l, char ***lines);
/* The last lines that fit in `max` bytes, packed as a CallReply head, the
 * lines left out counted as rt_tasklog_list() counts them: what a failed
 * call sends with its error. out->len 0 when nothing was logged. No add may
 * follow. Returns 0 or FERRY_ENOMEM. */
int rt_tasklog_pack_tail(rt_tasklog *l, size_t max, proto_bytes *out);
void rt_tasklog_fini(rt_tasklog *l);
/* Makes `l` the log of the call this thread runs (NULL: none), for
 * rt_tasklog_here(), which adds a line to it, if any. */
void rt_tasklog_bind(rt_tasklog *l);
void rt_tasklog_here(const char *line);

/* ---- crash_frames.c: what crashed, named (not async-signal-safe) ---------- */
/* Loads what backtrace() needs, outside any signal handler. */
void rt_crash_frames_prepare(void);
/* From a fatal signal's handler (its ucontext), after the plain record:
 * " in the model's loss_grad; frames: f+0x1c (m.so), ..." into out, the
 * task module's frames shown as `shown`. Returns the length; 0 if none. */
size_t rt_crash_frames(const void *ucontext, const char *shown, char *out, size_t len);

/* ---- guard.c: memory whose end faults ----------------------------------- */
/* `bytes` (64-byte aligned) followed by a page no one may touch; a fault
 * there is recorded as a write past the end of `what` (a string that
 * outlives the region). NULL when it cannot. Free with rt_guarded_free. */
void *rt_guarded_alloc(size_t bytes, const char *what);
void rt_guarded_free(void *p);
/* crash.c: the guard pages it names when a fault lands in one. */
void rt_crash_guard(const void *page, size_t len, const char *what, size_t bytes);
void rt_crash_unguard(const void *page);

#endif

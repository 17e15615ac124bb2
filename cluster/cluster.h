/* cluster — a set of ProxyWorkers driven from plain blocking code.
 *
 * A cluster owns a libuv loop and one rpc_client; every blocking function
 * below starts its requests and runs that loop until they end (asyncio's
 * gather), so it must be called from one thread, never from a callback.
 * While the loop runs, a heartbeat pings every worker; a worker that dies or
 * stops answering fails the calls waiting on it with an error that names it
 * by rank and address, never a hang.
 *
 * Errors: every int-returning call returns 0 or a FERRY_E* code, and keeps a
 * text naming worker, module and function for cluster_error().
 *
 * Where things are:
 *   cluster.c     create/destroy, membership, errors, wait_ready
 *   health.c      heartbeat timer, dead-worker detection, crash diagnosis
 *   modules.c     content-addressed shipping (ask first, send if missing)
 *   calls.c       call, call_all (scatter/gather), call_any (work queue), barrier
 *   admin.c       stats, shutdown of every worker
 *   driver.c      the ferry_driver_ops_t a task's driver gets
 *   supervisor.c  `ferry start`'s daemon: spawns, restarts, stops local workers
 *   cli/          the `ferry` command */
#ifndef FERRY_CLUSTER_H
#define FERRY_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <ferry/task.h>

#include "proto/proto.h"

typedef struct cluster cluster;

typedef struct cluster_opts {
    const char *token;       /* the cluster token */
    int64_t call_timeout_ms; /* 0: 60000 */
    int64_t ping_timeout_ms; /* 0: 1000 */
    int64_t heartbeat_ms;    /* 0: 1000; < 0: no heartbeat */
    size_t max_payload;      /* 0: RPC_DEFAULT_MAX_PAYLOAD */
    size_t max_workers;      /* room for cluster_add_worker(); 0: n, no more */
} cluster_opts;

/* Makes a cluster of `n` workers, rank i at targets[i]. Connects lazily;
 * call cluster_wait_ready() to know they answer. Calls grpc_init(). */
int cluster_create(const char *const *targets, size_t n, const cluster_opts *opts,
                   cluster **out);

/* Cancels what is in flight, closes the loop and frees; grpc_shutdown().
 * NULL: no-op. */
void cluster_destroy(cluster *cl);

size_t cluster_size(const cluster *cl);
/* Adds a worker at `target` as rank cluster_size(): a worker that joined
 * the running cluster. FERRY_ERANGE past opts.max_workers (text set). */
int cluster_add_worker(cluster *cl, const char *target);

/* The deadline of calls started from now on, ms > 0. A training epoch may run
 * far longer than the default minute; the heartbeat still finds a worker
 * that dies or hangs within about a second. */
void cluster_set_call_timeout(cluster *cl, int64_t ms);
const char *cluster_target(const cluster *cl, int rank);

/* The text of the last failure ("worker 2 (127.0.0.1:7102): module
 * crash.so function segv: worker crashed: signal 11 (SIGSEGV); restarted by
 * its supervisor"); "" if none. Valid until the next call. */
const char *cluster_error(const cluster *cl);

/* Pings every worker until all answer or `timeout_ms` passes. Returns 0 or
 * FERRY_ETIMEDOUT, naming the workers that did not answer. */
int cluster_wait_ready(cluster *cl, int64_t timeout_ms);
/* The same for the workers of rank `from` on (those just added). */
int cluster_wait_ready_from(cluster *cl, size_t from, int64_t timeout_ms);

/* What a worker said about itself. */
typedef struct cluster_worker {
    int rank;
    const char *target;
    bool alive;               /* answered the last ping */
    proto_ping_reply *ping;   /* NULL when it did not answer; owned by the cluster */
    proto_stats_reply *stats; /* NULL when not asked or it did not answer */
} cluster_worker;

/* Pings (and, with `stats`, asks Stats of) every worker at once. `out` has
 * cluster_size() entries, valid until the next call. Returns 0 when all
 * answered, else the first failure (the others are still filled). */
int cluster_survey(cluster *cl, bool stats, const cluster_worker **out);

/* A module shipped to every worker. */
typedef struct cluster_module {
    char sha256[65];
    char name[256];
    char *functions; /* comma-separated, as the workers reported; malloc'd */
    size_t bytes;
    int shipped; /* workers that needed the bytes (the others had them) */
    /* When cluster_load_module began and ended on this process's monotonic
     * clock (uv_hrtime), for a run's timeline. */
    uint64_t load_start_ns, load_end_ns;
} cluster_module;

/* Ships `len` bytes of module `name` to every worker: first asks each
 * whether it has the SHA-256 already, then sends the bytes to those that do
 * not. Every worker loads it. Returns 0, or the first failure (the worker's
 * text, e.g. "not an ELF shared object"). */
int cluster_load_module(cluster *cl, const char *name, const void *bytes, size_t len,
                        cluster_module *out);
/* cluster_load_module() on the workers in which[] only (NULL: all): a
 * sync run with --min-workers begins without one that does not answer;
 * the others get the module when they are first called. */
int cluster_load_module_on(cluster *cl, const char *name, const void *bytes, size_t len,
                           const bool *which, cluster_module *out);

/* Frees what a cluster_module holds. */
void cluster_module_fini(cluster_module *m);

/* Calls `function` of module `m` on worker `rank`; the result in *out, to
 * free with cluster_free_bytes(). */
int cluster_call(cluster *cl, const cluster_module *m, int rank, const char *function,
                 const ferry_bytes_t *in, ferry_bytes_t *out);

/* Calls `function` on every worker at once, in[r] to rank r (in NULL: no
 * argument), results gathered in out[r] (cluster_size() entries). The first
 * failure cancels the calls still running (a dead worker ends the gather at
 * once, not after the slowest call); returns, once every call has ended, the
 * first failure in rank order that is not such a cancellation. On failure
 * every out[r] is left empty. */
int cluster_call_all(cluster *cl, const cluster_module *m, const char *function,
                     const ferry_bytes_t *in, ferry_bytes_t *out);

/* cluster_call_all() on ranks 0..n-1 only (in and out have n entries):
 * a training session on the first n workers. */
int cluster_call_first(cluster *cl, const cluster_module *m, const char *function,
                       size_t n, const ferry_bytes_t *in, ferry_bytes_t *out);

/* cluster_call_first() on the workers ranks[0..n) (NULL: 0..n-1): a
 * training session that goes on without a worker lost for good. */
int cluster_call_ranks(cluster *cl, const cluster_module *m, const char *function,
                       size_t n, const int *ranks, const ferry_bytes_t *in,
                       ferry_bytes_t *out);

/* What cluster_call_each() does when one of its calls fails: calls
 * `function` on every other rank whose call is still running, with the
 * argument arg_for(failed_rank) builds (malloc'ed, freed here). */
typedef struct cluster_each_follow {
    const char *function;
    int (*arg_for)(int failed_rank, ferry_bytes_t *in, void *arg);
    void *arg;
} cluster_each_follow;

/* Calls `function` on each rank r < n where which[r] (NULL: all), in[r] to
 * rank r, and waits for all: a failure cancels nothing. rc[r] is each
 * call's result, err[r] its text (malloc'ed; NULL on success), out[r] its
 * result. `follow` (NULL: none) runs as each failure arrives. Returns 0,
 * or FERRY_EINVAL / FERRY_ENOMEM before anything started. */
int cluster_call_each(cluster *cl, const cluster_module *m, const char *function, size_t n,
                      const bool *which, const ferry_bytes_t *in, ferry_bytes_t *out,
                      int *rc, char **err, const cluster_each_follow *follow);

/* A work queue: runs `n` calls of `function`, in[i] -> out[i], keeping up to
 * `depth` calls in flight on each live worker (0: 16). A worker that dies is
 * dropped and its work handed to others; the first call failure that is the
 * function's own stops the queue. On failure every out[i] is left empty. */
int cluster_call_any(cluster *cl, const cluster_module *m, const char *function, size_t n,
                     const ferry_bytes_t *in, ferry_bytes_t *out, int depth);

/* Waits until every call of this cluster has ended and every worker answers
 * a ping. */
int cluster_barrier(cluster *cl);

/* A call left open on one worker while the blocking functions here come
 * and go (a training run's hold on each of its workers): started at once,
 * it progresses, and may end, only while one of them runs the loop. It
 * travels on a channel of its own, with the token and no deadline, and is
 * not failed by the heartbeat: its own end says what became of it. */
typedef struct cluster_open cluster_open;

/* Starts `method` on worker `rank` with the packed request head
 * `head`/`len` (copied by the start). Returns 0 with *out, or FERRY_E*
 * with nothing started. */
int cluster_open_call(cluster *cl, int rank, const char *method, const void *head,
                      size_t len, cluster_open **out);
/* Whether `c` has ended; if so its result (0 or FERRY_E*) in *result
 * (may be NULL). A NULL call counts as ended with FERRY_EINVAL. */
bool cluster_open_ended(const cluster_open *c, int *result);
/* Runs the loop (the heartbeat going) until done(arg) holds, checked as
 * each event is handled, or `ms` passed. */
void cluster_run_until(cluster *cl, int64_t ms, bool (*done)(void *arg), void *arg);
/* Cancels `c` unless it has ended, runs the loop until it has, and frees
 * it. Returns its result (FERRY_ECANCELED when it was cancelled here).
 * Every open call is closed before cluster_destroy. NULL: 0. */
int cluster_close_call(cluster_open *c);

/* Asks worker 0, rank 0 of a launcher's world, who has joined its
 * rendezvous: *out (proto_free) holds rank r's address at r, "" for a
 * rank not there yet. FERRY_EBUSY: the worker keeps no world. */
int cluster_rendezvous_ask(cluster *cl, proto_rendezvous_reply **out);

/* Sends the `size` bytes of file `fd`, named `name` (a base name: the
 * workers keep it, and their readers know a format by it), to every worker
 * that does not hold them already, in chunks under the message limit.
 * *sent_to says to how many; `ref` gets what a training names the file by
 * on the workers ("ferry-data:<sha256>/<name>"). Returns 0 or the first
 * failure (cluster_error says which worker and why). */
int cluster_ship_fd(cluster *cl, int fd, uint64_t size, const char *name, char *ref,
                    size_t reflen, size_t *sent_to);

/* Frees bytes returned by the calls above; zeroes *b. */
void cluster_free_bytes(ferry_bytes_t *b);

/* Asks every worker to exit, giving calls `grace_ms`. Returns 0 when all
 * acknowledged (a worker already gone counts as stopped). */
int cluster_shutdown_all(cluster *cl, uint32_t grace_ms);

/* Runs the driver of `task` (loaded on the master from the same bytes as
 * module `m`) with `argc`/`argv`. Returns the driver's result. */
int cluster_run_driver(cluster *cl, const cluster_module *m, const ferry_task_t *task,
                       int argc, char **argv, bool json);

/* Shows what tasks log on the workers (ctx->ops->log in a function) on `to`
 * as each call's reply arrives, each line prefixed "[rank R] ", at most a
 * burst of 50 lines and then 20 a second per worker, with a count of those
 * dropped. NULL (the default) shows none. */
void cluster_show_task_logs(cluster *cl, FILE *to);

/* A watcher of long calls (the stall inspector): fn(data) runs on the loop
 * every `period_ms` while a blocking function of this cluster waits, and
 * must not block; each reply to cluster_stats_start() goes to
 * stats_cb(data, rank, reply or NULL, NULL or why not), on the loop too.
 * fn NULL or period 0 stops it: replies still on their way are dropped. */
typedef void (*cluster_watch_fn)(void *data);
typedef void (*cluster_stats_cb)(void *data, int rank, const proto_stats_reply *rep,
                                 const char *err);
int cluster_watch(cluster *cl, int64_t period_ms, cluster_watch_fn fn,
                  cluster_stats_cb stats_cb, void *data);
/* Asks worker `rank` for its Stats without waiting (from the watcher's fn).
 * Returns 0 (stats_cb will run), FERRY_EBUSY while its last is on its way,
 * or FERRY_E* with nothing started. */
int cluster_stats_start(cluster *cl, int rank, int64_t timeout_ms);
/* The process id worker `rank` gave in its last ping; 0: none seen. */
int32_t cluster_worker_pid(const cluster *cl, int rank);
/* Ends every call in flight (from the watcher's fn): the workers where
 * down[r] are marked dead with `why` (their calls, and later ones, fail
 * with it), the others' calls are cancelled. */
void cluster_abort_calls(cluster *cl, const bool *down, const char *why);

#endif

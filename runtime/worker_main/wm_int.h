/* runtime/worker_main — private header shared by the files of the worker's
 * program:
 *   main.c      rt_worker_main: where its state and token are, start, serve, stop
 *   options.c   the command line and --help
 *   from_env.c  --from-env: the rank from the launcher that started the worker
 *   signals.c   SIGTERM and SIGINT through a pipe that outlives the worker
 *   tls.c       TLS on, or the warning for plain text off loopback
 *   process.c   resource limits and CPU binding, set before any thread starts
 *   watchdog.c  the listener's and the executor's watch, and the stop's deadline
 *   join.c      a rank > 0 started by an engine joining rank 0's rendezvous
 *   nap.c       a thread's wait that a stop cuts short */
#ifndef FERRY_RUNTIME_WM_INT_H
#define FERRY_RUNTIME_WM_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "runtime/runtime_int.h"
#include "worker_main.h"

enum {
    EXIT_OK = RT_EXIT_OK,
    EXIT_FAIL = RT_EXIT_FAIL,
    EXIT_USAGE = RT_EXIT_USAGE,
    EXIT_PORT_IN_USE = RT_EXIT_PORT_IN_USE,
    EXIT_DEAF = RT_EXIT_DEAF,
    EXIT_WEDGED = RT_EXIT_WEDGED,
};

/* A call cancelled this long ago that still runs wedges the worker. */
#define WEDGE_GRACE_MS 60000

/* SIGTERM and SIGINT give calls in flight this long, as a Shutdown with the
 * default grace would. */
#define STOP_GRACE_MS 5000

/* A rank past 0 started by an engine waits this long for rank 0 to answer
 * its join: engines start a world's tasks within minutes of each other. */
#define JOIN_TIMEOUT_MS (10 * 60 * 1000)

/* ---- options.c ---- */

typedef struct wm_options {
    const char *listen, *state_dir, *token_file, *port_file, *device, *cpus;
    const char *metrics; /* host:port of the metrics endpoint, or NULL */
    int rank, threads;
    uint32_t restarts;
    long wedge_grace_ms;
    long parent_pid;
    long max_message_bytes;
    long max_module_bytes;
    rpc_tls_files tls; /* all NULL: plain text */
    bool insecure;     /* plain text off loopback, without the warning */
    bool from_env, print;
    /* From --from-env: the launcher's world size (0: none) and where it
     * says rank 0 is ("" when it does not). */
    int world_size;
    char rendezvous[300];
    uint64_t data_cache_bytes; /* 0: the default */
} wm_options;

/* Parses argv into o. Returns -1 to go on, else the exit status (--help,
 * --version, or a usage mistake, printed). */
int wm_parse(int argc, char **argv, wm_options *o);

/* Prints "ferry worker: " fmt (with arg) and the hint to --help; returns
 * EXIT_USAGE. */
int wm_usage_error(const char *fmt, const char *arg);

/* ---- from_env.c ---- */

/* With --from-env, reads the launcher's variables from `envp`, prints the
 * worker's first line (which launcher, what it says) and sets o->rank;
 * with --print, prints that as JSON on stdout instead. Returns -1 to go
 * on, else the exit status (EXIT_OK after --print, EXIT_FAIL when the
 * environment does not say, or contradicts itself). */
int wm_from_env(wm_options *o, char *const *envp);

/* ---- tls.c ---- */

/* Turns TLS on for every connection (rpc_tls_use), or, listening on `host`
 * (not loopback) in plain text without --insecure, warns on stderr.
 * Returns -1 to go on, else the exit status (a file it cannot use: said). */
int wm_tls(const wm_options *o, const char *host);

/* ---- signals.c ---- */

/* Installs the handlers, then unblocks SIGTERM and SIGINT: a launcher may
 * block them across fork and exec so that none lands (and kills) before
 * the handlers are in place; one that came meanwhile is delivered now.
 * Returns 0 or -errno. */
int wm_install_stop_signals(void);

/* The read end of the pipe the handlers write to: readable once a stop
 * signal came. */
int wm_stop_signal_fd(void);

/* ---- process.c ---- */

/* Every connection costs a descriptor: take all the kernel allows. */
void wm_raise_nofile(void);

/* Binds the process to the CPUs of `list` (checked by wm_parse). */
void wm_bind_cpus(const char *list);

/* ---- watchdog.c ---- */

/* Probes the listener (rpc_server_probe) and sheds or judges the executor's
 * stuck calls until the worker stops; after repeated failed probes it says
 * so and stops the worker (then `deaf`); a call stuck past the grace exits
 * the process with EXIT_WEDGED. */
typedef struct wm_watch {
    rt_worker *w;
    long wedge_grace_ms;
    pthread_t thread;
    bool started;
    atomic_bool quit, deaf;
} wm_watch;

/* Starts the watch thread on w; without one the worker still serves. */
void wm_watch_start(wm_watch *wt, rt_worker *w, long wedge_grace_ms);
/* Stops and joins it. Returns whether it found the listener deaf. */
bool wm_watch_stop(wm_watch *wt);

/* Exits the process (EXIT_FAIL) if it has not ended `grace_ms` plus a
 * margin from now: the last word against a function that ignores
 * cancellation. */
void wm_stop_deadline(long long grace_ms);

/* ---- join.c ---- */

/* Rank `rank` of a launcher's world joining rank 0's rendezvous. */
typedef struct wm_join {
    rt_worker *w;           /* stopped when the join fails */
    const char *who;        /* "ferry worker rank 2", for its lines */
    const char *rendezvous; /* rank 0's host:port */
    const char *address;    /* where this rank serves: host:port */
    const char *token;
    int rank, world_size;
    int64_t timeout_ms; /* rank 0 not answering this long fails the join */
    pthread_t thread;
    bool started;
    atomic_bool quit, failed;
} wm_join;

/* Joins from a thread of its own, retrying while rank 0 is not there. */
int wm_join_start(wm_join *j);
/* Stops and joins the thread. Returns false when the join failed. */
bool wm_join_stop(wm_join *j);

/* ---- nap.c ---- */

/* Sleeps about `ms` (in slices of 100 ms) unless *quit is set first.
 * Returns false when *quit is set: the caller's thread is to end. */
bool wm_nap(atomic_bool *quit, int ms);

#endif

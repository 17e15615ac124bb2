/* cluster/cli — the `ferry` command.
 *
 * Where things are:
 *   main.c        subcommand dispatch, --help, --version
 *   home.c        FERRY_HOME layout and the running cluster's state
 *   start.c       `ferry start`: token, supervisor, wait until every worker answers
 *   supervisor.c  the daemon `ferry start` leaves behind: spawns local workers,
 *                 restarts crashed ones, holds the cluster lock (with sv_crash.c,
 *                 sv_live.c; supervisor_int.h)
 *   restarts.c    the supervisor's account of a worker's crashes, for status
 *   stopped_by.c  a submit whose cluster was shut down under it says so
 *   logfile.c     logs that rotate at a size
 *   leftovers.c   workers an earlier cluster left running
 *   procs.c       pid and port files, liveness, stopping a supervisor
 *   status.c      `ferry status`
 *   submit.c      `ferry submit`: ship a module, run its driver
 *   modfile.c     reading the module file submit was given, and its size limit
 *   shutdown.c    `ferry shutdown`: stop every worker and the supervisor, clean up
 *
 * FERRY_HOME layout (see home.c):
 *   lock                  flock'ed by the supervisor while the cluster runs
 *   supervisor.pid        the supervisor, written by it first thing
 *   cluster.ini           the running cluster (a config file plus [state])
 *   token                 the cluster token, 0600
 *   logs/                 supervisor.log, worker-<rank>.log and their rotated
 *                         .1 .. .N (kept after shutdown)
 *   workers/<rank>/       a local worker's state: cache/, crash, port, pid,
 *                         stopped (it was asked to stop), restarts
 *   start-error           why the supervisor gave up while starting
 *   shutdown-at           when the last `ferry shutdown` began (kept) */
#ifndef FERRY_CLI_H
#define FERRY_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cluster/cluster.h"
#include "config/config.h"

#define CLI_PATH_MAX 4096
/* A path under FERRY_HOME plus a file name. */
#define CLI_FILE_MAX (CLI_PATH_MAX + 64)

/* Exit statuses shared by every subcommand. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

int cli_start(int argc, char **argv);
int cli_status(int argc, char **argv);
int cli_submit(int argc, char **argv);
int cli_shutdown(int argc, char **argv);

/* ---- training (train.c) ---------------------------------------------------- */

typedef struct cli_train_opts {
    int epochs, batch;
    const char *optimizer; /* "sgd" or "adam" */
    const char *schedule;  /* "constant" or "cosine" */
    double lr, momentum, weight_decay;
    uint64_t seed;
    const char *data_dir; /* NULL: the worker's default */
    const char *precision; /* "fp32" (the default), "tf32" or "bf16" */
    bool json;
    bool classifier; /* the model's kind: reports accuracy */
    /* Where it trains: "single" (worker 0), "sync" (data-parallel over the
     * first `workers`, 0: all), or NULL: sync when the cluster has more
     * than one worker. */
    const char *mode;
    int workers;
    const char *grad_compression;               /* "none", "lz4", "fp16" */
    long chunk_bytes, bucket_bytes, timeout_ms; /* 0: the workers' defaults */
    /* Async mode ("async"): the parameter server's shards, the staleness
     * bound (-1: unbounded), DOWNPOUR's push and pull intervals, the
     * algorithm and EASGD's alpha and tau (0: the workers' defaults). */
    long ps_shards, staleness, push_every, pull_every, tau;
    const char *algo;
    double alpha;
    const char *async_only; /* the first async option given, to refuse it elsewhere */
} cli_train_opts;

/* Trains the model of module `m` (file `module`, task `task`) on worker 0,
 * or in sync mode on the first o->workers workers together:
 * a line before, a progress line an epoch, and a summary (or, with json, one
 * JSON object on stdout and the lines on stderr). Returns 0 or FERRY_E*,
 * the error printed. */
int cli_train(cluster *cl, const cluster_module *m, const char *module, const char *task,
              const cli_train_opts *o);

/* Prints "ferry <cmd>: <message>\n" to stderr. */
void cli_err(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* fn(arg) runs once, before the next cli_err prints: a cause found only
 * once something failed goes before what the failure looked like. */
void cli_err_preface(void (*fn)(void *), void *arg);

/* Parses --json and --help, the options `status` and `submit` share, in
 * argv[0..argc). Returns 0 (optind is then the first operand), -1 after
 * printing `usage` for --help (exit 0), or CLI_USAGE after printing it to
 * stderr for anything else. */
int cli_parse_json_flag(int argc, char **argv, const char *usage, bool *json);

/* ---- module files (modfile.c) ---------------------------------------------- */

/* The file name in `path`: what submit calls a module it was given. */
const char *cli_base_name(const char *path);

/* Reads the module file at path into *out (malloc'd) without blocking on a
 * FIFO. Returns 0, or an error with `err` saying what path is instead
 * ("... is a directory, not a module file"), or, when `conf` is given,
 * that it is over conf->max_module_bytes (found before reading it). */
int cli_read_module(const char *path, const conf_cluster *conf, void **out, size_t *len,
                    char *err, size_t errlen);

/* FERRY_EMSGSIZE, with `err` naming the size and the limit, when a module
 * of len bytes is over conf->max_module_bytes. */
int cli_check_module_size(const char *name, size_t len, const conf_cluster *conf,
                          char *err, size_t errlen);

/* ---- FERRY_HOME ----------------------------------------------------------- */

typedef struct cli_home {
    char dir[CLI_PATH_MAX];
    char state[CLI_PATH_MAX]; /* cluster.ini */
    char token[CLI_PATH_MAX]; /* default token file */
    char logs[CLI_PATH_MAX];
    char workers[CLI_PATH_MAX];
    char start_error[CLI_PATH_MAX];
    char supervisor_pid[CLI_PATH_MAX];
} cli_home;

/* Resolves FERRY_HOME and the paths under it. Prints the error for `cmd`. */
int cli_home_init(cli_home *h, const char *cmd);

/* Removes a cluster's state (the state file, the start error, the
 * supervisor's pid, the directories the supervisor made for its workers),
 * not its token or logs. A directory under workers/ without the
 * supervisor's mark is someone else's (an attached worker keeps its state
 * in workers/PORT under the same FERRY_HOME) and is left alone. */
void cli_home_forget_cluster(const cli_home *h);

/* The file the supervisor leaves in each worker directory it makes: what
 * cli_home_forget_cluster() may remove. */
#define CLI_WORKER_MARK "supervised"

/* A worker's own directory, "<home>/workers/<rank>", and files in it. */
void cli_worker_dir(const cli_home *h, int rank, char *buf, size_t len);
void cli_worker_file(const cli_home *h, int rank, const char *name, char *buf,
                     size_t len);

/* Connects to every worker conf lists (lazily), with its timeouts; with
 * `heartbeat`, pings them while calls run. */
int cli_cluster_connect(const conf_cluster *conf, const char *token, bool heartbeat,
                        cluster **out);

/* The running cluster, as `status`, `submit` and `shutdown` see it. */
typedef struct cli_running {
    conf_cluster conf; /* cluster.ini */
    char token[CONF_TOKEN_LEN + 1];
    cluster *cl; /* connected to every worker (lazily) */
} cli_running;

/* Loads cluster.ini and the token and creates the cluster. Returns 0;
 * FERRY_ENOENT when no cluster runs under this FERRY_HOME (message printed
 * unless `quiet`); another error, printed. With `orphans`, a cluster.ini
 * whose supervisor is gone still counts: its workers may outlive it. */
int cli_running_open(cli_running *r, const cli_home *h, const char *cmd, bool quiet,
                     bool orphans);
void cli_running_close(cli_running *r);

/* ---- processes (procs.c) ---------------------------------------------------- */

/* Reads a file holding one number in lo..hi; false if absent or not that. */
bool cli_read_number(const char *path, long lo, long hi, long *out);
/* Writes one number to path atomically. Returns 0 or -errno. */
int cli_write_number(const char *path, long value);

/* Whether pid runs (an exited, unreaped one does not). */
bool cli_pid_alive(pid_t pid);

/* Whether pid is a `ferry worker` whose --state-dir is state_dir: a pid
 * read from a file may since belong to another process. */
bool cli_is_worker_of(pid_t pid, const char *state_dir);

/* Waits up to ms for the cluster lock to be free (no supervisor). */
bool cli_wait_unlocked(const cli_home *h, double ms);

/* Waits up to wait_ms for the supervisor `sup` to exit on its own, then
 * SIGTERM (it stops its workers), then SIGKILL to its process group.
 * Returns whether it is gone. */
bool cli_stop_supervisor(const cli_home *h, pid_t sup, double wait_ms);

/* ---- leftovers (leftovers.c) ------------------------------------------------ */

/* Workers of an earlier cluster under this home that still run although
 * no supervisor holds the lock (it was SIGKILLed and they did not follow):
 * found by the pids the supervisor recorded, checked to be `ferry worker`s
 * of this home. Fills ranks/pids (up to max) and returns how many. */
size_t cli_leftovers(const cli_home *h, int *ranks, pid_t *pids, size_t max);

/* Writes "worker 0 (pid 123), worker 1 (pid 124)" into buf. */
void cli_leftovers_list(const int *ranks, const pid_t *pids, size_t n, char *buf,
                        size_t len);

/* SIGTERM, up to wait_ms, then SIGKILL to each. Returns how many are gone. */
size_t cli_leftovers_stop(const pid_t *pids, size_t n, double wait_ms);

/* ---- logs (logfile.c) ------------------------------------------------------- */

/* A log that rotates: past max_bytes, NAME becomes NAME.1 (NAME.1 NAME.2, up
 * to `keep` old files) and a new NAME starts. */
typedef struct cli_log {
    char path[CLI_FILE_MAX];
    int fd; /* -1: closed */
    int64_t size, max_bytes;
    int keep;
    bool dup_to_stdio; /* the process's stdout and stderr follow the file */
} cli_log;

/* Opens (appends to) path. Returns 0 or -errno. */
int cli_log_open(cli_log *l, const char *path, int64_t max_bytes, int keep, bool stdio);
/* Appends, rotating first when the file would pass max_bytes. */
void cli_log_write(cli_log *l, const void *data, size_t len);
void cli_log_close(cli_log *l);

/* ---- crash loops (restarts.c) ------------------------------------------------ */

/* The most of a crash record a worker keeps and reports. */
#define CLI_CRASH_MAX 256

typedef struct cli_restarts {
    int crashes;         /* in a row, each within 30 s of the one before */
    int64_t window_ms;   /* from the first of them to the last */
    int64_t next_try_ms; /* wall clock (ms since the epoch); 0: restarted at once */
    char last_crash[CLI_CRASH_MAX];
} cli_restarts;

/* workers/<rank>/restarts, written by the supervisor at every crash. */
int cli_restarts_write(const cli_home *h, int rank, const cli_restarts *r);
bool cli_restarts_read(const cli_home *h, int rank, cli_restarts *r);
/* "crash loop: N crashes in T s, next try in S s" into buf. */
void cli_restarts_describe(const cli_restarts *r, int64_t now_ms, char *buf, size_t len);

/* Milliseconds since the epoch. */
int64_t cli_wall_ms(void);

/* ---- shutdown under a submit (stopped_by.c) ---------------------------------- */

/* `ferry shutdown` notes when it began ($FERRY_HOME/shutdown-at). */
int cli_shutdown_mark(const cli_home *h);
/* Says, for `cmd`, that the cluster was shut down, when that began at or
 * after since_ms (wall clock): the reason a command's calls failed. Said
 * once: a second call after it was said is silent. */
void cli_shutdown_explain(const cli_home *h, const char *cmd, int64_t since_ms);
/* The same as the preface of what follows ("; what they saw:"): said
 * before relaying a driver's errors. */
void cli_shutdown_explain_before(const cli_home *h, const char *cmd, int64_t since_ms);

/* The same said before the first error of a command whose errors follow
 * from its calls (a training's): `w` must outlive the command. */
typedef struct cli_shutdown_watch {
    const cli_home *h;
    const char *cmd;
    int64_t since_ms;
} cli_shutdown_watch;
void cli_shutdown_explain_first(cli_shutdown_watch *w);

/* ---- the supervisor ------------------------------------------------------- */

/* A worker the supervisor runs on this host. */
typedef struct cli_local {
    int rank;
    char host[256]; /* no brackets */
    int port;       /* 0: the worker picks one and writes it to its port file */
} cli_local;

typedef struct cli_supervisor_opts {
    const cli_home *home;
    const char *exe;        /* absolute path of the ferry executable */
    const char *token_file; /* handed to every worker */
    const cli_local *workers;
    size_t n_workers;
    int threads;
    const char *device; /* every worker's --device */
    bool bind_cores;    /* each worker to its share of this process's CPUs
                           (--bind-to core) */
    int lock_fd;        /* the cluster lock, inherited; held until exit */
    /* Liveness timeout, restart back-off, message limit, log rotation. */
    const conf_cluster *conf;
} cli_supervisor_opts;

/* Runs in the process `ferry start` forked: spawns every worker of
 * o->workers (logs under logs/), restarts every worker that exits without
 * being asked to stop or stops answering pings (backing off when it crashes
 * in a loop), leaves one that fails at its start, and returns once every
 * worker has stopped (after `ferry shutdown`) or on SIGTERM, after stopping
 * them. Returns the process exit status. */
int cli_supervise(const cli_supervisor_opts *o);

#endif

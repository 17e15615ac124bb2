/* cluster/cli — the `ferry` command.
 *
 * Where things are:
 *   main.c        subcommand dispatch, --help, --version
 *   say.c         errors as every subcommand says them, the shared --json flag
 *   home.c        FERRY_HOME (cluster/home/ has its layout) and the running
 *                 cluster's state
 *   start.c       `ferry start`: token, supervisor (cluster/supervisor/), wait
 *                 until every worker answers
 *   start_slurm.c `ferry start --slurm` (an srun step of workers) and
 *                 `--attach N` (workers an engine such as mpirun started)
 *   stopped_by.c  a submit whose cluster was shut down under it says so
 *   leftovers.c   workers an earlier cluster left running
 *   procs.c       stopping a supervisor with everything it started
 *   status.c      `ferry status`
 *   submit.c      `ferry submit`: check the module, then run its driver or train
 *   drive.c       a module's driver, run in a child process
 *   inspect.c     loading a module in a child process to check it
 *   train.c       submit's training (cluster/train/), told as it happens
 *   saved.c       --init-from and --save: the parameters as safetensors
 *   predict.c     `ferry predict`: a trained model run over a test set
 *   modfile.c     reading the module file submit was given, and its size limit
 *   shutdown.c    `ferry shutdown`: stop every worker and the supervisor, clean up */
#ifndef FERRY_CLI_H
#define FERRY_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "cluster/cluster.h"
#include "cluster/home/home.h"
#include "cluster/train/train.h"
#include "config/config.h"

#define CLI_PATH_MAX HOME_PATH_MAX
#define CLI_FILE_MAX HOME_FILE_MAX

/* Exit statuses shared by every subcommand. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

int cli_start(int argc, char **argv);
int cli_status(int argc, char **argv);
int cli_submit(int argc, char **argv);
int cli_shutdown(int argc, char **argv);
int cli_predict(int argc, char **argv);
int cli_runs(int argc, char **argv);
int cli_plot(int argc, char **argv);
int cli_check(int argc, char **argv); /* check.c */
int cli_checkpoint(int argc, char **argv); /* checkpoint.c */
int cli_dashboard(int argc, char **argv);  /* dashboard.c */

/* ---- workers an engine starts (start_slurm.c) ------------------------------ */

/* Adds n workers (n < 0 with `slurm`: the allocation's tasks) that record
 * where they listen, as attached, placeholder addresses; with `slurm`,
 * checks that this runs in an allocation and sets *addrs to its nodes'
 * addresses ("n1=10.0.0.1,...", to free). Returns 0 or the exit status
 * (said). */
int cli_slurm_plan(conf_cluster *conf, long n, bool slurm, char **addrs);

typedef struct cli_slurm_launch_opts {
    const char *exe, *addrs, *device;
    size_t n;
    int threads;
} cli_slurm_launch_opts;

/* Forks the daemon that runs the workers' srun step and holds the
 * inherited cluster lock until the step ends; SIGTERM cancels the step.
 * Returns its pid, or -1. */
pid_t cli_slurm_launch(const home_paths *h, const cli_slurm_launch_opts *o);

/* Waits until every worker of conf has recorded its host and port
 * (FERRY_HOME/workers/<rank>/), and puts them in conf. Fails early when
 * *sup exits (then reaped, *sup = 0) or *interrupted is set. Returns 0 or
 * FERRY_E* (said). */
int cli_slurm_wait(const home_paths *h, conf_cluster *conf, pid_t *sup, double deadline,
                   volatile sig_atomic_t *interrupted);

/* One task of the step: its node's address, then `ferry worker --from-env`
 * (argv: "start" "--slurm-task" THREADS DEVICE). Returns only on failure. */
int cli_slurm_task(int argc, char **argv);

/* In a daemon just forked: its own session (a terminal's hang-up or
 * Ctrl-C does not reach it), stdin from /dev/null, stdout and stderr
 * appended to `log`, and no descriptor of the caller's (a pipe a test
 * reads to its end) kept open. */
void cli_daemon_io(const char *log);

/* Whether a step of workers runs for the cluster under h. */
bool cli_slurm_step_running(const home_paths *h);

/* ---- training (train.c) ---------------------------------------------------- */

/* Trains the model of module `m` (file `module`, task `task`) through
 * cluster/train: a line before, a progress line an epoch, and a summary (or,
 * with json, one JSON object on stdout and the lines on stderr). Returns 0
 * or FERRY_E*, the error printed. */
/* Prints a sync run's lost worker and where every rank goes on from
 * (lost_worker.c): cluster_train_events.worker_restarted's arguments. */
void cli_say_worker_restarted(FILE *out, const cluster_train_lost *lost);

/* Prints an async run's lost worker taken back in, or left out
 * (worker_back.c): cluster_train_events.worker_back's arguments. */
void cli_say_worker_back(FILE *out, int rank, const char *target, int lost_in,
                         const char *how, bool back, int after, int restart, int max,
                         const char *from);

/* Whether `ferry shutdown` began at since_ms or later (lost_worker.c): a
 * lost worker is then not waited for. */
bool cli_shutdown_since(int64_t since_ms);

/* start_wait.c: what `ferry start` and `--add` wait for. */
struct sv_local; /* cluster/supervisor/supervisor.h */
typedef struct cli_start_wait {
    const home_paths *h;
    double deadline;      /* on uv_hrtime()'s clock, in ms */
    long long timeout_ms; /* what the deadline came from, for the error */
    const char *what;     /* before each error: "" or "--add: " */
    /* The first worker waited for and reported: 0, or an add's first (it
     * answers for its own; an older one that is down is status's to show). */
    size_t from;
    /* 0 while the wait goes on; else why it stops (said). */
    int (*gave_up)(void *data);
    void *data;
} cli_start_wait;

/* Waits until each of local[0..n) whose port is 0 has written it to its
 * port file, and sets it. Returns 0, FERRY_ETIMEDOUT or what gave_up
 * returned (said). */
int cli_start_wait_ports(const cli_start_wait *w, struct sv_local *local, size_t n);
/* Pings until every worker of cl from w->from on answers. Returns 0 or an
 * error (said). */
int cli_start_wait_ready(const cli_start_wait *w, cluster *cl);
/* Prints one line per worker of rank `from` on (Stats, asked of every
 * worker, proves each accepts this cluster's token), then how many are
 * ready since t0 (from 0) or were added (from > 0). Prints no worker line
 * when one fails. Returns 0 or an error (said). */
int cli_start_report(cluster *cl, size_t from, double t0);

/* start_add.c: `ferry start --add K` (timeout_ms <= 0: the cluster's
 * start timeout). Returns the exit status. */
int cli_start_add(long k, long timeout_ms);

/* joined.c: whether the running cluster of `h` has the worker `worker`
 * now (one `ferry start --add` added), its address into `target`. */
bool cli_joined_worker(const home_paths *h, int worker, char *target, size_t len);
/* The progress line of a worker that joined and was taken in. */
void cli_say_joined(FILE *f, int worker, const char *target, int epoch, const char *from,
                    int workers);

int cli_train(cluster *cl, const home_paths *h, const cluster_module *m,
              const char *module, const char *task, const cluster_train_opts *o);

/* --init-from: the file `o` names read into *f (zeroed when none), or
 * FERRY_E* with the error printed. Free it with params_file_free(). */
/* --resume DIR (resume.c): the newest valid checkpoint there, this
 * model's, into `file` (len bytes), with o->resume pointing at it, its
 * next epoch o->first_epoch, and DIR the checkpoint directory unless one
 * was given; each newer file skipped is warned of with why. Returns CLI_OK,
 * or CLI_FAIL (said) when there is none. */
struct cli_module_info;
/* A run that does not continue (no --resume) into a --checkpoint-dir that
 * holds checkpoints already: refused (said, CLI_USAGE), since --resume
 * would later take the newest of either run. CLI_OK otherwise. */
int cli_checkpoint_dir_fresh(const cluster_train_opts *o);
int cli_resume_pick(cluster_train_opts *o, const struct cli_module_info *info, char *file,
                    size_t len);

int cli_params_init(const cluster_train_opts *o, params_file *f);

/* --save: the result's tensors written to the file `o` names, with the
 * run's figures as metadata, and a line saying so. 0 when `o` names none;
 * FERRY_E* with the error printed. */
int cli_params_save(const cluster_train_opts *o, const char *task,
                    const cluster_train_result *res);

/* ---- what every subcommand says (say.c) ------------------------------------- */

/* Prints "ferry <cmd>: <message>\n" to stderr. */
void cli_err(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* fn(arg) runs once, before the next cli_err prints: a cause found only
 * once something failed goes before what the failure looked like. */
void cli_err_preface(void (*fn)(void *), void *arg);

/* Parses --json and --help, all `runs` takes (status adds --watch and
 * --interval, so parses its own), in argv[0..argc). Returns 0 (optind is
 * then the first operand), -1 after printing `usage` for --help (exit 0),
 * or CLI_USAGE after printing it to stderr for anything else. */
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

/* Resolves FERRY_HOME and the paths under it. Prints the error for `cmd`. */
int cli_home_init(home_paths *h, const char *cmd);

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
int cli_running_open(cli_running *r, const home_paths *h, const char *cmd, bool quiet,
                     bool orphans);
void cli_running_close(cli_running *r);

/* ---- ship.c: --ship-data ----------------------------------------------------- */

/* Ships the files o's data options name to the workers of `cl` that lack
 * them and points the options at their copies. Errors printed. */
int cli_ship_data(cluster *cl, cluster_train_opts *o, bool quiet);

/* ---- remote.c: --rendezvous, workers an engine started -------------------- */

/* What --help says of the two options below. */
#define CLI_REMOTE_HELP                                                                  \
    "      --rendezvous HOST:PORT  the workers an engine (srun, mpirun, Kubernetes)\n"   \
    "                     started with `ferry worker --from-env`, found through\n"       \
    "                     rank 0 at HOST:PORT instead of $FERRY_HOME's cluster\n"        \
    "      --token-file F with --rendezvous: the cluster token (default\n"               \
    "                     $FERRY_HOME/token)\n"

/* Takes --rendezvous, --token-file and --tls-* out of argv (before any "--"), for
 * `cmd`. Returns CLI_OK, or CLI_USAGE (printed). */
int cli_remote_take(int *argc, char **argv, const char *cmd);
/* Whether --rendezvous was given: cli_running_open goes through rank 0. */
bool cli_remote_given(void);
/* cli_running_open for --rendezvous: waits until rank 0 answers and every
 * rank has joined (saying what it waits for), then connects to them all. */
int cli_remote_open(cli_running *r, const home_paths *h, const char *cmd);
/* The --rendezvous given (NULL: none). */
const char *cli_remote_address(void);

/* `ferry status --watch` (watch.c): the table every `interval` seconds until
 * q, SIGINT or SIGTERM. Returns the exit status. */
int cli_status_watch(cli_running *r, const home_paths *h, double interval);

/* The training's progress bar on a terminal (progress.c): NULL (no bar,
 * every call a no-op) when `f` is not one. Lines printed while it runs go
 * between hold and release, which wipe and redraw it; epoch (under hold)
 * counts one done at `samples_per_s`. */
typedef struct cli_progress cli_progress;
cli_progress *cli_progress_create(FILE *f, long epochs);
void cli_progress_begin(cli_progress *p);
void cli_progress_hold(cli_progress *p);
void cli_progress_epoch(cli_progress *p, long epoch, double samples_per_s);
void cli_progress_release(cli_progress *p);
void cli_progress_destroy(cli_progress *p);

/* For `submit` and `predict` (`cmd`, which its errors name): opens the
 * running cluster into *r, checks the module of len bytes (called `shown`)
 * against its size limit, waits until every worker answers and ships the
 * module to them. Returns 0 or CLI_FAIL (said); *r is the caller's to close
 * either way (once r->cl is set). */
int cli_running_ship(cli_running *r, const home_paths *h, const char *cmd,
                     const char *shown, const void *bytes, size_t len, cluster_module *m);
/* cli_running_ship() that, when not every worker answers but `min` or
 * more do (`min` > 0: a sync run's --min-workers), ships the module to
 * those and goes on: the run begins without the others. */
int cli_running_ship_some(cli_running *r, const home_paths *h, const char *cmd,
                          const char *shown, const void *bytes, size_t len, long min,
                          cluster_module *m);

/* ---- processes (procs.c) ---------------------------------------------------- */

/* Waits up to ms for the cluster lock to be free (no supervisor). */
bool cli_wait_unlocked(const home_paths *h, double ms);

/* Waits up to wait_ms for the supervisor `sup` to exit on its own, then
 * SIGTERM (it stops its workers), then SIGKILL to its process group.
 * Returns whether it is gone. */
bool cli_stop_supervisor(const home_paths *h, pid_t sup, double wait_ms);

/* ---- leftovers (leftovers.c) ------------------------------------------------ */

/* Workers of an earlier cluster under this home that still run although
 * no supervisor holds the lock (it was SIGKILLed and they did not follow):
 * found by the pids the supervisor recorded, checked to be `ferry worker`s
 * of this home. Fills ranks/pids (up to max) and returns how many. */
size_t cli_leftovers(const home_paths *h, int *ranks, pid_t *pids, size_t max);

/* Writes "worker 0 (pid 123), worker 1 (pid 124)" into buf. */
void cli_leftovers_list(const int *ranks, const pid_t *pids, size_t n, char *buf,
                        size_t len);

/* SIGTERM, up to wait_ms, then SIGKILL to each. Returns how many are gone. */
size_t cli_leftovers_stop(const pid_t *pids, size_t n, double wait_ms);

/* ---- shutdown under a submit (stopped_by.c) ---------------------------------- */

/* `ferry shutdown` notes when it began ($FERRY_HOME/shutdown-at). */
int cli_shutdown_mark(const home_paths *h);
/* Says, for `cmd`, that the cluster was shut down, when that began at or
 * after since_ms (wall clock): the reason a command's calls failed. Said
 * once: a second call after it was said is silent. */
void cli_shutdown_explain(const home_paths *h, const char *cmd, int64_t since_ms);
/* The same as the preface of what follows ("; what they saw:"): said
 * before relaying a driver's errors. */
void cli_shutdown_explain_before(const home_paths *h, const char *cmd, int64_t since_ms);

/* The same said before the first error of a command whose errors follow
 * from its calls (a training's): `w` must outlive the command. */
typedef struct cli_shutdown_watch {
    const home_paths *h;
    const char *cmd;
    int64_t since_ms;
} cli_shutdown_watch;
void cli_shutdown_explain_first(cli_shutdown_watch *w);

#endif

/* cluster/home — FERRY_HOME as the commands and the supervisor share it:
 * its layout, the small files of numbers the supervisor and workers leave
 * (pids, ports), and the supervisor's account of a worker's crashes.
 *
 * Where things are:
 *   layout.c    the paths under FERRY_HOME, forgetting a cluster that is gone
 *   numfile.c   pid and port files, whether a process runs, whose worker it is
 *   restarts.c  workers/<rank>/restarts, written by the supervisor at every crash
 *   reach.c     where this host reaches a worker of its own
 *   tls.c       the cluster's TLS files turned on for this process
 *
 * FERRY_HOME layout:
 *   lock                  flock'ed by the supervisor while the cluster runs
 *   supervisor.pid        the supervisor, written by it first thing
 *   cluster.ini           the running cluster (a config file plus [state])
 *   token                 the cluster token, 0600
 *   logs/                 supervisor.log, worker-<rank>.log and their rotated
 *                         .1 .. .N (kept after shutdown)
 *   workers/<rank>/       a local worker's state: cache/, crash, port, pid,
 *                         stopped (it was asked to stop), restarts
 *   start-error           why the supervisor gave up while starting
 *   shutdown-at           when the last `ferry shutdown` began (kept)
 *   grow                  `ferry start --add`'s request to the supervisor:
 *                         "rank host port" a line, removed once taken
 *   grow.lock             flock'ed by that `ferry start --add` */
#ifndef FERRY_CLUSTER_HOME_H
#define FERRY_CLUSTER_HOME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config/config.h"

#define HOME_PATH_MAX 4096
/* A path under FERRY_HOME plus a file name. */
#define HOME_FILE_MAX (HOME_PATH_MAX + 64)

typedef struct home_paths {
    char dir[HOME_PATH_MAX];
    char state[HOME_PATH_MAX]; /* cluster.ini */
    char token[HOME_PATH_MAX]; /* default token file */
    char logs[HOME_PATH_MAX];
    char workers[HOME_PATH_MAX];
    char start_error[HOME_PATH_MAX];
    char supervisor_pid[HOME_PATH_MAX];
} home_paths;

/* Fills h with the paths under the FERRY_HOME `dir`. Returns 0, or
 * FERRY_ERANGE when one of them is too long. */
int home_paths_init(home_paths *h, const char *dir);

/* Removes a cluster's state (the state file, the start error, the
 * supervisor's pid, the directories the supervisor made for its workers),
 * not its token or logs. A directory under workers/ without the
 * supervisor's mark is someone else's (an attached worker keeps its state
 * in workers/PORT under the same FERRY_HOME) and is left alone. */
void home_forget_cluster(const home_paths *h);

/* Under FERRY_HOME: see the layout above. */
#define HOME_GROW_FILE "grow"
#define HOME_GROW_LOCK "grow.lock"

/* The file the supervisor leaves in each worker directory it makes: what
 * home_forget_cluster() may remove. */
#define HOME_WORKER_MARK "supervised"

/* A worker's own directory, "<home>/workers/<rank>", and files in it. */
void home_worker_dir(const home_paths *h, int rank, char *buf, size_t len);
void home_worker_file(const home_paths *h, int rank, const char *name, char *buf,
                      size_t len);

/* Where this host reaches a worker that listens on `listen`: a wildcard
 * address is every interface, loopback among them. */
const char *home_reach_host(const char *listen);

/* ---- numbers in files, processes (numfile.c) ---------------------------------- */

/* Reads a file holding one number in lo..hi; false if absent or not that. */
bool home_read_number(const char *path, long lo, long hi, long *out);
/* Writes one number to path atomically. Returns 0 or -errno. */
int home_write_number(const char *path, long value);

/* Whether pid runs (an exited, unreaped one does not). */
bool home_pid_alive(pid_t pid);

/* Whether pid is a `ferry worker` whose --state-dir is state_dir: a pid
 * read from a file may since belong to another process. */
bool home_is_worker_of(pid_t pid, const char *state_dir);

/* ---- crash loops (restarts.c) ------------------------------------------------ */

/* The most of a crash record a worker keeps and reports. */
#define HOME_CRASH_MAX 256

typedef struct home_restarts {
    int crashes;         /* in a row, each within 30 s of the one before */
    int64_t window_ms;   /* from the first of them to the last */
    int64_t next_try_ms; /* wall clock (ms since the epoch); 0: restarted at once */
    char last_crash[HOME_CRASH_MAX];
} home_restarts;

/* workers/<rank>/restarts, written by the supervisor at every crash. */
int home_restarts_write(const home_paths *h, int rank, const home_restarts *r);
bool home_restarts_read(const home_paths *h, int rank, home_restarts *r);
/* "crash loop: N crashes in T s, next try in S s" into buf. */
void home_restarts_describe(const home_restarts *r, int64_t now_ms, char *buf,
                            size_t len);

/* ---- tls.c ---- */

/* Turns TLS on for every connection this process makes from now on when
 * `conf` names TLS files (tls_cert/tls_key/tls_ca: `ferry start` keeps
 * them in cluster.ini, so the commands that follow speak as the cluster
 * does), plain text otherwise. Returns 0, or FERRY_EINVAL with `err` set
 * ("TLS: certificate F: ..."). */
int home_tls_use(const conf_cluster *conf, char *err, size_t errlen);

#endif

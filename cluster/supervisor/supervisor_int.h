/* The supervisor's state, shared by its files (supervisor.h says which
 * file does what). All of it runs on the supervisor's one libuv loop
 * thread. */
#ifndef FERRY_CLUSTER_SUPERVISOR_INT_H
#define FERRY_CLUSTER_SUPERVISOR_INT_H

#include <stdint.h>
#include <time.h>

#include <uv.h>

#include "cluster/supervisor/supervisor.h"
#include "proxyworker/proxyworker.h"

/* A log that rotates: past max_bytes, NAME becomes NAME.1 (NAME.1 NAME.2, up
 * to `keep` old files) and a new NAME starts. */
typedef struct sv_logfile {
    char path[HOME_FILE_MAX];
    int fd; /* -1: closed */
    int64_t size, max_bytes;
    int keep;
    bool dup_to_stdio; /* the process's stdout and stderr follow the file */
} sv_logfile;

/* Opens (appends to) path. Returns 0 or -errno. */
int sv_logfile_open(sv_logfile *l, const char *path, int64_t max_bytes, int keep,
                    bool stdio);
/* Appends, rotating first when the file would pass max_bytes. */
void sv_logfile_write(sv_logfile *l, const void *data, size_t len);
void sv_logfile_close(sv_logfile *l);

/* Crashes closer together than this make one streak; a worker that stays up
 * this long starts a new one. */
#define SV_STREAK_MS 30000
/* The first crashes of a streak are restarted at once: a crash is usually a
 * task's, and the next call should find its worker back. */
#define SV_RESTART_AT_ONCE 3

typedef struct sv_worker {
    /* One handle per run: a handle is only free after its close callback,
     * and a restart cannot wait for that. */
    uv_process_t *proc;
    uv_pipe_t *out; /* the run's stdout and stderr, copied into log */
    sv_logfile log;
    uv_timer_t restart_timer; /* a crash loop's delayed restart */
    bool waiting;             /* restart_timer is armed */
    int rank;
    int port; /* the bound port, once known (asked 0: from its port file) */
    char host[256];
    uint32_t restarts;
    struct timespec spawned_at; /* wall clock, to compare with file times */
    bool running;
    bool given_up; /* failed at its start: not restarted */
    /* The current streak of crashes. */
    int streak;
    uint64_t streak_start_ms, last_crash_ms; /* loop time */
    /* Liveness: the last time this run answered a ping (loop time), and,
     * once the supervisor killed it for silence, for how long. */
    pw *pw;
    rpc_call ping;
    bool pinging;
    uint64_t last_answer_ms;
    uint64_t silent_ms;
    /* Pings of this run that failed since its last answer, and how the
     * last of them did: what the kill's log line says. */
    unsigned ping_failures;
    char ping_error[200];
    struct supervisor *sv;
} sv_worker;

typedef struct supervisor {
    uv_loop_t loop;
    uv_signal_t sigterm, sigint;
    uv_signal_t sighup; /* `ferry start --add` asks for more workers */
    uv_timer_t kill_timer;
    uv_timer_t live_timer;
    rpc_client *client; /* NULL: no liveness check */
    const sv_opts *o;
    sv_logfile log;
    sv_worker *w;
    size_t n;
    size_t running;
    bool stopping;
    bool finished;
} supervisor;

void sv_log(supervisor *sv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The most workers one supervisor runs, those added included. */
#define SV_MAX_WORKERS CONF_MAX_WORKERS

/* Sets up the next of sv->w (sv->n < SV_MAX_WORKERS) for the local worker
 * `l`; it is not started yet. */
sv_worker *sv_add_worker(supervisor *sv, const sv_local *l);
/* Starts a run of w. Returns 0 or an error (logged). */
int sv_spawn(sv_worker *w);

/* ---- sv_grow.c ---- */

/* On SIGHUP, starts the workers HOME_GROW_FILE asks for. */
void sv_grow_start(supervisor *sv);
/* Closes the signal handle, with the others'. */
void sv_grow_stop(supervisor *sv);

/* ---- sv_crash.c ---- */

/* Whether this run of w exited because it was asked to (a Shutdown call, or
 * SIGTERM/SIGINT): the worker leaves a `stopped` file in its directory. */
bool sv_asked_to_stop(const sv_worker *w);
/* Removes that file before a run. */
void sv_forget_stop(const sv_worker *w);

/* Whether this run got as far as listening (it wrote its port file). */
bool sv_became_ready(const sv_worker *w);

/* The last non-empty line of the worker's log. */
void sv_last_log_line(const sv_worker *w, char *buf, size_t len);

/* Describes the exit of a crashed run into `text` and makes it the crash
 * record the next run reports (workers/<rank>/crash), unless the run wrote
 * its own (a fatal signal in a call): then `text` is that one. */
void sv_record_crash(sv_worker *w, int64_t status, int signo, char *text, size_t len);

/* ---- sv_live.c ---- */

/* Starts the liveness timer when o->conf->liveness_timeout_ms > 0. Returns 0
 * or an error (logged); without it the cluster still runs. */
int sv_live_start(supervisor *sv);
/* A new run of w: it has the liveness timeout from now to answer. */
void sv_live_spawned(sv_worker *w);
/* Stops pinging and releases the client; the loop then runs out. */
void sv_live_stop(supervisor *sv);

/* ---- sv_orphans.c ---- */

/* Makes the supervisor a child subreaper: what a SIGKILLed worker's tasks
 * forked becomes its child. */
void sv_orphans_adopt(supervisor *sv);
/* Kills and reaps every child that is not a running worker; `rank` names
 * the worker whose exit prompted it in the log (-1: none). */
void sv_orphans_kill(supervisor *sv, int rank);

#endif

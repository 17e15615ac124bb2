/* What a worker's exit was. Only a stop someone asked for (a Shutdown call,
 * SIGTERM or SIGINT: the worker says so with a `stopped` file before it
 * exits) ends a worker for good. Every other exit is a crash, status 0
 * included: a task that calls exit(0) must not make its worker vanish. A
 * crash leaves a record that the restarted worker reports in Ping, so that
 * `ferry status` and the master name it, even when the worker could write
 * none itself (SIGKILL from the OOM killer, exit(), silence). */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/runtime.h"
#include "supervisor_int.h"

static void worker_path(const sv_worker *w, const char *name, char *buf, size_t len)
{
    home_worker_file(w->sv->o->home, w->rank, name, buf, len);
}

/* Whether the file was written during the current run. */
static bool written_this_run(const sv_worker *w, const char *name)
{
    char path[HOME_FILE_MAX];
    struct stat st;
    worker_path(w, name, path, sizeof path);
    if (stat(path, &st) != 0)
        return false;
    return st.st_mtim.tv_sec > w->spawned_at.tv_sec ||
           (st.st_mtim.tv_sec == w->spawned_at.tv_sec &&
            st.st_mtim.tv_nsec >= w->spawned_at.tv_nsec);
}

bool sv_asked_to_stop(const sv_worker *w)
{
    return written_this_run(w, "stopped");
}

void sv_forget_stop(const sv_worker *w)
{
    char path[HOME_FILE_MAX];
    worker_path(w, "stopped", path, sizeof path);
    unlink(path);
}

bool sv_became_ready(const sv_worker *w)
{
    return written_this_run(w, "port");
}

void sv_last_log_line(const sv_worker *w, char *buf, size_t len)
{
    buf[0] = '\0';
    FILE *f = fopen(w->log.path, "re");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        /* Cut to the caller's buffer on purpose: it is a reminder, the
         * log holds the rest. */
        size_t n = strlen(line);
        if (n && len) {
            n = n < len - 1 ? n : len - 1;
            memcpy(buf, line, n);
            buf[n] = '\0';
        }
    }
    fclose(f);
}

static void why_killed(int signo, char *buf, size_t len)
{
    if (signo == SIGKILL)
        snprintf(buf, len,
                 "killed by SIGKILL, not by ferry: the OOM killer or a kill -9");
    else
        snprintf(buf, len, "killed by signal %d (SIG%s)", signo, sigabbrev_np(signo));
}

void sv_record_crash(sv_worker *w, int64_t status, int signo, char *text, size_t len)
{
    char path[HOME_FILE_MAX];
    worker_path(w, "crash", path, sizeof path);
    if (signo && signo != SIGKILL && !w->silent_ms && written_this_run(w, "crash")) {
        /* The worker's own record names the module and function. */
        FILE *f = fopen(path, "re");
        char line[HOME_CRASH_MAX] = "";
        if (f) {
            if (!fgets(line, sizeof line, f))
                line[0] = '\0';
            fclose(f);
        }
        line[strcspn(line, "\n")] = '\0';
        const char *rest = strchr(line, ' ');
        snprintf(text, len, "%s", rest ? rest + 1 : line);
        return;
    }
    /* The worker keeps 255 characters of a record: the log line is cut. */
    char what[256], last[96];
    if (w->silent_ms)
        snprintf(what, sizeof what,
                 "unresponsive for %.0f s (no answer to the supervisor's pings): killed "
                 "with SIGKILL",
                 (double)w->silent_ms / 1e3);
    else if (signo)
        why_killed(signo, what, sizeof what);
    else if (rt_exit_meaning((int)status))
        snprintf(what, sizeof what,
                 "exited with status %d without being asked to stop (%s)", (int)status,
                 rt_exit_meaning((int)status));
    else
        snprintf(what, sizeof what,
                 "exited with status %d without being asked to stop (a task called "
                 "exit()?)",
                 (int)status);
    /* Why a process exited by itself is often its last words; a killed one
     * had none. */
    if (!signo && !w->silent_ms) {
        sv_last_log_line(w, last, sizeof last);
        snprintf(text, len, "%s; its log's last line: %s", what,
                 last[0] ? last : "(none)");
    } else {
        snprintf(text, len, "%s", what);
    }
    /* The record's format is the worker's own: "<id> <text>", the id a
     * nanosecond time that tells one crash from the next. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char record[HOME_CRASH_MAX + 32];
    int n = snprintf(record, sizeof record, "%llu %s\n",
                     (unsigned long long)ts.tv_sec * 1000000000ull +
                         (unsigned long long)ts.tv_nsec,
                     text);
    if (n > 0 && (size_t)n < sizeof record)
        base_write_atomic(path, record, (size_t)n, false);
}

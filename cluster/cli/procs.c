/* The cluster's processes as the commands see them: the small files the
 * supervisor and workers leave (pids, ports), whether a process still runs,
 * and stopping a supervisor with everything it started. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "cli.h"

static double now_ms(void)
{
    return (double)uv_hrtime() / 1e6;
}

bool cli_read_number(const char *path, long lo, long hi, long *out)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char text[32] = "";
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return conf_parse_long(text, lo, hi, out);
}

int cli_write_number(const char *path, long value)
{
    char text[32];
    int len = snprintf(text, sizeof text, "%ld\n", value);
    return conf_write_atomic(path, text, (size_t)len, false);
}

bool cli_pid_alive(pid_t pid)
{
    if (pid <= 0 || kill(pid, 0) != 0)
        return false;
    /* An exited process nobody reaped yet (PID 1 of a container may never
     * do it) still answers kill(0): its state in /proc says Z. */
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close_paren = strrchr(buf, ')');
    return !(close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z');
}

bool cli_is_worker_of(pid_t pid, const char *state_dir)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* The arguments are NUL-separated: find "--state-dir" then the dir. */
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
        if (strcmp(buf + i, "--state-dir") == 0) {
            size_t next = i + strlen(buf + i) + 1;
            return next < n && strcmp(buf + next, state_dir) == 0;
        }
    }
    return false;
}

bool cli_wait_unlocked(const cli_home *h, double ms)
{
    double end = now_ms() + ms;
    while (conf_lock_held(h->dir)) {
        if (now_ms() > end)
            return false;
        usleep(10000);
    }
    return true;
}

bool cli_stop_supervisor(const cli_home *h, pid_t sup, double wait_ms)
{
    /* The lock is held by the supervisor alone: its release is the
     * supervisor's end, whoever its parent is. */
    bool gone = cli_wait_unlocked(h, wait_ms);
    if (!gone && sup > 0) {
        kill(sup, SIGTERM);
        gone = cli_wait_unlocked(h, 8000);
    }
    if (!gone && sup > 0) {
        /* Its own process group holds it and the workers it spawned. */
        kill(-sup, SIGKILL);
        gone = cli_wait_unlocked(h, 2000);
    }
    /* `start` giving up stops its own child: reap it, so no zombie stays.
     * Of anyone else's process, waitpid says ECHILD at once. */
    for (int i = 0; sup > 0 && i < 100 && waitpid(sup, NULL, WNOHANG) == 0; i++)
        usleep(10000);
    return gone;
}

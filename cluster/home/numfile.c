/* The cluster's processes as the commands and the supervisor see them: the
 * small files the supervisor and workers leave (pids, ports), and whether a
 * process still runs. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "home.h"

bool home_read_number(const char *path, long lo, long hi, long *out)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char text[32] = "";
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return base_parse_long(text, lo, hi, out);
}

int home_write_number(const char *path, long value)
{
    char text[32];
    int len = snprintf(text, sizeof text, "%ld\n", value);
    return base_write_atomic(path, text, (size_t)len, false);
}

bool home_pid_alive(pid_t pid)
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

bool home_is_worker_of(pid_t pid, const char *state_dir)
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

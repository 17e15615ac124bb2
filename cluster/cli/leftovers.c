/* Workers an earlier cluster left behind. A worker exits when its
 * supervisor dies (--parent-pid), but one that was stopped (SIGSTOP) or
 * wedged when that happened, or one started by an older ferry, can outlive
 * it: then nothing holds the lock, `status` would say "no cluster" and a new
 * `start` would run beside it (its port taken, two clusters in one home).
 * The commands find such workers by the pids the supervisor recorded, never
 * by name, and name and stop them. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "cli.h"

size_t cli_leftovers(const home_paths *h, int *ranks, pid_t *pids, size_t max)
{
    DIR *d = opendir(h->workers);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while (n < max && (e = readdir(d))) {
        long rank;
        if (!base_parse_long(e->d_name, 0, CONF_MAX_WORKERS, &rank))
            continue;
        char path[CLI_FILE_MAX], dir[CLI_FILE_MAX];
        long pid;
        home_worker_file(h, (int)rank, "pid", path, sizeof path);
        home_worker_dir(h, (int)rank, dir, sizeof dir);
        if (home_read_number(path, 1, INT32_MAX, &pid) && home_pid_alive((pid_t)pid) &&
            home_is_worker_of((pid_t)pid, dir)) {
            ranks[n] = (int)rank;
            pids[n++] = (pid_t)pid;
        }
    }
    closedir(d);
    return n;
}

void cli_leftovers_list(const int *ranks, const pid_t *pids, size_t n, char *buf,
                        size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < len; i++) {
        int k = snprintf(buf + used, len - used, "%sworker %d (pid %d)", i ? ", " : "",
                         ranks[i], (int)pids[i]);
        if (k < 0)
            break;
        used += (size_t)k;
    }
}

size_t cli_leftovers_stop(const pid_t *pids, size_t n, double wait_ms)
{
    for (size_t i = 0; i < n; i++) {
        kill(pids[i], SIGTERM);
        /* A stopped worker cannot act on SIGTERM until it runs again. */
        kill(pids[i], SIGCONT);
    }
    double end = (double)uv_hrtime() / 1e6 + wait_ms;
    size_t gone = 0;
    for (size_t i = 0; i < n; i++) {
        while (home_pid_alive(pids[i]) && (double)uv_hrtime() / 1e6 < end)
            usleep(10000);
        if (home_pid_alive(pids[i])) {
            kill(pids[i], SIGKILL);
            for (int k = 0; k < 200 && home_pid_alive(pids[i]); k++)
                usleep(10000);
        }
        gone += !home_pid_alive(pids[i]);
    }
    return gone;
}

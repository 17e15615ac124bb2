/* Nothing a task forks outlives its worker.
 *
 * A task function may fork (a helper, a shell, a daemon that setsid()s
 * away from the worker's process group). The worker is a child subreaper
 * (PR_SET_CHILD_SUBREAPER): whatever the task's children leave orphaned
 * becomes the worker's child rather than init's, however it detached
 * itself. When the worker ends, by Shutdown, a signal, a crash or being
 * wedged, it kills its children and reaps them, round after round, until
 * none is left (killing a child hands its own children to the worker).
 *
 * It finds its children through /proc (the parent field of each process's
 * stat), with open, read, getdents64, kill and waitpid only: async-signal-
 * safe, so the crash handler can do it too. A worker killed by SIGKILL (the
 * OOM killer, an impatient operator, its supervisor's liveness check)
 * cannot clean up; its orphans go to the next subreaper up: the
 * supervisor, a subreaper too, kills them with rt_reap_orphans.
 *
 * Orphans are reaped only here, at the end: reaping them meanwhile would
 * also take the exit status of a child a running task is waiting for. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"

/* Rounds of kill-and-reap, 10 ms apart: a tree as deep as this many
 * generations is gone within a second. */
#define ROUNDS 100

int rt_reap_init(void)
{
    return prctl(PR_SET_CHILD_SUBREAPER, 1) == 0 ? 0 : -errno;
}

/* The parent pid in /proc/<name>/stat, or -1. */
static long parent_of(const char *name)
{
    char path[64] = "/proc/";
    size_t n = strlen(path);
    for (const char *p = name; *p && n < sizeof path - 6; p++)
        path[n++] = *p;
    memcpy(path + n, "/stat", 6);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[512];
    ssize_t len = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (len <= 0)
        return -1;
    buf[len] = '\0';
    /* "pid (comm) S ppid ...": comm may hold anything, even ')'. */
    char *close_paren = NULL;
    for (char *p = buf; *p; p++)
        if (*p == ')')
            close_paren = p;
    if (!close_paren || close_paren[1] != ' ' || !close_paren[2] || close_paren[3] != ' ')
        return -1;
    long v = 0;
    for (const char *p = close_paren + 4; *p >= '0' && *p <= '9'; p++)
        v = v * 10 + (*p - '0');
    return v;
}

static bool all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

static bool kept(long pid, const pid_t *keep, size_t n_keep)
{
    for (size_t i = 0; i < n_keep; i++)
        if ((long)keep[i] == pid)
            return true;
    return false;
}

/* Kills every child of this process but those in keep; the first `max` of
 * their pids go to pids. Returns how many it killed. */
static int kill_children(const pid_t *keep, size_t n_keep, pid_t *pids, int max)
{
    int fd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    long self = (long)getpid();
    int found = 0;
    char buf[4096];
    long n;
    while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
            struct dirent64 *d = (struct dirent64 *)(buf + off);
            off += d->d_reclen;
            if (!all_digits(d->d_name) || parent_of(d->d_name) != self)
                continue;
            long pid = 0;
            for (const char *p = d->d_name; *p; p++)
                pid = pid * 10 + (*p - '0');
            if (kept(pid, keep, n_keep))
                continue;
            kill((pid_t)pid, SIGKILL);
            if (found < max)
                pids[found] = (pid_t)pid;
            found++;
        }
    }
    close(fd);
    return found;
}

int rt_reap_descendants(void)
{
    int saved = errno, killed = 0;
    for (int round = 0; round < ROUNDS; round++) {
        int found = kill_children(NULL, 0, NULL, 0);
        killed += found;
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        if (!found)
            break;
        struct timespec ts = {.tv_nsec = 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    errno = saved;
    return killed;
}

int rt_reap_orphans(const pid_t *keep, size_t n_keep)
{
    enum { MAX_AT_ONCE = 256 };
    pid_t pids[MAX_AT_ONCE];
    int killed = 0;
    for (int round = 0; round < ROUNDS; round++) {
        int found = kill_children(keep, n_keep, pids, MAX_AT_ONCE);
        killed += found;
        if (!found)
            break;
        /* Only the pids killed here: waitpid(-1) would take the exit of a
         * child the caller still waits for (a worker, for libuv). */
        int n = found < MAX_AT_ONCE ? found : MAX_AT_ONCE;
        for (int i = 0; i < n; i++)
            for (int t = 0; t < ROUNDS && waitpid(pids[i], NULL, WNOHANG) == 0; t++) {
                struct timespec ts = {.tv_nsec = 1000000};
                nanosleep(&ts, NULL);
            }
    }
    return killed;
}

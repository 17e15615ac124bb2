/* bench — running a command with a deadline and reading its lines. */
#include "watch.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stats.h"

#define LINE_MAX_BYTES 8192

typedef struct stream {
    int fd; /* -1: closed or not read */
    size_t at;
    char buf[LINE_MAX_BYTES];
} stream;

static pid_t spawn(char *const argv[], const char *const *env, unsigned flags, int out[2],
                   int err[2])
{
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    /* Its own group: the processes it starts (mpirun's ranks, python's
     * workers) can be killed with it. */
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    for (size_t i = 0; env && env[i]; i++) {
        if (strchr(env[i], '='))
            putenv((char *)env[i]);
        else
            unsetenv(env[i]);
    }
    if (flags & BENCH_WATCH_OUT)
        dup2(out[1], 1);
    else
        dup2(2, 1); /* our stdout is for JSON lines */
    if (flags & BENCH_WATCH_ERR)
        dup2(err[1], 2);
    if (flags & BENCH_WATCH_OUT)
        close(out[0]), close(out[1]);
    if (flags & BENCH_WATCH_ERR)
        close(err[0]), close(err[1]);
    execv(argv[0], argv);
    dprintf(2, "bench: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* Reads what is there; hands over complete lines. False at EOF. */
static bool drain(stream *s, int no, bench_line_fn fn, void *arg, uint64_t t0)
{
    ssize_t n = read(s->fd, s->buf + s->at, sizeof s->buf - 1 - s->at);
    if (n < 0 && errno == EINTR)
        return true;
    if (n <= 0)
        return false;
    double t = (double)(bench_now_ns() - t0) / 1e9;
    s->at += (size_t)n;
    s->buf[s->at] = '\0';
    char *nl;
    while ((nl = strchr(s->buf, '\n'))) {
        *nl = '\0';
        if (fn)
            fn(arg, no, s->buf, t);
        s->at -= (size_t)(nl + 1 - s->buf);
        memmove(s->buf, nl + 1, s->at + 1);
    }
    if (s->at == sizeof s->buf - 1) { /* a line this long is not one we read */
        if (fn)
            fn(arg, no, s->buf, t);
        s->at = 0;
    }
    return true;
}

int bench_watch(char *const argv[], const char *const *env, unsigned flags,
                int deadline_s, bench_line_fn fn, void *arg)
{
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    if ((flags & BENCH_WATCH_OUT) && pipe(out) != 0)
        return -1;
    if ((flags & BENCH_WATCH_ERR) && pipe(err) != 0) {
        if (out[0] >= 0)
            close(out[0]), close(out[1]);
        return -1;
    }
    uint64_t t0 = bench_now_ns();
    pid_t pid = spawn(argv, env, flags, out, err);
    static stream s[2];
    s[0] = (stream){.fd = out[0]};
    s[1] = (stream){.fd = err[0]};
    if (out[1] >= 0)
        close(out[1]);
    if (err[1] >= 0)
        close(err[1]);
    if (pid < 0) {
        int e = errno;
        for (int i = 0; i < 2; i++)
            if (s[i].fd >= 0)
                close(s[i].fd);
        errno = e;
        return -1;
    }
    setpgid(pid, pid); /* either side may win the race; both ask the same */
    uint64_t deadline = t0 + (uint64_t)deadline_s * 1000000000ull;
    bool late = false, reaped = false;
    int status = 0;
    for (;;) {
        uint64_t now = bench_now_ns();
        if (now >= deadline) {
            late = true;
            kill(-pid, SIGKILL);
            break;
        }
        struct pollfd p[2];
        int map[2], np = 0;
        for (int i = 0; i < 2; i++)
            if (s[i].fd >= 0)
                p[np] = (struct pollfd){.fd = s[i].fd, .events = POLLIN}, map[np++] = i;
        if (np == 0) { /* both read to the end (or never read): wait for the exit */
            if ((reaped = waitpid(pid, &status, WNOHANG) == pid))
                break;
            usleep(10000);
            continue;
        }
        int ms = (int)((deadline - now) / 1000000) + 1;
        if (poll(p, (nfds_t)np, ms) <= 0)
            continue;
        for (int i = 0; i < np; i++) {
            stream *st = &s[map[i]];
            if (p[i].revents && !drain(st, map[i] + 1, fn, arg, t0)) {
                close(st->fd);
                st->fd = -1;
            }
        }
    }
    for (int i = 0; i < 2; i++)
        if (s[i].fd >= 0)
            close(s[i].fd);
    while (!reaped && waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (late)
        return 124;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    /* What a failed group left behind (mpirun's ranks, python's workers):
     * the group is still ours while any of them lives. */
    if (code != 0)
        kill(-pid, SIGKILL);
    return code;
}

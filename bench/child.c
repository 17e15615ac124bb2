/* bench — forking, stopping and reaping peer processes. */
#include "child.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Parent side: the stop pipes of children still running, so that a later
 * child does not inherit (and keep open) an earlier child's stop pipe. */
#define MAX_CHILDREN 8
static int open_stop_fds[MAX_CHILDREN];
static int n_open_stop_fds;

/* Child side. */
static int ready_fd = -1, stop_fd = -1;

int bench_child_start(bench_child *c, const char *name, bench_child_main fn, void *arg)
{
    int ready[2], stop[2];
    memset(c, 0, sizeof *c);
    c->name = name;
    c->stop_fd = -1;
    if (n_open_stop_fds == MAX_CHILDREN) {
        fprintf(stderr, "bench/rpc: too many children\n");
        return -1;
    }
    if (pipe2(ready, O_CLOEXEC) != 0)
        goto fail_errno;
    if (pipe2(stop, O_CLOEXEC) != 0) {
        close(ready[0]);
        close(ready[1]);
        goto fail_errno;
    }
    pid_t parent = getpid();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(ready[0]);
        close(ready[1]);
        close(stop[0]);
        close(stop[1]);
        goto fail_errno;
    }
    if (pid == 0) {
        close(ready[0]);
        close(stop[1]);
        for (int i = 0; i < n_open_stop_fds; i++)
            close(open_stop_fds[i]);
        /* Never outlive the benchmark. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(1);
        signal(SIGPIPE, SIG_IGN);
        ready_fd = ready[1];
        stop_fd = stop[0];
        _exit(fn(arg));
    }
    close(ready[1]);
    close(stop[0]);
    c->pid = pid;
    c->stop_fd = stop[1];
    open_stop_fds[n_open_stop_fds++] = stop[1];

    struct pollfd pfd = {.fd = ready[0], .events = POLLIN};
    int32_t port = 0;
    int pr;
    do
        pr = poll(&pfd, 1, 30000);
    while (pr < 0 && errno == EINTR);
    ssize_t got = pr == 1 ? read(ready[0], &port, sizeof port) : -1;
    close(ready[0]);
    if (got != (ssize_t)sizeof port || port <= 0) {
        fprintf(stderr, "bench/rpc: %s server did not start\n", name);
        bench_child_stop(c, 1000);
        return -1;
    }
    c->port = port;
    return 0;

fail_errno:
    fprintf(stderr, "bench/rpc: starting %s server: %s\n", name, strerror(errno));
    return -1;
}

static void forget_stop_fd(int fd)
{
    for (int i = 0; i < n_open_stop_fds; i++) {
        if (open_stop_fds[i] == fd) {
            open_stop_fds[i] = open_stop_fds[--n_open_stop_fds];
            return;
        }
    }
}

/* Waits up to ms for the child; returns true once reaped. */
static bool reap(bench_child *c, int ms, int *status)
{
    struct timespec tick = {0, 5 * 1000 * 1000};
    for (int waited = 0;; waited += 5) {
        pid_t r = waitpid(c->pid, status, WNOHANG);
        if (r == c->pid || (r < 0 && errno == ECHILD))
            return true;
        if (waited >= ms)
            return false;
        nanosleep(&tick, NULL);
    }
}

int bench_child_stop(bench_child *c, int timeout_ms)
{
    if (c->pid <= 0)
        return -1;
    if (c->stop_fd >= 0) {
        forget_stop_fd(c->stop_fd);
        close(c->stop_fd);
        c->stop_fd = -1;
    }
    int status = 0, rc = -1;
    if (reap(c, timeout_ms, &status)) {
        rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    } else {
        fprintf(stderr, "bench/rpc: %s server did not stop; sending SIGTERM\n", c->name);
        kill(c->pid, SIGTERM);
        if (!reap(c, 2000, &status)) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &status, 0);
        }
    }
    if (rc != 0)
        fprintf(stderr, "bench/rpc: %s server exited with status %d\n", c->name, rc);
    c->pid = 0;
    return rc;
}

void bench_child_ready(int port)
{
    int32_t p = port;
    if (write(ready_fd, &p, sizeof p) != (ssize_t)sizeof p)
        bench_child_die("cannot report the port");
    close(ready_fd);
    ready_fd = -1;
}

void bench_child_wait_stop(void)
{
    char b;
    ssize_t r;
    do
        r = read(stop_fd, &b, 1);
    while (r < 0 && errno == EINTR);
    close(stop_fd);
    stop_fd = -1;
}

void bench_child_die(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    dprintf(2, "bench/rpc (server): %s\n", msg);
    _exit(2);
}

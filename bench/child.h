/* bench — a peer process: a server forked before the parent touches gRPC.
 *
 * The parent must fork every gRPC server child before it calls grpc_init()
 * itself (gRPC's state does not survive fork). The child reports its bound
 * port on a pipe, serves until the parent closes the stop pipe (or sends
 * SIGTERM, or dies), then exits; the parent reaps it in bench_child_stop(). */
#ifndef FERRY_BENCH_CHILD_H
#define FERRY_BENCH_CHILD_H

#include <sys/types.h>

typedef struct bench_child {
    const char *name;
    pid_t pid; /* 0: not running */
    int port;
    int stop_fd; /* parent's end: closing it tells the child to stop */
} bench_child;

/* Runs in the child. Must start serving, call bench_child_ready(port), wait
 * with bench_child_wait_stop(), clean up and return its exit status. */
typedef int (*bench_child_main)(void *arg);

/* Forks a child running `fn(arg)` and waits (up to 30 s) for its port.
 * Returns 0 or -1 with a message on stderr. */
int bench_child_start(bench_child *c, const char *name, bench_child_main fn, void *arg);

/* Asks the child to stop, waits up to `timeout_ms` for it, then kills it.
 * Returns the child's exit status, or -1 if it was killed or failed. */
int bench_child_stop(bench_child *c, int timeout_ms);

/* In the child: reports the bound port to the parent. */
void bench_child_ready(int port);

/* In the child: blocks until the parent asks it to stop. */
void bench_child_wait_stop(void);

/* In the child: prints a message on stderr and _exits (no atexit, no stdio
 * flush of the parent's buffers). */
_Noreturn void bench_child_die(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

#endif

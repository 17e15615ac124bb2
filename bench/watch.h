/* bench — a child command run to completion within a deadline, its output
 * read line by line as it comes, each line stamped with its arrival time
 * (bench/allreduce's baselines, bench/train --sync's training runs). */
#ifndef FERRY_BENCH_WATCH_H
#define FERRY_BENCH_WATCH_H

#include <stdbool.h>

enum {
    BENCH_WATCH_OUT = 1 << 0, /* read its stdout; without: its stdout is our stderr */
    BENCH_WATCH_ERR = 1 << 1, /* read its stderr; without: its stderr is ours */
};

/* A line (no newline) from stream 1 (stdout) or 2 (stderr), `t_s` seconds
 * after the command started. */
typedef void (*bench_line_fn)(void *arg, int stream, char *line, double t_s);

/* Runs argv[0] (a path) with `env` applied ("K=V" sets, a bare "K" unsets;
 * NULL-terminated, or NULL) in its own process group, and calls fn (NULL:
 * none) for every line of the streams `flags` names. Past `deadline_s` the group is
 * killed. Returns the exit status, 128 + the signal, 124 at the deadline,
 * or -1 when it could not be started (errno says why). Leave both streams
 * unread for a command that leaves daemons behind (`ferry start`): they
 * would hold the pipes open. */
int bench_watch(char *const argv[], const char *const *env, unsigned flags,
                int deadline_s, bench_line_fn fn, void *arg);

#endif

/* bench/train --async — a straggler made from outside: a child process that
 * stops a worker with SIGSTOP for part of every period and lets it run
 * (SIGCONT) for the rest, so the worker runs at about that fraction of its
 * speed without knowing. Whatever ends the duty cycle ends it with SIGCONT:
 * bench_duty_stop(), the bench exiting (atexit), a signal to the bench, the
 * bench dying (the child's parent-death signal). */
#ifndef FERRY_BENCH_TRAIN_ASYNC_DUTY_H
#define FERRY_BENCH_TRAIN_ASYNC_DUTY_H

#include <stdbool.h>
#include <sys/types.h>

/* Installs the handlers for SIGINT, SIGTERM and SIGHUP and the atexit hook
 * that end a running duty cycle (and, for a signal, what
 * bench_duty_on_signal() set, before the signal takes its default course).
 * Call once, before the first bench_duty_start. */
void bench_duty_install(void);

/* What a signal to the bench runs after the duty cycle has ended:
 * `shutdown_argv` (`ferry shutdown` of the cluster in use) with
 * `shutdown_env`, then `rm -rf home` (NULL: none); shutdown_argv NULL:
 * nothing. All three are borrowed until the next call. */
void bench_duty_on_signal(char *const *shutdown_argv, char *const *shutdown_env,
                          char *home);

/* Starts the duty cycle on `pid`: stopped for stop_ms, running for run_ms,
 * over and over. Returns 0, or -errno when the child could not be forked.
 * One duty cycle at a time. */
int bench_duty_start(pid_t pid, int stop_ms, int run_ms);

/* Ends the duty cycle, waits for its child, and sends the worker SIGCONT.
 * Returns the number of periods it ran, or -1 if none was running. */
long bench_duty_stop(void);

/* The share of the last duty cycle's time the worker spent stopped, as the
 * child measured it (0 before any). */
double bench_duty_stopped_fraction(void);

#endif

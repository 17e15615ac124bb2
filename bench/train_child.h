/* bench/train — child processes whose stdout this process reads line by
 * line, and the few numbers it takes from their flat JSON objects. */
#ifndef FERRY_BENCH_TRAIN_CHILD_H
#define FERRY_BENCH_TRAIN_CHILD_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct bench_proc {
    pid_t pid;
    FILE *out; /* the child's stdout; its stderr is ours */
} bench_proc;

/* Starts argv[0] with `env` applied in the child: "K=V" sets, a bare "K"
 * unsets (NULL-terminated, or NULL). Returns 0 or -errno; a program that
 * cannot be executed exits 127. */
int bench_proc_start(bench_proc *p, char *const argv[], const char *const *env);
/* Closes its stdout and waits: the exit status, or 128 + the signal. */
int bench_proc_wait(bench_proc *p);

/* The number after "key": in a flat JSON object, or NaN. */
double bench_json_number(const char *line, const char *key);
/* The string after "key": into buf ("" when absent); \" and \\ unescaped. */
void bench_json_string(const char *line, const char *key, char *buf, size_t len);

/* Removes `dir` and everything under it (a run's FERRY_HOME); quietly. */
void bench_remove_tree(const char *dir);

#endif

/* bench/allreduce — a baseline in other processes (Open MPI under mpirun,
 * gloo under python3): it prints the same JSON lines as ferry's ranks,
 * which are passed through to stdout and read back for the ratios. */
#ifndef FERRY_BENCH_ALLREDUCE_EXT_H
#define FERRY_BENCH_ALLREDUCE_EXT_H

#include <stddef.h>

#include "allreduce_plan.h"

/* Runs argv[0] (a path) with `env` applied ("K=V" sets, bare "K" unsets;
 * NULL-terminated, or NULL) in its own process group, its stderr ours.
 * Each JSON line of its stdout is copied to ours; busbw[s] gets the median
 * bus bandwidth (GB/s) it reported for plan step s, NaN where none. Past
 * `deadline_s` the whole group is killed. Returns 0 when every step was
 * reported, or -1 with `why` (the baseline's own "skipped" reason, its exit
 * status, the deadline). */
int ar_ext_run(char *const argv[], const char *const *env, int deadline_s,
               const ar_plan *plan, double busbw[AR_MAX_SIZES], char *why, size_t len);

/* `src` made safe to print inside a JSON string (a skip line's reason):
 * quotes, backslashes and control characters become '. */
void ar_json_safe(char *dst, size_t len, const char *src);

/* Open MPI's options for TCP between the addresses `ifaces` names (an
 * interface or a subnet), through the ob1 point-to-point layer: no shared
 * memory (vader), which ferry's ranks do not use either. */
#define AR_MPI_TCP_ARGS(ifaces)                                                          \
    "--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include",    \
        ifaces, "--mca", "oob_tcp_if_include", ifaces

#endif

/* bench/allreduce — ferry's ring all-reduce between local rank processes.
 *
 * Each rank is a forked process with its own rpc_server (ReduceChunk on
 * 127.0.0.1, port 0), rt_hub and one rt_comm. The parent never touches
 * gRPC: it collects the ranks' bound ports through pipes, hands every rank
 * the full list, and reads back each rank's timings. */
#ifndef FERRY_BENCH_ALLREDUCE_RANKS_H
#define FERRY_BENCH_ALLREDUCE_RANKS_H

#include <stddef.h>
#include <stdint.h>

#include "allreduce_plan.h"

#define AR_MAX_RANKS 8

typedef struct ar_ferry_opts {
    int world;
    size_t chunk_bytes; /* 0: the runtime's default */
    int64_t timeout_ms; /* a collective making no progress this long fails */
    int deadline_s;     /* the whole run: past it the ranks are killed */
    /* Where the ranks run (NULL: all on 127.0.0.1 here): rank r listens on
     * host[r], in the network namespace netns[r] (a descriptor for setns;
     * netns NULL: this one) that it joins before it starts. */
    const char *const *host;
    const int *netns;
    /* A directory with server.pem, server.key and ca.pem (tests/tls/mkcerts.sh
     * makes them): every rank speaks mutual TLS with them. NULL: plain text. */
    const char *tls_dir;
} ar_ferry_opts;

/* Runs `plan` on o->world ranks. secs[s][r] is repetition r of step s: the
 * slowest rank's time per all-reduce. Returns 0, or -1 with `err` saying
 * which rank failed and why; no rank outlives the call. */
int ar_ferry_run(const ar_plan *plan, const ar_ferry_opts *o,
                 double secs[AR_MAX_SIZES][AR_MAX_REPS], char *err, size_t errlen);

/* Half of each step's repetitions (half 0: the first, rounded up; 1: the
 * rest) into their places in secs, as ar_ferry_run() times them: two calls
 * around the baselines, so that a machine that speeds up or slows down
 * meanwhile moves both sides. Returns 0 or -1 with `err`. */
int ar_ferry_half(const ar_plan *plan, const ar_ferry_opts *o, int half,
                  double secs[AR_MAX_SIZES][AR_MAX_REPS], char *err, size_t errlen);

/* ---- between the parent and a rank (allreduce_rank.c) ---- */

/* What a rank writes back when it is done (or failed). */
typedef struct ar_rank_result {
    int32_t status; /* 0, or a FERRY_E* code */
    char err[480];
    double secs[AR_MAX_SIZES][AR_MAX_REPS]; /* this rank's own times */
} ar_rank_result;

/* In the forked rank: serves ReduceChunk, writes its port (int32) on
 * `up`, reads every rank's port (int32[world]) from `down`, runs the plan
 * and writes an ar_rank_result on `up`. Never returns. */
_Noreturn void ar_rank_main(int rank, const ar_plan *plan, const ar_ferry_opts *o, int up,
                            int down);

#endif

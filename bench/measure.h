/* bench — the measurements of bench/rpc, each printed as JSON lines.
 *
 * A ferry figure and the baseline it is compared with are measured in
 * alternation (A B B A ...), so that whatever else the machine is doing
 * weighs on both alike and their ratio stays meaningful on a noisy host. */
#ifndef FERRY_BENCH_MEASURE_H
#define FERRY_BENCH_MEASURE_H

#include <stddef.h>

#include "bare_echo.h"
#include "ferry_rpc.h"
#include "opts.h"
#include "raw_tcp.h"
#include "stats.h"

extern const int bench_inflight[BENCH_N_INFLIGHT];
extern const size_t bench_sizes[BENCH_N_SIZES];

enum { BENCH_BARE = 0, BENCH_FERRY = 1 };

typedef struct bench_env {
    const bench_opts *o;
    bench_tcp *tcp;
    bench_bare *bare;
    bench_ferry *ferry;
    /* Preallocated payloads, [bench_data_kind], each of the largest size. */
    float *data[BENCH_N_KINDS];
} bench_env;

typedef struct bench_results {
    bench_summary p50_us[2], p99_us[2];     /* [BENCH_BARE / BENCH_FERRY] */
    bench_summary cps[2][BENCH_N_INFLIGHT]; /* calls/s */
    bench_summary tcp_mbps[BENCH_N_SIZES];  /* raw TCP */
    bench_summary mbps[BENCH_N_CODECS][BENCH_N_KINDS][BENCH_N_SIZES]; /* ferry */
    double lz4_ratio[BENCH_N_KINDS][BENCH_N_SIZES]; /* payload bytes / wire bytes */
} bench_results;

/* Warms both echo channels up (connects them). Returns 0 or -1. */
int bench_warm_up(const bench_env *e);

/* Latency p50/p99 with 1 call in flight, 64 B, bare and ferry alternating. */
int bench_measure_latency(const bench_env *e, bench_results *res);

/* Calls/s at each of bench_inflight[], bare and ferry alternating. */
int bench_measure_rates(const bench_env *e, bench_results *res);

/* MB/s at each of bench_sizes[]: raw TCP alternating with ferry (raw codec,
 * random data), then ferry with the other codec and data combinations. */
int bench_measure_payloads(const bench_env *e, bench_results *res);

#endif

/* bench — what bench/rpc measures, and how much of it (--quick turns the
 * counts down). */
#ifndef FERRY_BENCH_OPTS_H
#define FERRY_BENCH_OPTS_H

#include <stddef.h>

typedef struct bench_opts {
    int reps;         /* repetitions of each measurement (median, min, max) */
    int lat_calls;    /* calls per latency repetition (1 in flight) */
    int rate_calls;   /* calls per calls/s repetition (a quarter at 1 in flight) */
    int payload_reps; /* repetitions of each payload transfer */
    /* Bytes moved per payload repetition: smaller payloads are sent several
     * times back to back so that a repetition is not a single short call. */
    size_t payload_bytes_per_rep;
} bench_opts;

/* The echo message: 64 bytes each way. */
#define BENCH_ECHO_BYTES 64

/* Calls kept in flight for calls/s: 1, 64, 256. */
#define BENCH_N_INFLIGHT 3
/* Payload sizes: 1, 16, 64 MiB. */
#define BENCH_N_SIZES  3
#define BENCH_N_CODECS 2 /* RPC_CODEC_RAW, RPC_CODEC_LZ4 */
#define BENCH_N_KINDS  2 /* BENCH_DATA_RANDOM, BENCH_DATA_GRADIENT */

#endif

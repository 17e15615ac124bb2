/* bench/multihost — the cipher's own cost, the floor under TLS's. */
#ifndef FERRY_BENCH_MULTIHOST_TLS_FLOOR_H
#define FERRY_BENCH_MULTIHOST_TLS_FLOOR_H

#include <stddef.h>

/* One run of the TLS section: the same all-reduce, plain and over TLS. */
typedef struct mhb_tls_run {
    int ranks;
    size_t bytes;
    int allreduces;                /* a side's, warm-ups included */
    double plain_busbw, tls_busbw; /* GB/s, medians */
    double plain_cpu_s, tls_cpu_s; /* the ranks' CPU time, a side, setup included */
} mhb_tls_run;

/* Measures sealing and opening 16 KiB TLS records through OpenSSL, and
 * prints, beside the run's own CPU time a side, the best TLS/plain ratio
 * the cipher alone would allow and the share of TLS's added CPU time the
 * cipher explains. */
void mhb_tls_floor(const mhb_tls_run *run);

#endif

/* bench/multihost — the cipher's own cost, the floor under TLS's. */
#ifndef FERRY_BENCH_MULTIHOST_TLS_FLOOR_H
#define FERRY_BENCH_MULTIHOST_TLS_FLOOR_H

#include <stddef.h>

/* Measures sealing and opening 16 KiB TLS records through OpenSSL and
 * prints, against a plain all-reduce of `bytes` on `ranks` ranks that made
 * `plain_busbw` GB/s, the best TLS/plain ratio the cipher alone would
 * allow on this machine's cores, beside the `tls_over_plain` measured. */
void mhb_tls_floor(int ranks, size_t bytes, double plain_busbw, double tls_over_plain);

#endif

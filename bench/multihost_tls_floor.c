/* bench/multihost — the floor under TLS's cost on this machine: what
 * sealing and opening TLS records alone costs a byte, measured in the same
 * run as the all-reduce, and the best TLS/plain ratio that leaves.
 *
 * A ring all-reduce of S bytes on N ranks sends and receives 2(N-1)/N * S
 * bytes a rank, so TLS adds one seal and one open for 2(N-1) * S bytes in
 * all. The hosts are namespaces of this machine and share its cores, which
 * plain text already keeps busy: that work cannot hide behind waiting, and
 * TLS/plain is at best cpu_plain / (cpu_plain + 2(N-1) * S * c), c being
 * seal + open a byte, cpu_plain the plain all-reduce's CPU time on all
 * ranks. What TLS costs beyond that is copies and bookkeeping around the
 * cipher (gRPC's frame protector), not the cipher. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "multihost_tls_floor.h"
#include "stats.h"

#define RECORD 16384 /* TLS's largest record, what bulk data travels in */
#define TAG    16
#define ROUNDS 5

/* This thread's CPU time: what the ranks' figures are, and unlike wall
 * time, not stretched by whatever else shares the cores. */
static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU seconds a byte to seal then open `bytes` in RECORD records, or NAN. */
static double seal_open_once(const EVP_CIPHER *cipher, uint8_t *plain, uint8_t *sealed,
                             size_t bytes)
{
    static const uint8_t key[32] = {1, 2, 3};
    uint8_t iv[12] = {0}, tag[TAG], aad[13] = {23, 3, 3};
    EVP_CIPHER_CTX *enc = EVP_CIPHER_CTX_new(), *dec = EVP_CIPHER_CTX_new();
    bool ok = enc && dec && EVP_EncryptInit_ex(enc, cipher, NULL, key, NULL) &&
              EVP_DecryptInit_ex(dec, cipher, NULL, key, NULL);
    double t0 = thread_cpu_s();
    for (size_t off = 0; ok && off < bytes; off += RECORD) {
        memcpy(iv + 4, &off, sizeof off); /* a fresh nonce a record, as TLS's */
        int n = 0, m = 0;
        ok = EVP_EncryptInit_ex(enc, NULL, NULL, NULL, iv) &&
             EVP_EncryptUpdate(enc, NULL, &n, aad, sizeof aad) &&
             EVP_EncryptUpdate(enc, sealed, &n, plain + off, RECORD) &&
             EVP_EncryptFinal_ex(enc, sealed + n, &m) &&
             EVP_CIPHER_CTX_ctrl(enc, EVP_CTRL_GCM_GET_TAG, TAG, tag) &&
             EVP_DecryptInit_ex(dec, NULL, NULL, NULL, iv) &&
             EVP_DecryptUpdate(dec, NULL, &n, aad, sizeof aad) &&
             EVP_DecryptUpdate(dec, plain + off, &n, sealed, RECORD) &&
             EVP_CIPHER_CTX_ctrl(dec, EVP_CTRL_GCM_SET_TAG, TAG, tag) &&
             EVP_DecryptFinal_ex(dec, plain + off + n, &m);
    }
    double secs = thread_cpu_s() - t0;
    EVP_CIPHER_CTX_free(enc);
    EVP_CIPHER_CTX_free(dec);
    return ok ? secs / (double)bytes : NAN;
}

/* The median of ROUNDS passes over `bytes` (a fresh buffer the size of
 * the all-reduce's, so that the cache helps no more than it does there). */
static double seal_open_per_byte(const EVP_CIPHER *cipher, size_t bytes)
{
    bytes -= bytes % RECORD;
    uint8_t *plain = calloc(1, bytes), *sealed = malloc(RECORD);
    double v[ROUNDS];
    for (int i = 0; i < ROUNDS; i++)
        v[i] = plain && sealed ? seal_open_once(cipher, plain, sealed, bytes) : NAN;
    free(plain);
    free(sealed);
    return bench_summarize(v, ROUNDS).median;
}

void mhb_tls_floor(const mhb_tls_run *run)
{
    /* TLS 1.3 with OpenSSL's default suites, as gRPC leaves them (it sets
     * only TLS 1.2's list), settles on AES-256-GCM; AES-128-GCM for scale. */
    static const struct {
        const char *name;
        const EVP_CIPHER *(*cipher)(void);
    } ciphers[] = {{"aes-256-gcm", EVP_aes_256_gcm}, {"aes-128-gcm", EVP_aes_128_gcm}};
    /* CPU time an all-reduce, each side: the hosts share this machine's
     * cores and keep them busy, so CPU time, not waiting, sets the pace,
     * and it moves less than wall time when other work shares them. */
    double plain = run->plain_cpu_s / run->allreduces,
           tls = run->tls_cpu_s / run->allreduces;
    double sealed = 2.0 * (run->ranks - 1) * (double)run->bytes; /* bytes, all ranks */
    char p[160];
    snprintf(p, sizeof p, "\"ranks\":%d,\"bytes\":%zu,\"allreduces\":%d", run->ranks,
             run->bytes, run->allreduces);
    bench_emit("cpu_ms_per_allreduce", plain * 1e3, "ms", NULL, "%s,\"link\":\"plain\"",
               p);
    bench_emit("cpu_ms_per_allreduce", tls * 1e3, "ms", NULL, "%s,\"link\":\"tls\"", p);
    bench_emit("cpu_plain_over_tls", plain / tls, "ratio", NULL, "%s", p);
    bench_log("tls cpu: %.1f ms plain, %.1f ms TLS an all-reduce (all ranks, setup "
              "included): plain/TLS %.3f; wall-clock busbw ratio %.3f",
              plain * 1e3, tls * 1e3, plain / tls, run->tls_busbw / run->plain_busbw);
    for (size_t i = 0; i < sizeof ciphers / sizeof ciphers[0]; i++) {
        double c = seal_open_per_byte(ciphers[i].cipher(), run->bytes);
        double cipher = sealed * c;
        double best = plain / (plain + cipher);
        /* No share of nothing: a run where TLS cost no more says so as null. */
        double share = tls > plain ? cipher / (tls - plain) : NAN;
        bench_emit("seal_open_ns_per_byte", c * 1e9, "ns/B", NULL,
                   "%s,\"cipher\":\"%s\",\"record\":%d", p, ciphers[i].name, RECORD);
        bench_emit("best_tls_over_plain", best, "ratio", NULL, "%s,\"cipher\":\"%s\"", p,
                   ciphers[i].name);
        bench_emit("cipher_share_of_tls_cpu", share, "ratio", NULL,
                   "%s,\"cipher\":\"%s\"", p, ciphers[i].name);
        bench_log("tls floor %s: seal+open %.3f ns/B, %.1f ms an all-reduce: best "
                  "TLS/plain %.3f; the cipher is %.0f%% of what TLS adds",
                  ciphers[i].name, c * 1e9, cipher * 1e3, best, 100 * share);
    }
}

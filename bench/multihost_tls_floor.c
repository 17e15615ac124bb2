/* bench/multihost — the floor under TLS's cost on this machine: what
 * sealing and opening TLS records alone costs a byte, measured in the same
 * run as the all-reduce, and the best TLS/plain ratio that leaves.
 *
 * A ring all-reduce of S bytes on N ranks sends and receives 2(N-1)/N * S
 * bytes a rank, so TLS adds one seal and one open for 2(N-1) * S bytes in
 * all. The hosts are namespaces of this machine and share its cores: when
 * plain text already keeps them busy, that work cannot hide behind waiting,
 * and the all-reduce takes at least t_plain + 2(N-1) * S * c / cores, c
 * being seal + open a byte. Anything TLS costs beyond that is copies and
 * bookkeeping around the cipher, not the cipher. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "multihost_tls_floor.h"
#include "stats.h"

#define RECORD 16384 /* TLS's largest record, what bulk data travels in */
#define TAG    16
#define ROUNDS 5

/* Seconds a byte to seal then open `bytes` in RECORD records, or NAN. */
static double seal_open_once(const EVP_CIPHER *cipher, uint8_t *plain, uint8_t *sealed,
                             size_t bytes)
{
    static const uint8_t key[32] = {1, 2, 3};
    uint8_t iv[12] = {0}, tag[TAG], aad[13] = {23, 3, 3};
    EVP_CIPHER_CTX *enc = EVP_CIPHER_CTX_new(), *dec = EVP_CIPHER_CTX_new();
    bool ok = enc && dec && EVP_EncryptInit_ex(enc, cipher, NULL, key, NULL) &&
              EVP_DecryptInit_ex(dec, cipher, NULL, key, NULL);
    uint64_t t0 = bench_now_ns();
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
    double secs = (double)(bench_now_ns() - t0) * 1e-9;
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

void mhb_tls_floor(int ranks, size_t bytes, double plain_busbw, double tls_over_plain)
{
    /* TLS 1.3 with OpenSSL's default suites, as gRPC leaves them (it sets
     * only TLS 1.2's list), settles on AES-256-GCM; AES-128-GCM for scale. */
    static const struct {
        const char *name;
        const EVP_CIPHER *(*cipher)(void);
    } ciphers[] = {{"aes-256-gcm", EVP_aes_256_gcm}, {"aes-128-gcm", EVP_aes_128_gcm}};
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    double bus = 2.0 * (ranks - 1) / ranks;
    /* The plain all-reduce's seconds, and a byte of its payload. */
    double t_plain = (double)bytes * bus / (plain_busbw * 1e9);
    char p[160];
    snprintf(p, sizeof p, "\"ranks\":%d,\"bytes\":%zu,\"cores\":%ld", ranks, bytes, cores);
    bench_emit("plain_ns_per_byte", t_plain * 1e9 / (double)bytes, "ns/B", NULL, "%s", p);
    for (size_t i = 0; i < sizeof ciphers / sizeof ciphers[0]; i++) {
        double c = seal_open_per_byte(ciphers[i].cipher(), bytes);
        double added = 2.0 * (ranks - 1) * (double)bytes * c / (double)(cores > 0 ? cores : 1);
        double best = t_plain / (t_plain + added);
        bench_emit("seal_open_ns_per_byte", c * 1e9, "ns/B", NULL,
                   "%s,\"cipher\":\"%s\",\"record\":%d", p, ciphers[i].name, RECORD);
        bench_emit("best_tls_over_plain", best, "ratio", NULL,
                   "%s,\"cipher\":\"%s\",\"measured\":%.3f", p, ciphers[i].name,
                   tls_over_plain);
        bench_log("tls floor %s: seal+open %.3f ns/B, plain %.3f ns/B: best TLS/plain "
                  "%.3f on %ld cores (measured %.3f)",
                  ciphers[i].name, c * 1e9, t_plain * 1e9 / (double)bytes, best, cores,
                  tls_over_plain);
    }
}

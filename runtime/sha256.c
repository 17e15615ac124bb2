/* SHA-256 of module bytes: the key of the content-addressed module cache,
 * and of the data files shipped to workers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "runtime.h"

/* A read of this size keeps a call's cost out of the hash's time. */
#define SHA256_READ (1u << 16)

static void to_hex(const unsigned char *md, unsigned int n, char hex[RT_SHA256_HEX])
{
    static const char digits[] = "0123456789abcdef";
    for (unsigned int i = 0; i < n; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[2 * n] = '\0';
}

void rt_sha256_hex(const void *data, size_t len, char hex[RT_SHA256_HEX])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    /* Only allocation failure inside OpenSSL can fail a one-shot digest;
     * a worker that cannot hash cannot verify anything, so it stops. */
    if (!EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) || n != 32) {
        fputs("ferry: SHA-256 failed (out of memory?)\n", stderr);
        abort();
    }
    to_hex(md, n, hex);
}

int rt_sha256_fd(int fd, uint64_t size, char hex[RT_SHA256_HEX])
{
    /* A file can be larger than memory, so it is hashed a piece at a time;
     * pread leaves the descriptor's offset to its owner. */
    unsigned char *buf = malloc(SHA256_READ);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int rc = buf && md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) ? 0 : FERRY_ENOMEM;
    for (uint64_t at = 0; rc == 0 && at < size;) {
        size_t want = size - at < SHA256_READ ? (size_t)(size - at) : SHA256_READ;
        ssize_t n = pread(fd, buf, want, (off_t)at);
        if (n <= 0)
            rc = n < 0 ? -errno : FERRY_EIO;
        else if (!EVP_DigestUpdate(md, buf, (size_t)n))
            rc = FERRY_EIO;
        at += n > 0 ? (uint64_t)n : 0;
    }
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (rc == 0 && (!EVP_DigestFinal_ex(md, d, &len) || len != 32))
        rc = FERRY_EIO;
    EVP_MD_CTX_free(md);
    free(buf);
    if (rc == 0)
        to_hex(d, len, hex);
    return rc;
}

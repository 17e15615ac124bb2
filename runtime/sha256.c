/* SHA-256 of module bytes: the key of the content-addressed module cache. */
#include <stdio.h>
#include <stdlib.h>

#include <openssl/evp.h>

#include "runtime.h"

void rt_sha256_hex(const void *data, size_t len, char hex[RT_SHA256_HEX])
{
    static const char digits[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    /* Only allocation failure inside OpenSSL can fail a one-shot digest;
     * a worker that cannot hash cannot verify anything, so it stops. */
    if (!EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) || n != 32) {
        fputs("ferry: SHA-256 failed (out of memory?)\n", stderr);
        abort();
    }
    for (unsigned int i = 0; i < n; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[2 * n] = '\0';
}

/* TLS for every connection of the process: a process belongs to one
 * cluster, so what its channels and servers speak is set once, before any
 * is made, and each channel, server and peer link picks it up here rather
 * than through every layer's options. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc_security.h>

#include "rpc_int.h"

/* A PEM file is a few kilobytes; this bounds what a wrong path costs. */
#define PEM_MAX (1 << 20)

static pthread_mutex_t tls_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    bool on;
    char *cert, *key, *ca; /* PEM text; any may be NULL */
} tls;

static char *read_pem(const char *path, const char *what, const char *marker, char *err,
                      size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(PEM_MAX + 1);
    size_t n = buf ? fread(buf, 1, PEM_MAX + 1, f) : 0;
    bool bad = ferror(f);
    fclose(f);
    if (!buf || bad || n > PEM_MAX) {
        snprintf(err, errlen, "%s %s: %s", what, path,
                 !buf  ? "out of memory"
                 : bad ? "cannot read it"
                       : "larger than 1 MiB");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (!strstr(buf, marker)) {
        snprintf(err, errlen, "%s %s: not PEM (no '%s' line)", what, path, marker);
        free(buf);
        return NULL;
    }
    return buf;
}

static void clear_locked(void)
{
    free(tls.cert);
    if (tls.key) /* a private key: not left in freed memory */
        memset(tls.key, 0, strlen(tls.key));
    free(tls.key);
    free(tls.ca);
    memset(&tls, 0, sizeof tls);
}

int rpc_tls_use(const rpc_tls_files *f, char *err, size_t errlen)
{
    if (f && (!f->cert != !f->key)) {
        snprintf(err, errlen, "%s",
                 f->cert ? "a certificate needs its key" : "a key needs its certificate");
        return FERRY_EINVAL;
    }
    char *cert = NULL, *key = NULL, *ca = NULL;
    bool on = f && (f->cert || f->ca);
    char why[256];
    if (on && ((f->cert &&
                (!(cert = read_pem(f->cert, "certificate", "CERTIFICATE", err, errlen)) ||
                 !(key = read_pem(f->key, "key", "PRIVATE KEY", err, errlen)))) ||
               (f->ca && !(ca = read_pem(f->ca, "CA", "CERTIFICATE", err, errlen))))) {
        free(cert);
        free(key);
        return FERRY_EINVAL;
    }
    /* A certificate no peer would take fails here, where its file is named,
     * not at every peer's handshake. */
    if (cert && rpc_tls_check_own(cert, ca, why, sizeof why)) {
        snprintf(err, errlen, "certificate %s: %s", f->cert, why);
        free(cert);
        free(key);
        free(ca);
        return FERRY_EINVAL;
    }
    pthread_mutex_lock(&tls_mu);
    clear_locked();
    tls.on = on;
    tls.cert = cert;
    tls.key = key;
    tls.ca = ca;
    pthread_mutex_unlock(&tls_mu);
    return 0;
}

bool rpc_tls_enabled(void)
{
    return rpc_tls_state(NULL, NULL);
}

bool rpc_tls_state(bool *has_cert, char **ca)
{
    pthread_mutex_lock(&tls_mu);
    bool on = tls.on;
    if (has_cert)
        *has_cert = tls.cert != NULL;
    if (ca)
        *ca = base_strdup(tls.ca);
    pthread_mutex_unlock(&tls_mu);
    return on;
}

/* No cipher or buffer settings go with these credentials: what TLS costs a
 * byte here is gRPC's SSL frame protector (records of at most 16 KiB, which
 * grpc.tsi.max_frame_size can only lower, copied through a BIO pair and
 * 8 KiB staging slices) and the cipher itself (AES-256-GCM, about as fast as
 * AES-128-GCM and ChaCha20 with AES-NI). Larger HTTP/2 frames, TCP read
 * chunks or write buffers, or another TLS 1.3 suite, left TLS's CPU time on
 * bench/multihost's all-reduce where it was (within its run-to-run spread). */
grpc_channel_credentials *rpc_tls_channel_credentials(void)
{
    pthread_mutex_lock(&tls_mu);
    grpc_channel_credentials *c;
    if (!tls.on) {
        c = grpc_insecure_credentials_create();
    } else {
        /* The CA checks the worker; with none, the system's roots do. Our
         * certificate, when we have one, answers a worker that asks. */
        grpc_ssl_pem_key_cert_pair pair = {.private_key = tls.key,
                                           .cert_chain = tls.cert};
        c = grpc_ssl_credentials_create(tls.ca, tls.cert ? &pair : NULL, NULL, NULL);
    }
    pthread_mutex_unlock(&tls_mu);
    return c;
}

grpc_server_credentials *rpc_tls_server_credentials(void)
{
    pthread_mutex_lock(&tls_mu);
    grpc_server_credentials *c = NULL;
    if (!tls.on) {
        c = grpc_insecure_server_credentials_create();
    } else if (tls.cert) {
        /* Given the CA, a worker takes only clients it signed: mutual TLS. */
        grpc_ssl_pem_key_cert_pair pair = {.private_key = tls.key,
                                           .cert_chain = tls.cert};
        c = grpc_ssl_server_credentials_create_ex(
            tls.ca, &pair, 1,
            tls.ca ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                   : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
            NULL);
    }
    pthread_mutex_unlock(&tls_mu);
    return c;
}

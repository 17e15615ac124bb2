/* Why a worker's certificate was refused. gRPC says only "certificate
 * verify failed": one handshake of our own, that accepts anything, fetches
 * the worker's chain, and OpenSSL's verifier, run on it as gRPC's was (this
 * process's CA, the target's host), names the reason. Certificates are
 * read with OpenSSL rather than by hand. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "rpc_int.h"

#define PROBE_MS 1000

/* "host:port", "[v6]:port" into its parts. */
static bool split_target(const char *target, char *host, size_t hostlen, char *port,
                         size_t portlen)
{
    const char *colon = strrchr(target, ':');
    if (!colon || !colon[1] || strlen(colon + 1) >= portlen)
        return false;
    const char *h = target;
    size_t n = (size_t)(colon - target);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        h++;
        n -= 2;
    }
    if (!n || n >= hostlen)
        return false;
    memcpy(host, h, n);
    host[n] = '\0';
    strcpy(port, colon + 1);
    return true;
}

static int connect_to(const char *host, const char *port)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(host, port, &hints, &ai) != 0)
        return -1;
    int fd = -1;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            continue;
        int rc = connect(fd, a->ai_addr, a->ai_addrlen);
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (rc != 0 &&
            (errno != EINPROGRESS || poll(&p, 1, PROBE_MS) != 1 ||
             getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr)) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd >= 0) { /* the handshake blocks, for PROBE_MS at most a read */
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        struct timeval tv = {.tv_sec = PROBE_MS / 1000,
                             .tv_usec = PROBE_MS % 1000 * 1000};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
    return fd;
}

/* The CA's certificates (PEM text), or the system's roots without one. */
static X509_STORE *trust(const char *ca_pem)
{
    X509_STORE *store = X509_STORE_new();
    if (!store)
        return NULL;
    if (!ca_pem) {
        X509_STORE_set_default_paths(store);
        return store;
    }
    BIO *bio = BIO_new_mem_buf(ca_pem, -1);
    X509 *x;
    while (bio && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
        X509_STORE_add_cert(store, x);
        X509_free(x);
    }
    BIO_free(bio);
    ERR_clear_error(); /* the end of the PEM text reads as an error */
    return store;
}

static void when(const ASN1_TIME *t, char *buf, size_t len)
{
    BIO *b = BIO_new(BIO_s_mem());
    int n = b && ASN1_TIME_print(b, t) ? BIO_read(b, buf, (int)len - 1) : 0;
    buf[n > 0 ? n : 0] = '\0';
    BIO_free(b);
}

/* `cert` checked as a peer's would be: against `ca_pem` and, when `host`
 * is given, for that host. 0, or OpenSSL's X509_V_ERR_* code. */
static int verify(X509 *cert, STACK_OF(X509) * chain, const char *ca_pem,
                  const char *host)
{
    X509_STORE *store = trust(ca_pem);
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    int err = X509_V_ERR_OUT_OF_MEM;
    if (store && ctx && X509_STORE_CTX_init(ctx, store, cert, chain)) {
        X509_VERIFY_PARAM *vp = X509_STORE_CTX_get0_param(ctx);
        unsigned char ip[16];
        if (host &&
            (inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1))
            X509_VERIFY_PARAM_set1_ip_asc(vp, host);
        else if (host)
            X509_VERIFY_PARAM_set1_host(vp, host, 0);
        err = X509_verify_cert(ctx) == 1 ? 0 : X509_STORE_CTX_get_error(ctx);
    }
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    return err;
}

/* A sentence for a verification error of the certificate `whose`. */
static void say(int err, X509 *cert, const char *whose, const char *host, char *out,
                size_t len)
{
    char t[64];
    switch (err) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
        when(X509_get0_notAfter(cert), t, sizeof t);
        snprintf(out, len, "%s certificate has expired (valid until %s)", whose, t);
        break;
    case X509_V_ERR_CERT_NOT_YET_VALID:
        when(X509_get0_notBefore(cert), t, sizeof t);
        snprintf(out, len, "%s certificate is not valid yet (valid from %s)", whose, t);
        break;
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
        snprintf(out, len, "%s certificate is not signed by the CA given (--tls-ca)",
                 whose);
        break;
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
        snprintf(out, len,
                 "%s certificate is not for %s (its subjectAltName does not name it)",
                 whose, host);
        break;
    default:
        snprintf(out, len, "%s certificate was refused: %s", whose,
                 X509_verify_cert_error_string(err));
    }
}

bool rpc_tls_probe(const char *target, const char *ca_pem, char *out, size_t len)
{
    char host[256], port[16];
    if (!split_target(target, host, sizeof host, port, sizeof port))
        return false;
    int fd = connect_to(host, port);
    if (fd < 0)
        return false;
    bool said = false;
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl = ctx ? SSL_new(ctx) : NULL;
    if (ssl && SSL_set_fd(ssl, fd)) {
        SSL_set_verify(ssl, SSL_VERIFY_NONE, NULL);
        SSL_connect(ssl); /* a worker that wants our certificate may end it: the
                             worker's chain came first */
        X509 *cert = SSL_get1_peer_certificate(ssl);
        int err = cert ? verify(cert, SSL_get_peer_cert_chain(ssl), ca_pem, host) : 0;
        if (err) {
            say(err, cert, "the worker's", host, out, len);
            said = true;
        }
        X509_free(cert);
    }
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    ERR_clear_error();
    close(fd);
    return said;
}

int rpc_tls_check_own(const char *cert_pem, const char *ca_pem, char *out, size_t len)
{
    BIO *bio = BIO_new_mem_buf(cert_pem, -1);
    X509 *cert = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
    STACK_OF(X509) *rest = sk_X509_new_null();
    X509 *x;
    while (cert && rest && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL)))
        sk_X509_push(rest, x);
    BIO_free(bio);
    ERR_clear_error();
    int rc = 0;
    if (!cert || !rest) {
        snprintf(out, len, "no certificate in it");
        rc = FERRY_EINVAL;
    } else {
        /* Without a CA, only the dates are this process's to check. */
        int err = verify(cert, rest, ca_pem, NULL);
        if (!ca_pem && err != X509_V_ERR_CERT_HAS_EXPIRED &&
            err != X509_V_ERR_CERT_NOT_YET_VALID)
            err = 0;
        if (err) {
            say(err, cert, "this", NULL, out, len);
            rc = FERRY_EINVAL;
        }
    }
    sk_X509_pop_free(rest, X509_free);
    X509_free(cert);
    return rc;
}

int rpc_tls_hello(int fd)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL *ssl = ctx ? SSL_new(ctx) : NULL;
    int rc = FERRY_EUNAVAIL;
    /* Non-blocking: the first step sends the hello and wants the answer. */
    if (ssl && SSL_set_fd(ssl, fd) && SSL_connect(ssl) < 0 &&
        SSL_get_error(ssl, -1) == SSL_ERROR_WANT_READ)
        rc = 0;
    SSL_free(ssl); /* no close_notify: the caller reads the answer */
    SSL_CTX_free(ctx);
    ERR_clear_error();
    return rc;
}

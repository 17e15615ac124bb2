/* gRPC reports a failed handshake as UNAVAILABLE, "failed to connect to all
 * addresses; last error: ...", with OpenSSL's reason when the handshake
 * failed on this side and only "Socket closed" when the worker ended it.
 * What can be told apart from here is said; what cannot is said as likely. */
#include <stdlib.h>
#include <string.h>

#include "rpc_int.h"

static bool has(const char *s, const char *what)
{
    return strstr(s, what) != NULL;
}

char *rpc_tls_explain(rpc_channel *ch, grpc_status_code status, const char *detail)
{
    if (status != GRPC_STATUS_UNAVAILABLE || !detail || !has(detail, "failed to connect"))
        return NULL;
    bool has_cert = false;
    char *ca = NULL;
    bool tls = rpc_tls_state(&has_cert, &ca);
    char *why = NULL;
    if (tls && has(detail, "certificate verify failed")) {
        if (!ch->tls_probed) {
            char text[512];
            ch->tls_probed = true;
            if (rpc_tls_probe(ch->target, ca, text, sizeof text))
                ch->tls_why = base_strdup(text);
        }
        why =
            base_strdup(ch->tls_why ? ch->tls_why
                                    : "the worker's certificate was refused (certificate "
                                      "verify failed)");
    } else if (tls &&
               (has(detail, "wrong version number") ||
                has(detail, "packet length too long") ||
                has(detail, "record layer failure") || has(detail, "http request"))) {
        why =
            base_strdup("the worker does not speak TLS; this client does (was the worker "
                        "started without --tls-cert?)");
    } else if (tls && has(detail, "Socket closed")) {
        why = base_strdup(
            has_cert ? "the worker ended the TLS handshake: it likely refused this "
                       "client's certificate (expired, or not signed by its CA: see the "
                       "worker's log)"
                     : "the worker ended the TLS handshake: it likely asks for a client "
                       "certificate (mutual TLS) and this client has none (--tls-cert, "
                       "--tls-key)");
    } else if (!tls && has(detail, "Socket closed")) {
        why =
            base_strdup("the worker closed the connection at once: it likely speaks TLS "
                        "and this client does not (give the cluster's --tls-cert, "
                        "--tls-key and --tls-ca)");
    }
    free(ca);
    return why;
}

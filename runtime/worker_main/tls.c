/* `ferry worker --tls-*` and `--insecure`. */
#include <stdio.h>

#include "config/config.h"
#include "wm_int.h"

int wm_tls(const wm_options *o, const char *host)
{
    if (o->tls.cert) {
        char err[512] = "";
        if (rpc_tls_use(&o->tls, err, sizeof err)) {
            fprintf(stderr, "ferry worker: TLS: %s\n", err);
            return EXIT_FAIL;
        }
        return -1;
    }
    /* A wildcard address (0.0.0.0, [::]) is reachable from other hosts too. */
    if (!o->insecure && !conf_is_loopback(host))
        fprintf(stderr,
                "ferry worker: warning: listening on %s without TLS: calls, their data "
                "and the cluster token cross the network in plain text (give "
                "--tls-cert, --tls-key and --tls-ca, or --insecure to run so quietly)\n",
                host);
    return -1;
}

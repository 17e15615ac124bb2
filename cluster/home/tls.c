/* A cluster's TLS settings, as this process's rpc speaks them. */
#include <stdio.h>

#include "home.h"
#include "rpc/rpc.h"

int home_tls_use(const conf_cluster *conf, char *err, size_t errlen)
{
    rpc_tls_files f = {.cert = conf->tls_cert, .key = conf->tls_key, .ca = conf->tls_ca};
    char why[512] = "";
    int rc = rpc_tls_use(&f, why, sizeof why);
    if (rc)
        snprintf(err, errlen, "TLS: %s", why);
    return rc;
}

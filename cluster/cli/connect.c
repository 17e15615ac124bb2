/* Connecting to the workers a cluster file (or a rendezvous) lists, with
 * its timeouts and its TLS. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

int cli_cluster_connect(const conf_cluster *conf, const char *token, bool heartbeat,
                        cluster **out)
{
    char err[600];
    int rc = home_tls_use(conf, err, sizeof err);
    if (rc) {
        fprintf(stderr, "ferry: %s\n", err);
        return rc;
    }
    const char **targets = calloc(conf->n_workers ? conf->n_workers : 1, sizeof *targets);
    if (!targets)
        return FERRY_ENOMEM;
    for (size_t i = 0; i < conf->n_workers; i++)
        targets[i] = conf->workers[i].address;
    cluster_opts o = {.token = token,
                      .call_timeout_ms = conf->call_timeout_ms,
                      .ping_timeout_ms = conf->ping_timeout_ms,
                      .heartbeat_ms =
                          heartbeat && conf->heartbeat_ms ? conf->heartbeat_ms : -1,
                      .max_payload = (size_t)conf->max_message_bytes,
                      /* room for workers `ferry start --add` adds while it runs */
                      .max_workers = CONF_MAX_WORKERS};
    rc = cluster_create(targets, conf->n_workers, &o, out);
    free(targets);
    return rc;
}

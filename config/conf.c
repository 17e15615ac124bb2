/* The cluster description in memory: defaults, workers, copies, release. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"

void conf_defaults(conf_cluster *c)
{
    memset(c, 0, sizeof *c);
    /* Owned like every other string so that conf_fini() and conf_load()
     * can free and replace it; NULL only when out of memory. */
    c->listen = strdup("127.0.0.1");
    c->base_port = CONF_DEFAULT_BASE_PORT;
    c->call_timeout_ms = 60000;
    c->ping_timeout_ms = 1000;
    c->heartbeat_ms = 1000;
    c->start_timeout_ms = 10000;
    c->shutdown_grace_ms = 5000;
    c->threads = 0;
    c->liveness_timeout_ms = 30000;
    c->restart_backoff_ms = 1000;
    c->restart_backoff_max_ms = 60000;
    c->max_message_bytes = (int64_t)1 << 30;
    c->max_module_bytes = (int64_t)256 << 20;
    c->log_max_bytes = (int64_t)10 << 20;
    c->log_keep = 3;
    c->wedge_grace_ms = 60000;
    c->stall_warn_ms = 60000;
    c->stall_abort_ms = 0;
}

static void worker_fini(conf_worker *w)
{
    free(w->address);
    free(w->host);
    memset(w, 0, sizeof *w);
}

void conf_fini(conf_cluster *c)
{
    if (!c)
        return;
    free(c->listen);
    free(c->token_file);
    free(c->tls_cert);
    free(c->tls_key);
    free(c->tls_ca);
    for (size_t i = 0; i < c->n_workers; i++)
        worker_fini(&c->workers[i]);
    free(c->workers);
    memset(c, 0, sizeof *c);
}

static int worker_set(conf_worker *w, const char *address, const char *host, int port)
{
    w->address = strdup(address);
    w->host = strdup(host);
    w->port = port;
    w->local = conf_is_loopback(host);
    if (!w->address || !w->host) {
        worker_fini(w);
        return FERRY_ENOMEM;
    }
    return 0;
}

int conf_add_worker(conf_cluster *c, const char *address, char *err, size_t errlen)
{
    char host[CONF_HOST_MAX + 1];
    int port;
    int rc = conf_parse_address(address, host, sizeof host, &port, 1, err, errlen);
    if (rc)
        return rc;
    if (c->n_workers >= CONF_MAX_WORKERS)
        return base_errf(err, errlen, FERRY_EINVAL,
                         "more than %d workers: a cluster has at most %d",
                         CONF_MAX_WORKERS, CONF_MAX_WORKERS);
    conf_worker *ws = realloc(c->workers, (c->n_workers + 1) * sizeof *ws);
    if (!ws)
        return base_errf(err, errlen, FERRY_ENOMEM, "out of memory");
    c->workers = ws;
    memset(&ws[c->n_workers], 0, sizeof *ws);
    rc = worker_set(&ws[c->n_workers], address, host, port);
    if (rc)
        return base_errf(err, errlen, rc, "out of memory");
    c->n_workers++;
    return 0;
}

int conf_copy(conf_cluster *dst, const conf_cluster *src)
{
    *dst = *src;
    dst->listen = base_strdup(src->listen);
    dst->token_file = base_strdup(src->token_file);
    dst->tls_cert = base_strdup(src->tls_cert);
    dst->tls_key = base_strdup(src->tls_key);
    dst->tls_ca = base_strdup(src->tls_ca);
    dst->workers = NULL;
    dst->n_workers = 0;
    if ((src->listen && !dst->listen) || (src->token_file && !dst->token_file) ||
        (src->tls_cert && !dst->tls_cert) || (src->tls_key && !dst->tls_key) ||
        (src->tls_ca && !dst->tls_ca))
        goto fail;
    if (src->n_workers) {
        dst->workers = calloc(src->n_workers, sizeof *dst->workers);
        if (!dst->workers)
            goto fail;
        for (size_t i = 0; i < src->n_workers; i++) {
            const conf_worker *w = &src->workers[i];
            if (worker_set(&dst->workers[i], w->address, w->host, w->port))
                goto fail;
            dst->workers[i].attach = w->attach;
            dst->workers[i].line = w->line;
            dst->n_workers++;
        }
    }
    return 0;
fail:
    conf_fini(dst);
    return FERRY_ENOMEM;
}

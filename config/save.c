/* Writing a cluster file: every field, atomically, readable by conf_load(). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "config_int.h"

/* inih trims values and cuts them at " ;" (an inline comment) or a line
 * end, and reads at most INI_MAX_LINE - 1 characters a line: a value that
 * would not come back from conf_load() unchanged is refused, not mangled. */
static bool savable(const char *key, const char *v)
{
    size_t n = strlen(v);
    if (n == 0 || strlen(key) + 3 + n > INI_MAX_LINE - 1)
        return false;
    if (v[0] == ' ' || v[0] == '\t' || v[n - 1] == ' ' || v[n - 1] == '\t')
        return false;
    for (size_t i = 0; i < n; i++) {
        if (v[i] == '\n' || v[i] == '\r')
            return false;
        if (v[i] == ';' && i > 0 && (v[i - 1] == ' ' || v[i - 1] == '\t'))
            return false;
    }
    return true;
}

/* The file-name keys, made absolute: conf_load() reads a relative one
 * against the file's directory; the one in memory is relative to the
 * current one. */
#define N_PATHS 4

static int absolute_paths(const conf_cluster *c, const char *names[N_PATHS],
                          char *abs[N_PATHS])
{
    const char *vals[N_PATHS] = {c->token_file, c->tls_cert, c->tls_key, c->tls_ca};
    static const char *const keys[N_PATHS] = {"token_file", "tls_cert", "tls_key",
                                              "tls_ca"};
    for (size_t i = 0; i < N_PATHS; i++) {
        names[i] = keys[i];
        abs[i] = NULL;
        int rc = vals[i] ? conf_absolute_path(NULL, vals[i], &abs[i]) : 0;
        if (rc)
            return rc;
        if (abs[i] && !savable(keys[i], abs[i]))
            return FERRY_EINVAL;
    }
    return 0;
}

static int format(const conf_cluster *c, char **text, size_t *len)
{
    const char *keys[N_PATHS];
    char *paths[N_PATHS] = {0};
    const char *listen = c->listen ? c->listen : "127.0.0.1";
    if (!conf_values_valid(c))
        return FERRY_EINVAL;
    int rc = absolute_paths(c, keys, paths);
    if (!rc && !savable("listen", listen))
        rc = FERRY_EINVAL;
    for (size_t i = 0; !rc && i < c->n_workers; i++)
        if (!savable("worker", c->workers[i].address))
            rc = FERRY_EINVAL;
    FILE *f = rc ? NULL : open_memstream(text, len);
    if (!f) {
        for (size_t i = 0; i < N_PATHS; i++)
            free(paths[i]);
        return rc ? rc : FERRY_ENOMEM;
    }
    fprintf(f, "[cluster]\n");
    fprintf(f, "listen = %s\n", listen);
    fprintf(f, "base_port = %d\n", c->base_port);
    for (size_t i = 0; i < N_PATHS; i++)
        if (paths[i])
            fprintf(f, "%s = %s\n", keys[i], paths[i]);
    for (size_t i = 0; i < N_PATHS; i++)
        free(paths[i]);
    if (c->insecure)
        fprintf(f, "insecure = 1\n");
    fprintf(f, "call_timeout_ms = %" PRId64 "\n", c->call_timeout_ms);
    fprintf(f, "ping_timeout_ms = %" PRId64 "\n", c->ping_timeout_ms);
    fprintf(f, "heartbeat_ms = %" PRId64 "\n", c->heartbeat_ms);
    fprintf(f, "start_timeout_ms = %" PRId64 "\n", c->start_timeout_ms);
    fprintf(f, "shutdown_grace_ms = %" PRId64 "\n", c->shutdown_grace_ms);
    fprintf(f, "threads = %d\n", c->threads);
    fprintf(f, "liveness_timeout_ms = %" PRId64 "\n", c->liveness_timeout_ms);
    fprintf(f, "restart_backoff_ms = %" PRId64 "\n", c->restart_backoff_ms);
    fprintf(f, "restart_backoff_max_ms = %" PRId64 "\n", c->restart_backoff_max_ms);
    fprintf(f, "max_message_bytes = %" PRId64 "\n", c->max_message_bytes);
    fprintf(f, "max_module_bytes = %" PRId64 "\n", c->max_module_bytes);
    fprintf(f, "log_max_bytes = %" PRId64 "\n", c->log_max_bytes);
    fprintf(f, "log_keep = %d\n", c->log_keep);
    fprintf(f, "wedge_grace_ms = %" PRId64 "\n", c->wedge_grace_ms);
    fprintf(f, "metrics_port = %d\n", c->metrics_port);
    fprintf(f, "stall_warn_ms = %" PRId64 "\n", c->stall_warn_ms);
    fprintf(f, "stall_abort_ms = %" PRId64 "\n", c->stall_abort_ms);
    fprintf(f, "\n[workers]\n");
    for (size_t i = 0; i < c->n_workers; i++)
        fprintf(f, "%s = %s\n", c->workers[i].attach ? "attach" : "worker",
                c->workers[i].address);
    if (c->supervisor_pid > 0)
        fprintf(f, "\n[state]\nsupervisor_pid = %d\n", c->supervisor_pid);
    if (ferror(f)) {
        fclose(f);
        free(*text);
        *text = NULL;
        return FERRY_ENOMEM;
    }
    return fclose(f) == 0 ? 0 : FERRY_ENOMEM;
}

int conf_save(const conf_cluster *c, const char *path)
{
    char *text = NULL;
    size_t len = 0;
    int rc = format(c, &text, &len);
    if (rc)
        return rc;
    rc = base_write_atomic(path, text, len, true);
    free(text);
    return rc;
}

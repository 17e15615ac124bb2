/* FERRY_HOME: where a cluster keeps its state, and opening the cluster that
 * runs there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int cli_home_init(home_paths *h, const char *cmd)
{
    char dir[CLI_PATH_MAX];
    int rc = conf_home(dir, sizeof dir);
    if (rc) {
        memset(h, 0, sizeof *h);
        cli_err(cmd, "cannot tell where FERRY_HOME is (%s): set FERRY_HOME or HOME",
                ferry_strerror(rc));
        return rc;
    }
    rc = home_paths_init(h, dir);
    if (rc)
        cli_err(cmd, "FERRY_HOME path too long: %s", h->dir);
    return rc;
}

int cli_running_open(cli_running *r, const home_paths *h, const char *cmd, bool quiet,
                     bool orphans)
{
    if (cli_remote_given())
        return cli_remote_open(r, h, cmd);
    memset(r, 0, sizeof *r);
    conf_defaults(&r->conf);
    /* The lock is the truth: a cluster.ini left by a crashed supervisor
     * describes nothing that runs. */
    if ((!orphans && !conf_lock_held(h->dir)) || access(h->state, F_OK) != 0) {
        if (!quiet)
            cli_err(cmd,
                    "no cluster is running under FERRY_HOME=%s: start one with "
                    "`ferry start N`",
                    h->dir);
        conf_fini(&r->conf);
        return FERRY_ENOENT;
    }
    char err[CONF_ERR_LEN] = "";
    int rc = conf_load(&r->conf, h->state, err, sizeof err);
    if (rc) {
        cli_err(cmd, "cannot read the cluster state: %s",
                err[0] ? err : ferry_strerror(rc));
        goto fail;
    }
    const char *token_file = r->conf.token_file ? r->conf.token_file : h->token;
    rc = conf_token_read(token_file, r->token, sizeof r->token, err, sizeof err);
    if (rc) {
        cli_err(cmd, "cannot read the cluster token %s: %s", token_file,
                err[0] ? err : ferry_strerror(rc));
        goto fail;
    }
    rc = cli_cluster_connect(&r->conf, r->token, true, &r->cl);
    if (rc) {
        cli_err(cmd, "cannot connect to the cluster: %s", ferry_strerror(rc));
        goto fail;
    }
    return 0;
fail:
    conf_fini(&r->conf);
    return rc;
}

void cli_running_close(cli_running *r)
{
    cluster_destroy(r->cl);
    conf_fini(&r->conf);
    memset(r->token, 0, sizeof r->token);
    r->cl = NULL;
}

/* The workers that answer, malloc'd, when at least `min` do; else NULL. */
static bool *answering(cluster *cl, long min)
{
    const cluster_worker *w;
    cluster_survey(cl, false, &w);
    size_t n = cluster_size(cl);
    long up = 0;
    for (size_t i = 0; i < n; i++)
        up += w[i].ping != NULL;
    bool *which = up >= min ? malloc(n * sizeof *which) : NULL;
    for (size_t i = 0; which && i < n; i++)
        which[i] = w[i].ping != NULL;
    return which;
}

int cli_running_ship_some(cli_running *r, const home_paths *h, const char *cmd,
                          const char *shown, const void *bytes, size_t len, long min,
                          cluster_module *m)
{
    char err[1024] = "";
    if (cli_running_open(r, h, cmd, false, false))
        return CLI_FAIL;
    if (cli_check_module_size(shown, len, &r->conf, err, sizeof err)) {
        cli_err(cmd, "%s", err);
        return CLI_FAIL;
    }
    bool *which = NULL;
    if (cluster_wait_ready(r->cl, r->conf.ping_timeout_ms * 3) &&
        !(min > 0 && (which = answering(r->cl, min)))) {
        cli_err(cmd, "%s", cluster_error(r->cl));
        return CLI_FAIL;
    }
    int rc = cluster_load_module_on(r->cl, shown, bytes, len, which, m);
    free(which);
    if (rc) {
        cli_err(cmd, "%s", cluster_error(r->cl));
        return CLI_FAIL;
    }
    return 0;
}

int cli_running_ship(cli_running *r, const home_paths *h, const char *cmd,
                     const char *shown, const void *bytes, size_t len, cluster_module *m)
{
    return cli_running_ship_some(r, h, cmd, shown, bytes, len, 0, m);
}

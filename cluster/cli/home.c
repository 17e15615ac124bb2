/* FERRY_HOME: where a cluster keeps its state, and opening the cluster that
 * runs there. */
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

int cli_home_init(cli_home *h, const char *cmd)
{
    memset(h, 0, sizeof *h);
    int rc = conf_home(h->dir, sizeof h->dir);
    if (rc) {
        cli_err(cmd, "cannot tell where FERRY_HOME is (%s): set FERRY_HOME or HOME",
                ferry_strerror(rc));
        return rc;
    }
    struct {
        char *buf;
        const char *rel;
    } paths[] = {{h->state, "cluster.ini"},
                 {h->token, "token"},
                 {h->logs, "logs"},
                 {h->workers, "workers"},
                 {h->start_error, "start-error"},
                 {h->supervisor_pid, "supervisor.pid"}};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        if (conf_home_path(paths[i].buf, CLI_PATH_MAX, h->dir, paths[i].rel)) {
            cli_err(cmd, "FERRY_HOME path too long: %s", h->dir);
            return FERRY_ERANGE;
        }
    }
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag,
                        struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

void cli_home_forget_cluster(const cli_home *h)
{
    unlink(h->state);
    unlink(h->start_error);
    unlink(h->supervisor_pid);
    DIR *d = opendir(h->workers);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        long rank;
        char dir[CLI_FILE_MAX], mark[CLI_FILE_MAX];
        if (!conf_parse_long(e->d_name, 0, CONF_MAX_WORKERS, &rank))
            continue;
        cli_worker_dir(h, (int)rank, dir, sizeof dir);
        cli_worker_file(h, (int)rank, CLI_WORKER_MARK, mark, sizeof mark);
        struct stat st;
        if (lstat(mark, &st) == 0 && S_ISREG(st.st_mode))
            nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
    closedir(d);
    rmdir(h->workers); /* only when nothing else is left in it */
}

void cli_worker_dir(const cli_home *h, int rank, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%d", h->workers, rank);
}

void cli_worker_file(const cli_home *h, int rank, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%d/%s", h->workers, rank, name);
}

int cli_cluster_connect(const conf_cluster *conf, const char *token, bool heartbeat,
                        cluster **out)
{
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
                      .max_payload = (size_t)conf->max_message_bytes};
    int rc = cluster_create(targets, conf->n_workers, &o, out);
    free(targets);
    return rc;
}

int cli_running_open(cli_running *r, const cli_home *h, const char *cmd, bool quiet,
                     bool orphans)
{
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

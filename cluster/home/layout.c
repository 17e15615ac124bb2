/* FERRY_HOME's layout: the paths a cluster keeps its state under, and
 * forgetting a cluster that is gone. */
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "home.h"

int home_paths_init(home_paths *h, const char *dir)
{
    memset(h, 0, sizeof *h);
    snprintf(h->dir, sizeof h->dir, "%s", dir);
    struct {
        char *buf;
        const char *rel;
    } paths[] = {{h->state, "cluster.ini"},
                 {h->token, "token"},
                 {h->logs, "logs"},
                 {h->workers, "workers"},
                 {h->start_error, "start-error"},
                 {h->supervisor_pid, "supervisor.pid"}};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (conf_home_path(paths[i].buf, HOME_PATH_MAX, h->dir, paths[i].rel))
            return FERRY_ERANGE;
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

void home_forget_cluster(const home_paths *h)
{
    unlink(h->state);
    unlink(h->start_error);
    unlink(h->supervisor_pid);
    char grow[HOME_FILE_MAX];
    snprintf(grow, sizeof grow, "%s/%s", h->dir, HOME_GROW_FILE);
    unlink(grow);
    snprintf(grow, sizeof grow, "%s/%s", h->dir, HOME_GROW_LOCK);
    unlink(grow);
    DIR *d = opendir(h->workers);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        long rank;
        char dir[HOME_FILE_MAX], mark[HOME_FILE_MAX];
        if (!base_parse_long(e->d_name, 0, CONF_MAX_WORKERS, &rank))
            continue;
        home_worker_dir(h, (int)rank, dir, sizeof dir);
        home_worker_file(h, (int)rank, HOME_WORKER_MARK, mark, sizeof mark);
        struct stat st;
        if (lstat(mark, &st) == 0 && S_ISREG(st.st_mode))
            nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
    closedir(d);
    rmdir(h->workers); /* only when nothing else is left in it */
}

void home_worker_dir(const home_paths *h, int rank, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%d", h->workers, rank);
}

void home_worker_file(const home_paths *h, int rank, const char *name, char *buf,
                      size_t len)
{
    snprintf(buf, len, "%s/%d/%s", h->workers, rank, name);
}
